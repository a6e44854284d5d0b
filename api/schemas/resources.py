"""Pydantic models of the REST API: the contract the UI and other services rely on (extended,
never renamed). Unknown fields are rejected."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt

from api.paging import Page
from api.schemas import attributes
from api.schemas.progress import ON_STALL_DESCRIPTION, ProgressPublic, StallAfter
from scheduler.core.directive import Directive
from scheduler.core.names import MAX_NAME_LENGTH, NAME_PATTERN, name_problem
from scheduler.core.records import (
    ClusterRecord,
    EventRecord,
    GroupRecord,
    JobRecord,
    JobSpec,
    RunRecord,
)
from scheduler.core.states import ClusterKind, DesiredState, JobState, OnStall, Priority, RunState
from scheduler.core.text import text_problem
from scheduler.decisions import revisions
from scheduler.decisions.catalog import MAX_LIMIT
from scheduler.decisions.gate import QueueRow
from scheduler.decisions.health import ClusterHealth, HealthEvent
from scheduler.decisions.labels import (
    KEY_PATTERN,
    MAX_KEY,
    MAX_LABELS,
    MAX_VALUE,
    VALUE_PATTERN,
    key_problem,
)
from scheduler.decisions.replication import ReplicaRecord, ReplicaState, replicates
from scheduler.decisions.selffencing import CHECK_IN_GRACE_S, self_fencing


def _clean_text(value: str) -> str:
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


NAME_DESCRIPTION = (
    "letters and digits of any script and -_. (1 to 128 characters, not . or ..); the pattern "
    "is in Python's Unicode regular expression syntax"
)

#: free text: no control characters, no lone surrogates (``scheduler.core.text`` says why); the
#: published pattern says the first (JSON Schema cannot say the second)
CleanText = AfterValidator(_clean_text)
TEXT_PATTERN = r"^[^\x00-\x1f\x7f-\x9f]*$"
TEXT_SCHEMA: dict[str, Any] = {"pattern": TEXT_PATTERN}


def _valid_name(value: str) -> str:
    problem = name_problem(value)
    if problem is not None:
        raise ValueError(f"name {problem}")
    return value


#: a path ending in ``.py`` (no URL scheme), or a ``file:`` URL whose path ends in ``.py`` (no
#: query or fragment); no control characters. The rule itself, published in the OpenAPI document.
ENTRYPOINT_PATTERN = (
    r"^(?:[Ff][Ii][Ll][Ee]:[^?#\x00-\x1f\x7f-\x9f]*"
    r"|(?![A-Za-z][A-Za-z0-9+.-]*:)[^\x00-\x1f\x7f-\x9f]*)\.py$"
)
_ENTRYPOINT = re.compile(ENTRYPOINT_PATTERN)
_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _valid_entrypoint(value: str) -> str:
    if _ENTRYPOINT.fullmatch(value) is not None:
        return value
    scheme = _URL_SCHEME.match(value)
    if scheme is not None and scheme.group().lower() != "file:":
        raise ValueError("entrypoint must be a pipeline file: a path or a file:// URL")
    raise ValueError("entrypoint must be a Python file (.py), without a URL query or fragment")


Name = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        description=NAME_DESCRIPTION,
        json_schema_extra={"pattern": NAME_PATTERN},
    ),
    AfterValidator(_valid_name),
]
Entrypoint = Annotated[
    str,
    Field(
        min_length=1,
        max_length=1024,
        description="the pipeline file: a path or a file:// URL, ending in .py",
        examples=["/opt/pipelines/orders_enrich.py"],
        json_schema_extra={"pattern": ENTRYPOINT_PATTERN},
    ),
    CleanText,
    AfterValidator(_valid_entrypoint),
]
Label = Annotated[str, Field(max_length=128, json_schema_extra=TEXT_SCHEMA), CleanText]
Arg = Annotated[str, Field(max_length=4096, json_schema_extra=TEXT_SCHEMA), CleanText]
Args = Annotated[list[Arg], Field(max_length=256)]
ConfKey = Annotated[
    str, Field(min_length=1, max_length=256, json_schema_extra=TEXT_SCHEMA), CleanText
]
ConfValue = Annotated[str, Field(max_length=8192, json_schema_extra=TEXT_SCHEMA), CleanText]
Conf = Annotated[dict[ConfKey, ConfValue], Field(max_length=256)]
Location = Annotated[str, Field(max_length=1024, json_schema_extra=TEXT_SCHEMA), CleanText]


REPLICATE_DESCRIPTION = (
    "Mirror the job's checkpoint continuously into the storage root of its group's other "
    "cluster, so that a failover resumes it even when this cluster's storage is lost "
    '(docs/storage.md, "Checkpoint replication"). `null` (the default): only if the job is '
    "high priority."
)


def _valid_label_key(value: str) -> str:
    problem = key_problem(value)
    if problem is not None:
        raise ValueError(f"label key {problem}")
    return value


LabelKey = Annotated[
    str,
    Field(min_length=1, max_length=MAX_KEY, pattern=KEY_PATTERN),
    AfterValidator(_valid_label_key),
]
LabelValue = Annotated[str, Field(max_length=MAX_VALUE, pattern=VALUE_PATTERN)]
Labels = Annotated[
    dict[LabelKey, LabelValue],
    Field(
        max_length=MAX_LABELS,
        description="key/value labels to find and select jobs by (list filters, bulk "
        "operations). Keys: an optional DNS prefix and `/`, then 1 to 63 letters, digits, `-_.` "
        "beginning and ending with a letter or digit; values: empty or the same alphabet; at "
        f"most {MAX_LABELS} labels",
        examples=[{"env": "prod", "tier": "critical"}],
    ),
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Changes(_Strict):
    """A PATCH body: only the fields sent are changed, and at least one must be."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})


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
    replicate: StrictBool | None = Field(default=None, description=REPLICATE_DESCRIPTION)
    labels: Labels = Field(default_factory=dict)
    stall_after: StallAfter | None = None
    on_stall: OnStall = Field(default=OnStall.ALERT, description=ON_STALL_DESCRIPTION)

    def spec(self) -> JobSpec:
        """The job's spec: its fields are the spec's, by the same names."""
        return JobSpec(**{**self.model_dump(), "args": tuple(self.args)})


