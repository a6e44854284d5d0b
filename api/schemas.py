"""Pydantic models of the REST API (the contract of DESIGN §5). Unknown fields are rejected."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Generic, TypeVar
from urllib.parse import urlparse

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from scheduler.names import name_problem
from scheduler.records import EventRecord, JobRecord, RunRecord
from scheduler.states import DesiredState, JobState, Priority, RunState


def _valid_name(value: str) -> str:
    problem = name_problem(value)
    if problem is not None:
        raise ValueError(f"name {problem}")
    return value


def _valid_entrypoint(value: str) -> str:
    parsed = urlparse(value)
    if parsed.scheme not in ("", "file"):
        raise ValueError("entrypoint must be a pipeline file: a path or a file:// URL")
    path = parsed.path if parsed.scheme == "file" else value
    if not path.endswith(".py"):
        raise ValueError("entrypoint must be a Python file (.py)")
    return value


Name = Annotated[str, AfterValidator(_valid_name)]
Entrypoint = Annotated[str, Field(min_length=1, max_length=1024), AfterValidator(_valid_entrypoint)]
Label = Annotated[str, Field(max_length=128)]
Args = Annotated[list[Annotated[str, Field(max_length=4096)]], Field(max_length=256)]
Conf = Annotated[
    dict[Annotated[str, Field(min_length=1, max_length=256)], str], Field(max_length=256)
]
Location = Annotated[str, Field(max_length=1024)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class JobCreate(_Strict):
    name: Name
    entrypoint: Entrypoint
    group: Name = "default"
    team: Label = ""
    business: Label = ""
    priority: Priority = Priority.NORMAL
    args: Args = Field(default_factory=list)
    conf: Conf = Field(default_factory=dict)
    checkpoint_location: Location = ""
    desired_state: DesiredState = DesiredState.STOPPED


class JobUpdate(_Strict):
    """Only the fields sent are changed. Spec changes apply at the job's next run."""

    team: Label | None = None
    business: Label | None = None
    priority: Priority | None = None
    entrypoint: Entrypoint | None = None
    args: Args | None = None
    conf: Conf | None = None
    checkpoint_location: Location | None = None
    desired_state: DesiredState | None = None


class RunPublic(BaseModel):
    id: int
    attempt: int
    cluster: str
    node: str
    state: RunState
    reason: str
    exit_code: int | None
    app_name: str
    submission_id: str | None
    app_id: str | None
    checkpoint_location: str
    created_at: datetime
    submitted_at: datetime | None
    started_at: datetime | None
    ended_at: datetime | None

    @classmethod
    def of(cls, run: RunRecord) -> RunPublic:
        return cls(
            id=run.id,
            attempt=run.attempt,
            cluster=run.cluster,
            node=run.node_id,
            state=run.state,
            reason=run.reason,
            exit_code=run.exit_code,
            app_name=run.app_name,
            submission_id=run.submission_id,
            app_id=run.app_id,
            checkpoint_location=run.checkpoint_location,
            created_at=run.created_at,
            submitted_at=run.submitted_at,
            started_at=run.started_at,
            ended_at=run.ended_at,
        )


class JobPublic(BaseModel):
    name: str
    group: str
    team: str
    business: str
    priority: Priority
    entrypoint: str
    args: list[str]
    conf: dict[str, str]
    checkpoint_location: str
    desired_state: DesiredState
    state: JobState
    state_reason: str
    cluster: str | None
    owner: str | None
    current_run: RunPublic | None
    version: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, job: JobRecord) -> JobPublic:
        return cls(
            name=job.name,
            group=job.group,
            team=job.team,
            business=job.business,
            priority=job.priority,
            entrypoint=job.entrypoint,
            args=list(job.args),
            conf=dict(job.conf),
            checkpoint_location=job.checkpoint_location,
            desired_state=job.desired_state,
            state=job.state,
            state_reason=job.state_reason,
            cluster=job.cluster,
            owner=job.owner,
            current_run=RunPublic.of(job.current_run) if job.current_run else None,
            version=job.version,
            created_at=job.created_at,
            updated_at=job.updated_at,
        )


class EventPublic(BaseModel):
    id: int
    at: datetime
    run_id: int | None
    from_state: str | None
    to_state: str | None
    cause: str
    message: str
    node: str

    @classmethod
    def of(cls, event: EventRecord) -> EventPublic:
        return cls(
            id=event.id,
            at=event.at,
            run_id=event.run_id,
            from_state=event.from_state,
            to_state=event.to_state,
            cause=event.cause,
            message=event.message,
            node=event.node_id,
        )


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """A page of a list: ``data`` holds up to ``limit`` items, ``count`` all that match."""

    data: list[T]
    count: int
    limit: int
    offset: int
