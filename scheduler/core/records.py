"""Plain records the store hands out: what the rest of the scheduler sees of the metadata.

SQLAlchemy models stay inside ``scheduler.store``; these frozen dataclasses cross every other
boundary (reconciler, actors, API).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scheduler.core.directive import Directive
from scheduler.core.states import DesiredState, JobState, OnStall, Priority, RunState


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
    #: mirror the checkpoint to the other cluster (``scheduler.decisions.replication``); None: if
    #: high priority
    replicate: bool | None = None
    #: key -> value (``scheduler.decisions.labels``)
    labels: dict[str, str] = field(default_factory=dict)
    #: seconds without progress before a RUNNING job is stalled (None: automatic); what then
    stall_after: float | None = None
    on_stall: OnStall = OnStall.ALERT


#: how many superseded token digests a run keeps (``RunRecord.superseded_tokens``)
SUPERSEDED_KEPT = 8


@dataclass(frozen=True)
class RunRecord:
    id: int
    job_name: str
    attempt: int
    generation: int
    cluster: str
    node_id: str
    owner_epoch: int
    #: what the store keeps of the run's fencing token: its SHA-256 (hex), like an API token's
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
    #: when the run was fenced (closed in the store because its cluster could not be reached,
    #: its token superseded) and when its driver was first answered "superseded" by a fence
    #: check (scheduler/decisions/steering.py, api/routes/fence.py)
    fenced_at: datetime | None = None
    fence_superseded_at: datetime | None = None
    #: a graceful stop was asked of the run's pipeline (it finishes its micro-batch and exits);
    #: it is killed once this instant passed (None: no graceful stop asked)
    drain_deadline: datetime | None = None
    #: the last micro-batch the run's pipeline committed before it stopped gracefully
    stop_batch: int | None = None
    #: the latest end of a fence lease Drover may have granted the run's driver (None: never
    #: granted one); scheduler/decisions/leases.py
    lease_until: datetime | None = None
    #: when the latest submission of the run was decided: its intent, or its latest reissue
    #: (None: a run recorded before this was kept; ``created_at`` stands in). A run still
    #: SUBMITTING without a submission id is *in doubt* for a grace after it (the cluster may
    #: still create the driver of a submission whose outcome was unknown):
    #: ``scheduler.decisions.planning.in_doubt_until``
    submit_intent_at: datetime | None = None
    #: the digests of the run's earlier tokens, oldest first, comma separated (each reissue adds
    #: the one it replaced; the last ``SUPERSEDED_KEPT``): an application that carries one of
    #: them is this deployment's late duplicate of the run (``scheduler.decisions.strays``)
    superseded_tokens: str = ""
    #: the fencing token itself: only on the record the write that minted it returned (an
    #: intent, a reissue), which the submission carries to the driver; never stored
    fencing_secret: str | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class ProgressRecord:
    """A run's progress as Drover keeps it (the pipeline's latest report, its heartbeat and the
    stall verdict; ``scheduler.decisions.stalls`` decides on it)."""

    run_id: int
    job_id: int
    batch_id: int | None
    rows: int | None
    input_rate: float | None
    processing_rate: float | None
    batch_duration_ms: int | None
    trigger_interval_ms: int | None
    spark_timestamp: str | None
    declared_at: datetime
    reported_at: datetime
    heartbeat_at: datetime
    reports: int = 0
    stalled_since: datetime | None = None


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
    #: mirror the checkpoint to the other cluster (``scheduler.decisions.replication``); None: if
    #: high priority
    replicate: bool | None = None
    #: key -> value (``scheduler.decisions.labels``)
    labels: dict[str, str] = field(default_factory=dict)
    #: what an operation asks of the job's owner (scheduler/core/directive.py); None: nothing
    directive: Directive | None = None
    #: seconds without progress before the job is stalled (None: automatic;
    #: scheduler.decisions.stalls)
    stall_after: float | None = None
    on_stall: OnStall = OnStall.ALERT
    #: what the current run's pipeline last reported (None: nothing; read by the API only)
    progress: ProgressRecord | None = None
    #: seconds a graceful stop of the job's run waits before a kill, as the last stop, restart
    #: or upgrade asked (None: the node's ``stop_grace_seconds``; 0: kill at once)
    grace_seconds: float | None = None
    #: a pending upgrade rolls back to revision ``upgrade_from`` unless a run of the job's
    #: generation is RUNNING by ``upgrade_deadline`` (scheduler.decisions.revisions)
    upgrade_deadline: datetime | None = None
    upgrade_from: int | None = None


@dataclass(frozen=True)
class Failures:
    """A job's runs that ended as a counted failure within its restart window (how many, and
    when the last one ended): what the ledger reads for the restart policy."""

    count: int = 0
    last_at: datetime | None = None


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
    """A cluster (``scheduler.decisions.catalog`` says what its fields mean; limits: 0 =
    unlimited)."""

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
    #: a YARN cluster's Hadoop client configuration on the nodes (HADOOP_CONF_DIR)
    hadoop_conf_dir: str = ""


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


@dataclass(frozen=True)
class RevisionRecord:
    """One revision of a job's spec (``scheduler.decisions.revisions``)."""

    job_name: str
    revision: int
    spec: dict[str, Any]
    cause: str
    message: str
    rollback_of: int | None
    created_at: datetime