class JobUpdate(_Changes):
    """Only the fields sent are changed. Spec changes apply at the job's next run."""

    team: Label | None = None
    business: Label | None = None
    priority: Priority | None = None
    entrypoint: Entrypoint | None = None
    args: Args | None = None
    conf: Conf | None = None
    checkpoint_location: Location | None = None
    desired_state: DesiredState | None = None
    replicate: StrictBool | None = Field(
        default=None, description=REPLICATE_DESCRIPTION + " `null` sets it back to the default."
    )
    #: replaces the job's labels (send every label the job should keep)
    labels: Labels | None = None
    #: null sets it back to automatic (send the member to change it)
    stall_after: StallAfter | None = None
    on_stall: OnStall | None = Field(default=None, description=ON_STALL_DESCRIPTION)


class RunPublic(BaseModel):
    id: int
    attempt: int
    cluster: str
    node: str
    #: the membership epoch under which ``node`` created the run (fencing)
    owner_epoch: int
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
    fence_checked_at: datetime | None = Field(
        default=None,
        description="When the run's pipeline first asked `GET /v1/jobs/{name}/fence` with its "
        "run id (drover_runtime does at start and before every micro-batch commit); null: no "
        "fence check seen from this run.",
    )
    fenced_at: datetime | None = Field(
        default=None,
        description="When a failover fenced the run: its cluster could not be reached, so the "
        "run was closed in the store and its fencing token superseded (its self-fencing driver "
        "stops at its next check). Null: not fenced.",
    )
    fence_superseded_at: datetime | None = Field(
        default=None,
        description="When the run's driver was first answered 'superseded' by a fence check "
        "(it stops without committing). Null: not seen.",
    )
    drain_deadline: datetime | None = Field(
        default=None,
        description="A graceful stop was asked of the run's pipeline (finish the current "
        "micro-batch and exit); it is killed if still alive at this instant. Null: none asked.",
    )
    stop_batch: int | None = Field(
        default=None,
        description="The last micro-batch the pipeline committed before it stopped gracefully "
        "(the next run resumes after it from the checkpoint). Null: not stopped gracefully.",
        examples=[41],
    )
    lease_until: datetime | None = Field(
        default=None,
        description="The latest end of a fence lease granted to the run's driver (recorded "
        "coarsely: no answer's lease ends later). A driver cut off from Drover stops committing "
        "when its lease lapses; a run that ended without its cluster's confirmation (LOST) "
        "counts as surely gone only after this instant plus the nodes' clock margin. Null: "
        "never granted a lease.",
        examples=["2026-11-25T03:13:15Z"],
    )

    @classmethod
    def of(cls, run: RunRecord) -> RunPublic:
        return cls(**attributes(cls, run, node=run.node_id))


