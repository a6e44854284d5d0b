"""Plain records the store hands out: what the rest of the scheduler sees of the metadata.

SQLAlchemy models stay inside ``scheduler.store``; these frozen dataclasses cross every other
boundary (reconciler, actors, API).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scheduler.states import DesiredState, JobState, Priority, RunState


@dataclass(frozen=True)
class JobSpec:
    """What a user submits to create a job."""

    name: str
    entrypoint: str
    group: str = "default"
    team: str = ""
    business: str = ""
    priority: Priority = Priority.NORMAL
    args: tuple[str, ...] = ()
    conf: dict[str, str] = field(default_factory=dict)
    checkpoint_location: str = ""
    desired_state: DesiredState = DesiredState.STOPPED


@dataclass(frozen=True)
class RunRecord:
    id: int
    job_name: str
    attempt: int
    generation: int
    cluster: str
    node_id: str
    owner_epoch: int
    fencing_token: str
    app_name: str
    checkpoint_location: str
    submission_id: str | None
    app_id: str | None
    state: RunState
    reason: str
    exit_code: int | None
    created_at: datetime
    submitted_at: datetime | None
    started_at: datetime | None
    ended_at: datetime | None
    #: the first fence check of the run's pipeline (None: none seen)
    fence_checked_at: datetime | None = None


@dataclass(frozen=True)
class JobRecord:
    id: int
    name: str
    group: str
    team: str
    business: str
    priority: Priority
    entrypoint: str
    args: tuple[str, ...]
    conf: dict[str, str]
    checkpoint_location: str
    desired_state: DesiredState
    state: JobState
    state_reason: str
    cluster: str | None
    current_run_id: int | None
    generation: int
    attempts_reset_at: datetime
    not_before: datetime | None
    owner: str | None
    owner_epoch: int
    #: the row's concurrency counter (every write moves it)
    version: int
    #: the spec's version (only spec changes move it): what If-Match protects
    spec_version: int
    created_at: datetime
    updated_at: datetime
    current_run: RunRecord | None = None


@dataclass(frozen=True)
class EventRecord:
    id: int
    job_name: str
    run_id: int | None
    at: datetime
    from_state: str | None
    to_state: str | None
    cause: str
    message: str
    node_id: str


@dataclass(frozen=True)
class ClusterRecord:
    """A cluster (``scheduler.catalog`` says what its fields mean; limits: 0 = unlimited)."""

    name: str
    kind: str
    master_url: str
    rest_url: str
    ui_url: str
    az: str
    cloud: str
    storage_root: str
    health: str
    max_concurrent_submissions: int
    max_running_apps: int = 0
    max_cores: int = 0
    version: int = 1
    created_at: datetime | None = None
    updated_at: datetime | None = None
    #: why the cluster is in its health state; when it entered it (None: NORMAL since created)
    health_reason: str = ""
    health_since: datetime | None = None
    #: where entrypoints may come from (empty: the node's DROVER_ARTIFACT_ROOTS)
    artifact_roots: tuple[str, ...] = ()


@dataclass(frozen=True)
class GroupRecord:
    name: str
    primary_cluster: str
    failover_cluster: str | None
    version: int = 1
    created_at: datetime | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True)
class AuditRecord:
    id: int
    at: datetime
    actor: str
    action: str
    target_kind: str
    target_name: str
    detail: dict[str, Any]
    node_id: str
    team: str = ""
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
