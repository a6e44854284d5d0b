"""Pydantic models of ``/v1/operations``: bulk start, stop and restart by selector, and the
operations of every kind as one list."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, Field, StrictBool, StrictInt

from api.paging import Page
from api.schemas.operations import (
    PlanDigest,
    Reason,
    StepPublic,
    dry_fields,
    item_fields,
    operation_fields,
    planned_fields,
)
from api.schemas.resources import Label, Name, _Strict
from scheduler.core.states import JobState, Priority
from scheduler.decisions import labels as label_rules
from scheduler.decisions.operations import bulk
from scheduler.decisions.operations.model import (
    ItemRecord,
    OperationKind,
    OperationRecord,
    OperationState,
)

LabelRequirement = Annotated[
    str,
    Field(
        min_length=1,
        max_length=label_rules.MAX_KEY + 2 + label_rules.MAX_VALUE,
        pattern=label_rules.REQUIREMENT_PATTERN,
        description="`key=value`, `key!=value`, `key` or `!key`",
        examples=["env=prod"],
    ),
]
NamePrefix = Annotated[
    str,
    Field(
        max_length=128,
        pattern=r"^[^\x00-\x1f\x7f-\x9f%]*$",
        description="only jobs whose name begins with it",
        examples=["orders-"],
    ),
]


class BulkKind(enum.StrEnum):
    """What a bulk operation asks of each job (the job commands of ``/v1/jobs/{name}/...``)."""

    START = "start"
    STOP = "stop"
    RESTART = "restart"


class BulkSelectorIn(_Strict):
    """Which jobs: every non-empty field must match; `all` selects every job you may act on (a
    selector must name something: an empty one is refused)."""

    teams: Annotated[list[Label], Field(max_length=1000)] = Field(
        default_factory=list, description="only jobs of these teams", examples=[["payments"]]
    )
    businesses: Annotated[list[Label], Field(max_length=1000)] = Field(
        default_factory=list, description="only jobs of these businesses", examples=[["retail"]]
    )
    groups: Annotated[list[Name], Field(max_length=1000)] = Field(
        default_factory=list, description="only jobs of these groups", examples=[["ads"]]
    )
    clusters: Annotated[list[Name], Field(max_length=1000)] = Field(
        default_factory=list,
        description="only jobs on these clusters: where the job is (its live run's cluster, "
        "else its cluster, else its group's primary)",
        examples=[["spark-a"]],
    )
    states: Annotated[list[JobState], Field(max_length=9)] = Field(
        default_factory=list,
        description="only jobs in these observed states",
        examples=[["FAILED"]],
    )
    priorities: Annotated[list[Priority], Field(max_length=3)] = Field(
        default_factory=list, description="only jobs of these priorities", examples=[["high"]]
    )
    name_prefix: NamePrefix = ""
    labels: Annotated[list[LabelRequirement], Field(max_length=label_rules.MAX_REQUIREMENTS)] = (
        Field(
            default_factory=list,
            description="label requirements, all of which a job meets",
            examples=[["env=prod", "!canary"]],
        )
    )
    jobs: Annotated[list[Name], Field(max_length=10000)] = Field(
        default_factory=list, description="only these jobs (by name)", examples=[["orders-enrich"]]
    )
    all: StrictBool = Field(
        default=False,
        description="select every job you may act on (an otherwise empty selector is refused)",
        examples=[False],
    )

    def selector(self) -> bulk.Selector:
        return bulk.Selector(
            teams=frozenset(self.teams),
            businesses=frozenset(self.businesses),
            groups=frozenset(self.groups),
            clusters=frozenset(self.clusters),
            states=frozenset(self.states),
            priorities=frozenset(self.priorities),
            name_prefix=self.name_prefix,
            labels=tuple(self.labels),
            jobs=frozenset(self.jobs),
            all=self.all,
        )


class BulkCreate(_Strict):
    kind: BulkKind = Field(
        description="start, stop or restart every selected job", examples=["restart"]
    )
    selector: BulkSelectorIn = Field(description="which jobs")
    dry_run: StrictBool = Field(
        default=False,
        description="only plan: answer the items an execution would run, in that order, and "
        "store nothing",
        examples=[True],
    )
    reason: Reason = Field(
        default="", description="why, in words, for people (audited)", examples=["CHG-1234"]
    )
    parallelism: Annotated[StrictInt, Field(ge=1, le=5000)] | None = Field(
        default=None,
        description="items under way at once (default: 500 for start and stop, whose "
        "submissions the submission gate paces; 10 for a rolling restart)",
        examples=[10],
    )
    expected_plan: PlanDigest | None = Field(
        default=None,
        description="the `plan_digest` of the dry run reviewed: the execution is refused (409) "
        "when the plan differs now",
        examples=["3f2a9c0d41e7b655"],
    )
    grace_seconds: (
        Annotated[float, Field(strict=True, ge=0, le=86400, allow_inf_nan=False)] | None
    ) = Field(
        default=None,
        description="stop and restart: seconds a graceful stop of each live run waits for its "
        "pipeline to finish its micro-batch and exit before it is killed (a self-fencing "
        "pipeline only). Absent: the node's `DROVER_STOP_GRACE_SECONDS`; 0: kill at once",
        examples=[30],
    )


class OperationItemPublic(BaseModel):
    """One job of an operation: what the plan does with it and how far it got."""

    position: int = Field(description="its place in the plan (0 first)", examples=[0])
    job: str = Field(description="the job's name", examples=["orders-enrich"])
    group: str = Field(description="the job's group", examples=["ads"])
    team: str | None = Field(default=None, description="the job's team", examples=["ads"])
    priority: Priority | None = Field(description="the job's priority", examples=["high"])
    action: str = Field(
        description="what the plan does: start, stop, restart, skip, refuse (bulk); kill, "
        "fence, move, skip, refuse (failover)",
        examples=["restart"],
    )
    why: str = Field(
        description="why, in words", examples=["RUNNING: will replace run 812 on A by a new run"]
    )
    step: str = Field(
        description="PENDING, then WAITING (bulk) or the failover steps; then DONE, SKIPPED, "
        "REFUSED, FAILED or CANCELLED",
        examples=["WAITING"],
    )
    waiting: str = Field(
        description="what the item waits for now ('' when it does not)",
        examples=["the job is QUEUED: business retail at its rate"],
    )
    cluster: str | None = Field(
        description="where the job was when planned (a failover: its source)", examples=["A"]
    )
    attempts: int = Field(
        default=0, description="failed attempts of its current step", examples=[0]
    )
    last_error: str = Field(default="", description="its last error ('' none)", examples=[""])
    history: list[StepPublic] = Field(
        default_factory=list, description="the steps it went through, oldest first", examples=[[]]
    )
    started_at: datetime | None = Field(
        default=None, description="when it left PENDING (UTC)", examples=["2026-11-25T03:12:45Z"]
    )
    finished_at: datetime | None = Field(
        default=None, description="when it ended (UTC)", examples=["2026-11-25T03:14:02Z"]
    )
    updated_at: datetime | None = Field(
        default=None, description="when it last changed (UTC)", examples=["2026-11-25T03:14:02Z"]
    )

    @classmethod
    def of(cls, item: ItemRecord) -> OperationItemPublic:
        return cls(
            **item_fields(item),
            team=item.detail.get("team"),
            action=item.action,
            cluster=item.source_cluster,
        )

    @classmethod
    def planned(cls, position: int, item: bulk.PlannedItem) -> OperationItemPublic:
        return cls(
            **planned_fields(position, item, bulk.Step.PENDING.value),
            team=item.team,
            action=item.action.value,
            cluster=item.cluster,
        )


class OperationPublic(BaseModel):
    """An operation over many jobs (a bulk start, stop, restart, or a failover): its plan and,
    once executed, each item's progress."""

    id: int | None = Field(
        description="its number; null for a dry run (nothing is stored)", examples=[42]
    )
    kind: OperationKind = Field(
        description="start, stop, restart (bulk) or failover", examples=["restart"]
    )
    dry_run: bool = Field(description="only a plan: nothing was stored", examples=[False])
    state: OperationState | None = Field(
        description="PENDING, RUNNING, SUCCEEDED, FAILED (an item failed or was refused), "
        "CANCELLED; null for a dry run",
        examples=["RUNNING"],
    )
    selector: dict[str, Any] = Field(
        description="the selector it was planned from", examples=[{"teams": ["ads"]}]
    )
    reason: str = Field(description="why, in words, for people", examples=["CHG-1234"])
    created_by: str = Field(description="who asked for it", examples=["user:alice"])
    team: str | None = Field(
        default=None,
        description="the one team whose jobs it acts on (null: several teams, or a failover)",
        examples=["ads"],
    )
    plan_digest: str = Field(
        description="identifies the plan: the same items in the same order",
        examples=["3f2a9c0d41e7b655"],
    )
    parallelism: int | None = Field(description="items under way at once", examples=[10])
    grace_seconds: float | None = Field(
        default=None,
        description="the graceful stop each stop or restart asks for (null: the node's default)",
        examples=[30],
    )
    source: str | None = Field(
        default=None, description="a failover's source cluster", examples=["A"]
    )
    target: str | None = Field(
        default=None, description="a failover's target cluster", examples=["B"]
    )
    executor: str | None = Field(
        default=None, description="the node executing it", examples=["node-a1"]
    )
    executor_epoch: int | None = Field(
        default=None, description="the epoch of the executor's claim", examples=[4294967299]
    )
    cancel_requested: bool = Field(
        default=False, description="a cancel was asked for", examples=[False]
    )
    cancel_requested_at: datetime | None = Field(
        default=None, description="when a cancel was asked for (UTC)", examples=[None]
    )
    cancel_requested_by: str | None = Field(
        default=None, description="who asked for the cancel", examples=[None]
    )
    created_at: datetime | None = Field(
        default=None, description="when it was created (UTC)", examples=["2026-11-25T03:12:45Z"]
    )
    started_at: datetime | None = Field(
        default=None, description="when a node started it (UTC)", examples=["2026-11-25T03:12:46Z"]
    )
    finished_at: datetime | None = Field(
        default=None, description="when it ended (UTC)", examples=["2026-11-25T03:14:02Z"]
    )
    updated_at: datetime | None = Field(
        default=None, description="when it last changed (UTC)", examples=["2026-11-25T03:14:02Z"]
    )
    counts: dict[str, int] = Field(
        description="items per step (per planned action for a dry run)",
        examples=[{"DONE": 12, "WAITING": 3, "PENDING": 5}],
    )
    total: int = Field(description="items in the plan", examples=[20])
    finished: int = Field(
        description="items that ended (DONE, SKIPPED, REFUSED, FAILED, CANCELLED)", examples=[12]
    )
    items: list[OperationItemPublic] = Field(
        default_factory=list, description="its items in plan order (empty in lists)", examples=[[]]
    )

    @classmethod
    def of(
        cls, op: OperationRecord, *, counts: dict[str, int] | None = None, items: bool = True
    ) -> OperationPublic:
        return cls(
            **operation_fields(op, counts),
            kind=op.kind,
            team=op.team,
            grace_seconds=op.options.get("grace_seconds"),
            items=[OperationItemPublic.of(i) for i in op.items] if items else [],
        )

    @classmethod
    def dry(
        cls,
        plan: bulk.Plan,
        selector: bulk.Selector,
        *,
        reason: str,
        by: str,
        parallelism: int,
        grace_seconds: float | None = None,
    ) -> OperationPublic:
        teams = plan.teams
        fields = dry_fields(
            plan.digest, len(plan.items), reason=reason, by=by, parallelism=parallelism
        )
        return cls(
            **fields,
            kind=plan.kind,
            selector=selector.to_json(),
            team=next(iter(teams)) if len(teams) == 1 else None,
            grace_seconds=grace_seconds,
            counts=plan.counts(),
            items=[OperationItemPublic.planned(n, i) for n, i in enumerate(plan.items)],
        )


class OperationPage(Page[OperationPublic]):
    """A page of operations, newest first (their items: ``GET /v1/operations/{id}``)."""