class DirectivePublic(BaseModel):
    """What an operation (a failover) asks of a job's owner."""

    operation: int
    item: int
    phase: str = Field(description="`drain` or `run`")
    source: str
    target: str
    force_unfenced: bool
    description: str

    @classmethod
    def of(cls, d: Directive) -> DirectivePublic:
        return cls(
            operation=d.operation_id,
            item=d.item_id,
            phase=d.phase.value,
            source=d.source,
            target=d.target,
            force_unfenced=d.force_unfenced,
            description=d.describe(),
        )


class ReplicationPublic(BaseModel):
    """A job's checkpoint replica (``scheduler.decisions.replication``): where it is, how far
    behind its source it is, what the replicator last did. Lag: ``lag_batches`` = source batch -
    replica batch; ``lag_seconds`` = age of the oldest committed source batch the replica lacks
    (0: none)."""

    job: str
    enabled: bool = Field(
        description="The job is replicated: its `replicate` setting, or (unset) high priority."
    )
    state: ReplicaState | None = Field(
        description="PENDING (no complete batch copied yet), CURRENT (holds the source's newest "
        "complete batch), LAGGING, ERROR (the last look failed: see `error`; the figures are "
        "the last good look's), PROMOTED (taken over by a failover). null: no replica yet."
    )
    reason: str = Field(
        default="", description="Why the job has no replica, when it has none (or is not kept)."
    )
    source_cluster: str | None = None
    source_location: str | None = None
    target_cluster: str | None = Field(
        default=None, description="The cluster whose storage root holds the replica."
    )
    location: str | None = Field(default=None, description="Where the replica is.")
    source_batch: int | None = Field(
        default=None, description="The source checkpoint's newest complete batch."
    )
    source_batch_at: datetime | None = None
    replica_batch: int | None = Field(
        default=None,
        description="The replica's newest complete batch: a failover resumes after it.",
    )
    replica_batch_at: datetime | None = Field(
        default=None, description="When the source committed the replica's newest batch."
    )
    lag_batches: int = 0
    lag_seconds: float = Field(
        default=0.0,
        description="Age (now) of the oldest batch the source committed and the replica lacks.",
    )
    observed_at: datetime | None = Field(
        default=None, description="The last successful look at the source and the replica."
    )
    stale: bool = Field(
        default=False,
        description="The job runs and nobody has looked at its replica for a while (the "
        "replicator of its owner is not running): the figures may be old.",
    )
    error: str = ""
    error_since: datetime | None = None
    files_copied: int = 0
    bytes_copied: int = 0
    last_copy_at: datetime | None = None
    last_copy_files: int = 0
    last_copy_bytes: int = 0
    last_copy_seconds: float = 0.0
    node: str | None = Field(default=None, description="The node that looked last.")
    held_by: str | None = Field(
        default=None,
        description="Who may write into the replica now: a node's replicator during its round, "
        "or a failover (`failover:<id>`) that took it over.",
    )
    held_until: datetime | None = None

    @classmethod
    def of(
        cls,
        job: JobRecord,
        replica: ReplicaRecord | None,
        *,
        now: datetime,
        stale_after: float,
        reason: str = "",
    ) -> ReplicationPublic:
        enabled = replicates(job)
        if replica is None:
            return cls(
                job=job.name,
                enabled=enabled,
                state=None,
                reason=reason
                or ("" if enabled else "not replicated (replicate unset and not high priority)"),
            )
        return cls(
            job=job.name,
            enabled=enabled,
            state=replica.state,
            reason=reason if not enabled else "",
            source_cluster=replica.source_cluster,
            source_location=replica.source_location,
            target_cluster=replica.target_cluster,
            location=replica.location,
            source_batch=replica.source_batch,
            source_batch_at=replica.source_batch_at,
            replica_batch=replica.replica_batch,
            replica_batch_at=replica.replica_batch_at,
            lag_batches=replica.lag_batches,
            lag_seconds=round(replica.lag_seconds(now), 3),
            observed_at=replica.observed_at,
            stale=enabled and job.state.has_live_run and replica.stale(now, stale_after),
            error=replica.error,
            error_since=replica.error_since,
            files_copied=replica.files_copied,
            bytes_copied=replica.bytes_copied,
            last_copy_at=replica.last_copy_at,
            last_copy_files=replica.last_copy_files,
            last_copy_bytes=replica.last_copy_bytes,
            last_copy_seconds=replica.last_copy_seconds,
            node=replica.node_id or None,
            held_by=replica.lease_holder,
            held_until=replica.lease_until,
        )


class QueuePublic(BaseModel):
    """Where a QUEUED job waits at the submission gate (``/v1/quotas``, cluster caps)."""

    position: int = Field(
        description="the job's place among the submissions its owner waits to make, in the "
        "order the gate serves them (1: next)",
        examples=[3],
    )
    kind: Literal["rate", "cluster"] = Field(
        description="`rate`: its business used its submission rate; `cluster`: a cap of the "
        "cluster (submissions in flight, running applications) is reached",
        examples=["rate"],
    )
    reason: str = Field(
        description="why it waits, in words",
        examples=["business ads is at its rate (5/s, burst 10)"],
    )
    since: datetime = Field(description="when the gate first held it back")


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
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="key/value labels (list filters and bulk selectors use them)",
        examples=[{"env": "prod", "tier": "critical"}],
    )
    desired_state: DesiredState
    state: JobState
    state_reason: str
    cluster: str | None
    owner: str | None
    current_run: RunPublic | None
    replicate: bool | None = Field(default=None, description=REPLICATE_DESCRIPTION)
    replication: ReplicationPublic | None = Field(
        default=None,
        description="Read-only. The job's checkpoint replica and its lag (as "
        "`GET /v1/jobs/{name}/replication`); in `GET /v1/jobs/{name}` only, null elsewhere.",
    )
    self_fencing: bool | None = Field(
        default=None,
        description="Read-only. Whether the job's pipeline fences itself (stops by itself once "
        "its run is no longer current): `true` when the current run has asked the fence "
        "endpoint; `false` -- no fence checks seen: not self-fencing -- when it has run for "
        f"{CHECK_IN_GRACE_S:g} s without asking (a plain PySpark pipeline without "
        "drover_runtime: Drover starts, stops, restarts and adopts it like any other, but a "
        "driver stranded on a partitioned cluster only ends by a confirmed kill); `null` when "
        "there is no run or it is too early to tell.",
    )
    directive: DirectivePublic | None = Field(
        default=None,
        description="Read-only. What a failover asks of the job's owner now (null: nothing): "
        "`drain` (take it off the source cluster: kill, or fence when the source cannot be "
        "reached), then `run` (switched to the target, submitted there).",
    )
    spec_version: int = Field(
        description="Version of the job's spec (entrypoint, args, conf, team, business, "
        "priority, checkpoint location). Moves only when a PATCH changes the spec; state changes, "
        "commands (start, stop, restart) and ownership never move it. It is the job's `ETag` and "
        "what `If-Match` is checked against.",
        examples=[3],
    )
    version: int = Field(
        description="Version of the job's record as a whole: moves on every change, the "
        "scheduler's state changes included. The scheduler's own writes are conditional on it; "
        "clients use `spec_version` for `If-Match`.",
        examples=[17],
    )
    stall_after: float | None = Field(
        default=None,
        description="Seconds without progress before a RUNNING job is stalled (null: "
        "automatic; see `progress`).",
    )
    on_stall: OnStall = Field(default=OnStall.ALERT, description=ON_STALL_DESCRIPTION)
    upgrade_deadline: datetime | None = Field(
        default=None,
        description="Read-only. A pending upgrade (a spec change with `rollback_after_seconds`) "
        "rolls back by itself to revision `upgrade_from` unless the new spec's run is RUNNING "
        "by then. Null: no upgrade pending.",
    )
    upgrade_from: int | None = Field(
        default=None,
        description="Read-only. The revision a pending upgrade rolls back to.",
        examples=[3],
    )
    progress: ProgressPublic | None = Field(
        default=None,
        description="Read-only. What the current run's pipeline last reported with its fence "
        "checks (batch, rows, rates, duration), and whether it is stalled; `status` "
        "`no-reports` for a pipeline that does not report (plain PySpark); null without a run. "
        "History: `GET /v1/jobs/{name}/progress`.",
    )
    queue: QueuePublic | None = Field(
        default=None,
        description="Read-only. For a QUEUED job the submission gate holds back: its position "
        "and the reason (null otherwise).",
    )
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(
        cls,
        job: JobRecord,
        replication: ReplicationPublic | None = None,
        queue: QueueRow | None = None,
        now: datetime | None = None,
    ) -> JobPublic:
        """``job`` as the API shows it (``now``: the time it is shown at, default the clock)."""
        return cls(
            **attributes(
                cls,
                job,
                current_run=RunPublic.of(job.current_run) if job.current_run else None,
                replication=replication,
                self_fencing=self_fencing(job.current_run, now or datetime.now(UTC)),
                directive=DirectivePublic.of(job.directive) if job.directive else None,
                progress=ProgressPublic.of_job(job),
                queue=QueuePublic(
                    position=queue.position,
                    kind="cluster" if queue.kind == "cluster" else "rate",
                    reason=queue.reason,
                    since=queue.since,
                )
                if queue is not None and job.state == JobState.QUEUED
                else None,
            )
        )


#: what the audit log keeps of a job: its name and group, its spec but for its labels, its
#: desired state and its versions
_AUDITED = (set(revisions.SPEC_FIELDS) - {"labels"}) | {
    "name",
    "group",
    "desired_state",
    "spec_version",
    "version",
}


def audit_doc(job: JobRecord | JobPublic) -> dict[str, Any]:
    """A job as the audit log keeps it: its spec and desired state (JSON)."""
    public = job if isinstance(job, JobPublic) else JobPublic.of(job)
    return public.model_dump(mode="json", include=_AUDITED)


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
        return cls(**attributes(cls, event, node=event.node_id))


# -- clusters and groups (scheduler.decisions.catalog says what the fields mean)
# --------------------------

Url = Annotated[str, Field(max_length=512, json_schema_extra=TEXT_SCHEMA), CleanText]
ZoneLabel = Annotated[str, Field(max_length=64, json_schema_extra=TEXT_SCHEMA), CleanText]
CapacityLimit = Annotated[StrictInt, Field(ge=0, le=MAX_LIMIT)]
StorageRoot = Annotated[
    str, Field(min_length=1, max_length=1024, json_schema_extra=TEXT_SCHEMA), CleanText
]
ConfDir = Annotated[str, Field(max_length=1024, json_schema_extra=TEXT_SCHEMA), CleanText]
ArtifactRoots = Annotated[
    list[
        Annotated[
            str, Field(min_length=1, max_length=1024, json_schema_extra=TEXT_SCHEMA), CleanText
        ]
    ],
    Field(max_length=64),
]


class ClusterCreate(_Strict):
    """A Spark cluster. ``storage_root``: an absolute path, ``file://``, ``hdfs://`` or ``s3a://``
    URI. Capacity limits: 0 = unlimited. A ``yarn`` cluster needs ``rest_url`` (the
    ResourceManager's web address) and ``hadoop_conf_dir`` (docs/yarn.md)."""

    name: Name
    kind: ClusterKind
    storage_root: StorageRoot
    master_url: Url = ""
    rest_url: Url = ""
    ui_url: Url = ""
    az: ZoneLabel = ""
    cloud: ZoneLabel = ""
    max_concurrent_submissions: CapacityLimit = 0
    max_running_apps: CapacityLimit = 0
    max_cores: CapacityLimit = 0
    #: where job entrypoints may come from: path prefixes (``/opt/pipelines/``) or URL prefixes
    #: (``s3a://bucket/pipelines/``); empty = the node's ``DROVER_ARTIFACT_ROOTS``
    artifact_roots: ArtifactRoots = Field(default_factory=list)
    #: a yarn cluster's Hadoop client configuration directory on every node (HADOOP_CONF_DIR)
    hadoop_conf_dir: ConfDir = ""


class ClusterUpdate(_Changes):
    """Only the fields sent are changed; ``health`` is read-only."""

    kind: ClusterKind | None = None
    storage_root: StorageRoot | None = None
    master_url: Url | None = None
    rest_url: Url | None = None
    ui_url: Url | None = None
    az: ZoneLabel | None = None
    cloud: ZoneLabel | None = None
    max_concurrent_submissions: CapacityLimit | None = None
    max_running_apps: CapacityLimit | None = None
    max_cores: CapacityLimit | None = None
    artifact_roots: ArtifactRoots | None = None
    hadoop_conf_dir: ConfDir | None = None


class ClusterPublic(BaseModel):
    name: str
    kind: ClusterKind
    master_url: str
    rest_url: str
    ui_url: str
    az: str
    cloud: str
    storage_root: str
    health: ClusterHealth
    max_concurrent_submissions: int
    max_running_apps: int
    max_cores: int
    version: int
    created_at: datetime | None
    updated_at: datetime | None
    artifact_roots: list[str] = Field(default_factory=list)
    hadoop_conf_dir: str = ""

    @classmethod
    def of(cls, cluster: ClusterRecord) -> ClusterPublic:
        return cls(**attributes(cls, cluster))


class GroupCreate(_Strict):
    name: Name
    primary_cluster: Name
    failover_cluster: Name | None = None


class GroupUpdate(_Changes):
    """Only the fields sent are changed; ``failover_cluster: null`` removes the failover."""

    primary_cluster: Name | None = None
    failover_cluster: Name | None = None


class GroupMemberPublic(BaseModel):
    """A live Drover node registered in the group (filled from the membership view)."""

    node_id: str
    role: str
    az: str = ""
    cloud: str = ""
    api_url: str = ""
    started_at: float | None = None
    #: jobs of the group this member owns
    jobs: int | None = None


class GroupPublic(BaseModel):
    """A group's catalog fields; the live fields are null where no membership view is attached."""

    name: str
    primary_cluster: str
    failover_cluster: str | None
    version: int
    created_at: datetime | None
    updated_at: datetime | None
    members: list[GroupMemberPublic] | None = None
    #: node ids sharing the group's jobs, in ownership order (``scheduler.core.ownership``)
    pool: list[str] | None = None
    #: fences every claim: ``(epoch_generation << 32) | cversion`` of the members znode
    epoch: int | None = None
    #: the epoch's high bits: the membership generation of the group's ZooKeeper members znode,
    #: raised each time that znode is recreated (a ZooKeeper that lost its data) so that epochs
    #: keep growing
    epoch_generation: int | None = None

    @classmethod
    def of(cls, group: GroupRecord, **live: Any) -> GroupPublic:
        """``live``: members, pool, epoch, as the membership view knows them."""
        return cls(**attributes(cls, group, **live))


# -- cluster health (scheduler.decisions.health says what the states mean)
# --------------------------------


class VotePublic(BaseModel):
    """One node's latest probe of the cluster."""

    node_id: str
    at: datetime
    ok: bool
    latency_s: float
    detail: str
    #: counted in the majority (a live node's fresh vote)
    counted: bool


class HealthEventPublic(BaseModel):
    """A change of the cluster's health with its evidence (the votes, or the operator's reason)."""

    id: int
    at: datetime
    from_state: ClusterHealth
    to_state: ClusterHealth
    decided_by: str
    actor: str
    reason: str
    evidence: dict[str, Any]

    @classmethod
    def of(cls, event: HealthEvent) -> HealthEventPublic:
        return cls(**attributes(cls, event))


class AssessmentPublic(BaseModel):
    """What the votes say now (the monitor records a change at its next round)."""

    state: ClusterHealth
    reason: str
    recent_failures: int
    last_failure: datetime | None
    #: an automatic abnormal state becomes NORMAL then if no probe fails meanwhile
    normal_not_before: datetime | None
    #: the node ids counted as alive (null: membership unknown here; every fresh voter counts)
    live_nodes: list[str] | None


class ClusterHealthPublic(BaseModel):
    cluster: str
    state: ClusterHealth
    reason: str
    since: datetime | None
    assessment: AssessmentPublic
    #: each node's latest vote within the vote freshness (live nodes' are counted)
    votes: list[VotePublic]
    #: the latest transitions, newest first
    history: list[HealthEventPublic]


class MarkAbnormal(_Strict):
    """Why the cluster is marked abnormal (shown on its jobs and in the audit log)."""

    reason: Annotated[
        str, Field(min_length=1, max_length=2000, json_schema_extra=TEXT_SCHEMA), CleanText
    ]


class ClearAbnormal(_Strict):
    reason: Annotated[str, Field(max_length=2000, json_schema_extra=TEXT_SCHEMA), CleanText] = ""


# -- pages of lists (``api.paging``) -------------------------------------------------------------


class JobPage(Page[JobPublic]):
    """A page of jobs."""


class RunPage(Page[RunPublic]):
    """A page of a job's runs, newest first."""


class EventPage(Page[EventPublic]):
    """A page of a job's events, newest first."""


class ClusterPage(Page[ClusterPublic]):
    """A page of clusters, by name."""


class GroupPage(Page[GroupPublic]):
    """A page of groups, by name."""
