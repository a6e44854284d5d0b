"""The metadata schema (SQLAlchemy 2.x). Only the store package imports this module.

Runs on SQLite (embedded default) and MySQL/MariaDB (utf8mb4). Names are compared byte-wise on
MySQL (``utf8mb4_bin``): ``Orders`` and ``orders`` are two jobs, as they are on SQLite.
Timestamps are stored as naive UTC with microseconds and returned as aware UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy import false as sa_false
from sqlalchemy.dialects import mysql
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from scheduler.core.clock import utcnow  # the column defaults' clock

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

NAME_LENGTH = 128


def Name(length: int = NAME_LENGTH) -> Any:  # noqa: N802 - a type factory
    """A case-sensitive name column type (``utf8mb4_bin`` on MySQL)."""
    return String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )


class UtcDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in, aware UTC datetimes out; naive UTC in the database."""

    impl = DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: Any) -> Any:
        if dialect.name in ("mysql", "mariadb"):
            return dialect.type_descriptor(mysql.DATETIME(fsp=6))
        return dialect.type_descriptor(DateTime())

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the store; use scheduler.core.clock.utcnow()")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Cluster(Base):
    __tablename__ = "clusters"

    name: Mapped[str] = mapped_column(Name(), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32))
    master_url: Mapped[str] = mapped_column(String(512), default="")
    rest_url: Mapped[str] = mapped_column(String(512), default="")
    ui_url: Mapped[str] = mapped_column(String(512), default="")
    az: Mapped[str] = mapped_column(String(64), default="")
    cloud: Mapped[str] = mapped_column(String(64), default="")
    storage_root: Mapped[str] = mapped_column(String(1024))
    #: NORMAL | VOTE_ABNORMAL | THRESHOLD_ABNORMAL | MANUAL_ABNORMAL (cluster-health issue)
    health: Mapped[str] = mapped_column(String(32), default="NORMAL")
    #: why the cluster is in its health state (the monitor's or the operator's words)
    health_reason: Mapped[str] = mapped_column(Text, default="")
    #: when the cluster entered its health state (None: NORMAL since it was created)
    health_since: Mapped[datetime | None] = mapped_column(UtcDateTime())
    #: capacity limits, 0 = unlimited (see scheduler.decisions.catalog):
    #: submissions in flight at once on this cluster
    max_concurrent_submissions: Mapped[int] = mapped_column(Integer, default=0)
    #: live applications Drover keeps on this cluster
    max_running_apps: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    #: sum of ``spark.cores.max`` of those applications
    max_cores: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    #: optimistic concurrency (``If-Match``); bumped by every change through the API
    version: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    #: where job entrypoints may come from (path prefixes, ``scheme://`` URL prefixes); null or
    #: empty = the node's ``DROVER_ARTIFACT_ROOTS``
    artifact_roots: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    #: a YARN cluster's Hadoop client configuration directory on the nodes (empty: none)
    hadoop_conf_dir: Mapped[str] = mapped_column(String(1024), default="", server_default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow, onupdate=utcnow)


class Group(Base):
    __tablename__ = "scheduling_groups"  # GROUPS is a reserved word in MySQL 8

    name: Mapped[str] = mapped_column(Name(), primary_key=True)
    primary_cluster: Mapped[str] = mapped_column(ForeignKey("clusters.name"))
    #: must differ from ``primary_cluster`` (checked by the repository, not the database)
    failover_cluster: Mapped[str | None] = mapped_column(ForeignKey("clusters.name"))
    version: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow, onupdate=utcnow)


class MembershipGeneration(Base):
    """One incarnation of a group's ZooKeeper members znode and the generation it was given.

    Written once, never changed (``scheduler.store.generations``; the rule is in
    ``scheduler.decisions.epochs``). Not tied to the group catalog: a node's groups come from its
    configuration and may precede their catalog record, and a recreated group keeps growing
    epochs.
    """

    __tablename__ = "membership_generations"
    __table_args__ = (UniqueConstraint("group_name", "czxid", "ctime"),)

    group_name: Mapped[str] = mapped_column(Name(), primary_key=True)
    generation: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    #: the members znode's creating transaction and creation time (epoch ms): its incarnation
    czxid: Mapped[int] = mapped_column(BigInteger)
    ctime: Mapped[int] = mapped_column(BigInteger)
    #: the node that recorded it first, and when
    recorded_by: Mapped[str] = mapped_column(String(128))
    recorded_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class Job(Base):
    __tablename__ = "jobs"
    __table_args__ = (
        #: a reconciler's incremental read: its jobs changed since a time (and unowned jobs)
        Index("ix_jobs_owner_owner_epoch_updated_at", "owner", "owner_epoch", "updated_at"),
        #: the API's keyset pages sorted by state or by last change (``scheduler.core.paging``)
        Index("ix_jobs_state_name", "state", "name"),
        Index("ix_jobs_updated_at_name", "updated_at", "name"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(Name(), unique=True)
    group_name: Mapped[str] = mapped_column(ForeignKey("scheduling_groups.name"), index=True)
    team: Mapped[str] = mapped_column(String(128), default="", index=True)
    business: Mapped[str] = mapped_column(String(128), default="")
    priority: Mapped[str] = mapped_column(String(16), default="normal")
    entrypoint: Mapped[str] = mapped_column(String(1024))
    args: Mapped[list[str]] = mapped_column(JSON, default=list)
    conf: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    #: explicit checkpoint location; empty = ``<cluster storage root>/<job name>``
    checkpoint_location: Mapped[str] = mapped_column(String(1024), default="")
    #: the first directory of the checkpoint's path under its root (the job's own name unless a
    #: platform admin placed it elsewhere; "" for a location under no root): the store looks
    #: the jobs whose checkpoints may overlap a new one up by it (scheduler.decisions.storage)
    checkpoint_area: Mapped[str] = mapped_column(
        Name(255), default="", server_default="", index=True
    )
    #: mirror the checkpoint into the other cluster's root (``scheduler.decisions.replication``);
    #: null = only if the job is high priority
    replicate: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    #: key -> value (``scheduler.decisions.labels``); ``job_labels`` holds the same pairs for
    #: selectors
    labels: Mapped[dict[str, str] | None] = mapped_column(JSON, nullable=True)

    desired_state: Mapped[str] = mapped_column(String(16), index=True)
    state: Mapped[str] = mapped_column(String(16), index=True)
    state_reason: Mapped[str] = mapped_column(Text, default="")
    #: the cluster the job runs on (or last ran on)
    cluster_name: Mapped[str | None] = mapped_column(ForeignKey("clusters.name"), index=True)
    current_run_id: Mapped[int | None] = mapped_column(Integer)
    #: bumped by every restart request: a live run of an older generation is replaced
    generation: Mapped[int] = mapped_column(Integer, default=0)
    #: failures before this instant do not count against the restart budget
    attempts_reset_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    #: restart backoff: do not submit before this instant
    not_before: Mapped[datetime | None] = mapped_column(UtcDateTime())
    #: seconds without a committed batch before a RUNNING job is stalled (None: automatic,
    #: scheduler.decisions.stalls); what to do then: ``alert`` or ``restart``
    stall_after: Mapped[float | None] = mapped_column(Float, nullable=True)
    on_stall: Mapped[str] = mapped_column(String(16), default="alert", server_default="alert")

    owner: Mapped[str | None] = mapped_column(String(128))
    owner_epoch: Mapped[int] = mapped_column(BigInteger, default=0)
    #: the row's concurrency counter: bumped by every write (reconciler state changes, commands,
    #: spec changes); the reconciler's writes are conditional on it. Ownership claims leave it.
    version: Mapped[int] = mapped_column(Integer, default=1)
    #: the spec's version: bumped only by spec changes; the job's ETag, what If-Match checks
    spec_version: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    #: what an operation (a failover) asks of the job's owner (scheduler/core/directive.py)
    directive: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    #: seconds a graceful stop waits before a kill, as the last stop/restart/upgrade asked
    #: (null: the node's setting; 0: kill at once)
    grace_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    #: a pending upgrade: rolled back to revision ``upgrade_from`` unless the job's generation
    #: is RUNNING by ``upgrade_deadline`` (scheduler.decisions.revisions)
    upgrade_deadline: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    upgrade_from: Mapped[int | None] = mapped_column(Integer, nullable=True)

    runs: Mapped[list[Run]] = relationship(
        back_populates="job", cascade="all, delete-orphan", passive_deletes=True
    )


class JobLabel(Base):
    """One label of a job (``scheduler.decisions.labels``), for label selectors in SQL; the job's
    ``labels`` column holds the same map for reading."""

    __tablename__ = "job_labels"
    __table_args__ = (Index("ix_job_labels_key_value", "key", "value"),)

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(Name(317), primary_key=True)
    value: Mapped[str] = mapped_column(Name(63), default="")


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (Index("ix_runs_job_id_attempt", "job_id", "attempt", unique=True),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    attempt: Mapped[int] = mapped_column(Integer)
    generation: Mapped[int] = mapped_column(Integer, default=0)
    cluster_name: Mapped[str] = mapped_column(Name())
    node_id: Mapped[str] = mapped_column(String(128))
    owner_epoch: Mapped[int] = mapped_column(BigInteger, default=0)
    fencing_token: Mapped[str] = mapped_column(String(64), unique=True)
    #: ``drover:<job>:<run id>``; written with the submission id (empty while the run is only an
    #: intent: the store's records derive it from the run id then)
    app_name: Mapped[str] = mapped_column(String(300))
    checkpoint_location: Mapped[str] = mapped_column(String(1024), default="")
    submission_id: Mapped[str | None] = mapped_column(String(256))
    app_id: Mapped[str | None] = mapped_column(String(256))
    state: Mapped[str] = mapped_column(String(16), index=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    exit_code: Mapped[int | None] = mapped_column(Integer)
    #: the run's end counts against the job's restart budget (an application failure; not a
    #: kill by Drover, a run never submitted, or a failure on an abnormal cluster)
    counts_as_failure: Mapped[bool] = mapped_column(
        Boolean, default=False, server_default=sa_false()
    )
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    submitted_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    #: when the run's pipeline first asked the fence endpoint with its run id (None: never,
    #: e.g. a plain PySpark pipeline without drover_runtime; see scheduler/decisions/selffencing.py)
    fence_checked_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    #: the run was fenced: closed in the store while its cluster could not be reached (its token
    #: superseded), and when its driver was first answered "superseded"
    #: (scheduler/decisions/steering.py)
    fenced_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    fence_superseded_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    #: a graceful stop was asked (the fence answer tells the pipeline); killed after this instant
    drain_deadline: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    #: the last micro-batch the pipeline committed before it stopped gracefully (it says so)
    stop_batch: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    #: the latest end of a fence lease granted to the run's driver, recorded coarsely (at most
    #: one write per half lease: scheduler/decisions/leases.py); None: never granted one
    lease_until: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    #: when the latest submission of the run was decided (its intent, or its latest reissue):
    #: a run without a submission id is in doubt for a grace after it
    #: (scheduler/decisions/planning.py)
    submit_intent_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    #: the digests of the run's earlier tokens (each reissue adds the one it replaced), comma
    #: separated: a late application carrying one is this deployment's duplicate of the run
    superseded_tokens: Mapped[str | None] = mapped_column(Text, nullable=True)

    job: Mapped[Job] = relationship(back_populates="runs")


class JobRevision(Base):
    """One revision of a job's spec (``scheduler.decisions.revisions``): the whole spec as it was
    once the job's ``spec_version`` became ``revision``. Written once, never changed."""

    __tablename__ = "job_revisions"
    __table_args__ = (UniqueConstraint("job_id", "revision"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    revision: Mapped[int] = mapped_column(Integer)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)
    #: who or what made it (``api:update by alice``, ``reconciler``)
    cause: Mapped[str] = mapped_column(String(300), default="")
    #: why, in words (``rollback to revision 2``, ``upgrade ... rolled back``)
    message: Mapped[str] = mapped_column(Text, default="")
    #: the revision this one rolled back to (null: not a rollback)
    rollback_of: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class JobEvent(Base):
    __tablename__ = "job_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    run_id: Mapped[int | None] = mapped_column(Integer)
    at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    from_state: Mapped[str | None] = mapped_column(String(16))
    to_state: Mapped[str | None] = mapped_column(String(16))
    #: what caused it: ``api:start``, ``reconciler``, ``backend`` ...
    cause: Mapped[str] = mapped_column(String(64))
    message: Mapped[str] = mapped_column(Text, default="")
    node_id: Mapped[str] = mapped_column(String(128), default="")
    #: the membership epoch of the claim ``node_id`` wrote the event under (its fenced write's
    #: proof); None for events written without a claim (the API's commands)
    owner_epoch: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class AuditEntry(Base):
    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow, index=True)
    actor: Mapped[str] = mapped_column(String(128))
    action: Mapped[str] = mapped_column(String(64))
    target_kind: Mapped[str] = mapped_column(String(32))
    target_name: Mapped[str] = mapped_column(Name(300))
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    node_id: Mapped[str] = mapped_column(String(128), default="")
    #: the team of the target (a job's team), "" for teamless targets
    team: Mapped[str] = mapped_column(String(128), default="", server_default="", index=True)
    #: the target as it was before the change and after it (null: it did not exist)
    before: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    after: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)


class IdempotencyKey(Base):
    """A client's ``Idempotency-Key`` and the first answer to it (``scheduler.store.idempotency``).

    ``state``: ``pending`` (a request holds it until ``locked_until``), ``applied`` (the
    request's change committed; its answer is not recorded yet), ``done`` (answer recorded).
    """

    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("subject", "key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    #: who sent it (keys are the caller's own: two callers never share one)
    subject: Mapped[str] = mapped_column(Name(200))
    key: Mapped[str] = mapped_column(Name(255))
    #: SHA-256 of the request: method, route, path parameters, If-Match, canonical JSON body
    fingerprint: Mapped[str] = mapped_column(String(64))
    #: ``POST /v1/jobs/{name}/start``, for messages
    operation: Mapped[str] = mapped_column(String(300))
    state: Mapped[str] = mapped_column(String(16))
    #: the request holding a pending key (a random id), and until when
    holder: Mapped[str] = mapped_column(String(32))
    locked_until: Mapped[datetime] = mapped_column(UtcDateTime())
    status_code: Mapped[int | None] = mapped_column(Integer)
    response_headers: Mapped[dict[str, str] | None] = mapped_column(JSON, nullable=True)
    response_body: Mapped[str | None] = mapped_column(
        Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb")
    )
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UtcDateTime(), index=True)


class ClusterVote(Base):
    """One node's probe of one cluster (``scheduler.decisions.health.Vote``); pruned after the
    history the monitor's decision looks at."""

    __tablename__ = "cluster_votes"
    __table_args__ = (Index("ix_cluster_votes_cluster_name_at", "cluster_name", "at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    cluster_name: Mapped[str] = mapped_column(ForeignKey("clusters.name"))
    node_id: Mapped[str] = mapped_column(String(128))
    at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    ok: Mapped[bool] = mapped_column(Boolean)
    latency_s: Mapped[float] = mapped_column(Float, default=0.0)
    detail: Mapped[str] = mapped_column(Text, default="")


class ClusterHealthEvent(Base):
    """A change of a cluster's health, with its evidence (the votes, or the operator's reason)."""

    __tablename__ = "cluster_health_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    cluster_name: Mapped[str] = mapped_column(ForeignKey("clusters.name"), index=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    from_state: Mapped[str] = mapped_column(String(32))
    to_state: Mapped[str] = mapped_column(String(32))
    #: ``monitor`` or ``operator`` (``scheduler.decisions.health.Decider``)
    decided_by: Mapped[str] = mapped_column(String(16))
    #: the operator's name, or the deciding monitor's node id
    actor: Mapped[str] = mapped_column(String(128))
    reason: Mapped[str] = mapped_column(Text, default="")
    evidence: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    node_id: Mapped[str] = mapped_column(String(128), default="")


class Team(Base):
    __tablename__ = "teams"

    name: Mapped[str] = mapped_column(Name(), primary_key=True)
    description: Mapped[str] = mapped_column(String(512), default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class Identity(Base):
    """A user or a service account; its roles are its bindings."""

    __tablename__ = "identities"

    name: Mapped[str] = mapped_column(Name(), primary_key=True)
    #: ``user`` | ``service``
    kind: Mapped[str] = mapped_column(String(16), default="user")
    disabled: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sa_false())
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class RoleBinding(Base):
    __tablename__ = "role_bindings"
    __table_args__ = (UniqueConstraint("identity", "team"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    identity: Mapped[str] = mapped_column(ForeignKey("identities.name", ondelete="CASCADE"))
    #: a team name, or ``*`` for every team
    team: Mapped[str] = mapped_column(Name(), index=True)
    role: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class ApiToken(Base):
    """An API token: only its SHA-256 digest is stored."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    identity: Mapped[str] = mapped_column(
        ForeignKey("identities.name", ondelete="CASCADE"), index=True
    )
    #: the first characters of the secret after ``drv_`` (to tell tokens apart in listings)
    lookup: Mapped[str] = mapped_column(String(16))
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    #: ``read`` or ``read,write``
    scopes: Mapped[str] = mapped_column(String(64), default="read,write")
    description: Mapped[str] = mapped_column(String(256), default="")
    created_by: Mapped[str] = mapped_column(String(160), default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    #: the token that minted this one through the API (None: the CLI's bootstrap, a JWT);
    #: revoking it revokes this one
    parent_id: Mapped[int | None] = mapped_column(Integer, index=True)


class CheckpointReplica(Base):
    """A job's checkpoint replica in its other cluster's storage root, and how far behind the
    source it is (``scheduler.decisions.replication``; written by the replicator of the job's owner
    and by ``make_available``). One per job; gone with the job."""

    __tablename__ = "checkpoint_replicas"

    job_id: Mapped[int] = mapped_column(
        ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    )
    #: PENDING | CURRENT | LAGGING | ERROR | PROMOTED
    #: (``scheduler.decisions.replication.ReplicaState``)
    state: Mapped[str] = mapped_column(String(16), default="PENDING")
    source_cluster: Mapped[str] = mapped_column(Name())
    source_location: Mapped[str] = mapped_column(String(1024))
    target_cluster: Mapped[str] = mapped_column(Name(), index=True)
    location: Mapped[str] = mapped_column(String(1024))
    source_batch: Mapped[int | None] = mapped_column(BigInteger)
    source_batch_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    replica_batch: Mapped[int | None] = mapped_column(BigInteger)
    replica_batch_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    lag_batches: Mapped[int] = mapped_column(BigInteger, default=0)
    oldest_missing_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    observed_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    error: Mapped[str] = mapped_column(Text, default="")
    error_since: Mapped[datetime | None] = mapped_column(UtcDateTime())
    files_copied: Mapped[int] = mapped_column(BigInteger, default=0)
    bytes_copied: Mapped[int] = mapped_column(BigInteger, default=0)
    last_copy_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    last_copy_files: Mapped[int] = mapped_column(Integer, default=0)
    last_copy_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    last_copy_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    node_id: Mapped[str] = mapped_column(String(128), default="")
    #: who may write into the replica location now (a node id, ``failover:<id>``), until when
    lease_holder: Mapped[str | None] = mapped_column(String(160))
    lease_until: Mapped[datetime | None] = mapped_column(UtcDateTime())
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


# -- operations: persisted plans executed item by item (scheduler/decisions/operations/)
# -------------------


class Operation(Base):
    """A persisted operation over many jobs (kind ``failover``; bulk kinds later), executed by
    one node at a time: the one whose claim (``executor``, ``executor_epoch``) is current."""

    __tablename__ = "operations"
    __table_args__ = (
        Index("ix_operations_state_home_group", "state", "home_group"),
        Index("ix_operations_team_id", "team", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(32))
    #: PENDING | RUNNING | SUCCEEDED | FAILED | CANCELLED (scheduler.decisions.operations.model)
    state: Mapped[str] = mapped_column(String(16))
    #: the group whose pool executes it (crc32 of the id over that pool)
    home_group: Mapped[str] = mapped_column(Name())
    source_cluster: Mapped[str | None] = mapped_column(Name(), nullable=True)
    #: None: each job's group's other cluster
    target_cluster: Mapped[str | None] = mapped_column(Name(), nullable=True)
    selector: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    options: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    reason: Mapped[str] = mapped_column(Text, default="")
    created_by: Mapped[str] = mapped_column(String(160))
    #: the one team whose jobs it acts on (a team-scoped bulk operation; its members see it);
    #: None: several teams or the platform (a failover): platform roles see it
    team: Mapped[str | None] = mapped_column(String(128), nullable=True)
    #: an automatic operation's incident (at most one operation per incident)
    incident: Mapped[str | None] = mapped_column(String(300), unique=True, nullable=True)
    plan_digest: Mapped[str] = mapped_column(String(64), default="")
    executor: Mapped[str | None] = mapped_column(String(128), nullable=True)
    executor_epoch: Mapped[int] = mapped_column(BigInteger, default=0)
    executor_since: Mapped[datetime | None] = mapped_column(UtcDateTime())
    cancel_requested_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    cancel_requested_by: Mapped[str | None] = mapped_column(String(160), nullable=True)
    version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class OperationItem(Base):
    """One job of an operation: its planned action and why, and the steps it went through."""

    __tablename__ = "operation_items"
    __table_args__ = (
        Index("ix_operation_items_operation_id_position", "operation_id", "position", unique=True),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    operation_id: Mapped[int] = mapped_column(ForeignKey("operations.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    #: the job (kept by name too: the item outlives a deleted job)
    job_id: Mapped[int | None] = mapped_column(Integer, index=True)
    job_name: Mapped[str] = mapped_column(Name())
    action: Mapped[str] = mapped_column(String(32))
    why: Mapped[str] = mapped_column(Text, default="")
    step: Mapped[str] = mapped_column(String(24))
    #: [{"step", "at", "note"}, ...] oldest first
    history: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str] = mapped_column(Text, default="")
    source_cluster: Mapped[str | None] = mapped_column(Name(), nullable=True)
    target_cluster: Mapped[str | None] = mapped_column(Name(), nullable=True)
    source_run_id: Mapped[int | None] = mapped_column(Integer)
    target_run_id: Mapped[int | None] = mapped_column(Integer)
    #: the item's kind-specific facts (checkpoint from/to, resume batch, forced, ...)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    not_before: Mapped[datetime | None] = mapped_column(UtcDateTime())
    version: Mapped[int] = mapped_column(Integer, default=1)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UtcDateTime())


class GroupFailoverPolicy(Base):
    """A group's automatic failover (off unless a row says enabled)."""

    __tablename__ = "group_failover_policies"

    group_name: Mapped[str] = mapped_column(
        ForeignKey("scheduling_groups.name", ondelete="CASCADE"), primary_key=True
    )
    enabled: Mapped[bool] = mapped_column(Boolean, default=False, server_default=sa_false())
    #: seconds a cluster stays VOTE_ABNORMAL / THRESHOLD_ABNORMAL before its jobs fail over
    after_seconds: Mapped[float] = mapped_column(Float, default=120.0)
    #: the jobs at or above this priority fail over
    min_priority: Mapped[str] = mapped_column(String(16), default="high")
    version: Mapped[int] = mapped_column(Integer, default=1)
    updated_by: Mapped[str] = mapped_column(String(160), default="")
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class AutoFailoverEvent(Base):
    """What automatic failover decided, or an operator did to it (append-only): a failover
    ``created`` or ``held`` (``code`` says why) for a group's abnormal cluster, the platform-wide
    switch ``paused`` or ``resumed``, a cluster's cool-down ``cleared``
    (scheduler/decisions/operations/auto.py). The switch's state is its latest paused/resumed
    event."""

    __tablename__ = "auto_failover_events"
    __table_args__ = (
        Index("ix_auto_failover_events_kind_id", "kind", "id"),
        Index("ix_auto_failover_events_group_cluster_id", "group_name", "cluster", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    kind: Mapped[str] = mapped_column(String(16))
    code: Mapped[str] = mapped_column(String(32), default="")
    group_name: Mapped[str | None] = mapped_column(Name(), nullable=True)
    cluster: Mapped[str | None] = mapped_column(Name(), nullable=True)
    target: Mapped[str | None] = mapped_column(Name(), nullable=True)
    incident: Mapped[str | None] = mapped_column(String(300), nullable=True)
    operation_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    message: Mapped[str] = mapped_column(Text, default="")
    actor: Mapped[str] = mapped_column(String(160), default="")
    node_id: Mapped[str] = mapped_column(String(128), default="")


# --- streaming progress, stall verdicts; alert channels, alerts and their delivery outbox ---


class RunProgress(Base):
    """The latest progress a run's pipeline reported with its fence checks (one row per run;
    written by the nodes' progress flushers, the stall verdict by the job's owner)."""

    __tablename__ = "run_progress"

    run_id: Mapped[int] = mapped_column(
        ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    )
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), index=True)
    #: the last batch known committed (the runtime reports before batch N: N - 1 is done)
    batch_id: Mapped[int | None] = mapped_column(BigInteger)
    #: of the last completed batch (Spark's last progress): rows in, rates, duration
    rows: Mapped[int | None] = mapped_column(BigInteger)
    input_rate: Mapped[float | None] = mapped_column(Float)
    processing_rate: Mapped[float | None] = mapped_column(Float)
    batch_duration_ms: Mapped[int | None] = mapped_column(BigInteger)
    #: milliseconds between the starts of the last two batches (the observed trigger interval)
    trigger_interval_ms: Mapped[int | None] = mapped_column(BigInteger)
    #: Spark's timestamp of that progress (the driver's clock; shown, never compared)
    spark_timestamp: Mapped[str | None] = mapped_column(String(40))
    #: first report of the run (its pipeline reports progress), last report of any kind, and
    #: the last report that showed the query moving (a new batch, or an idle trigger): node
    #: clocks, never the driver's
    declared_at: Mapped[datetime] = mapped_column(UtcDateTime())
    reported_at: Mapped[datetime] = mapped_column(UtcDateTime())
    heartbeat_at: Mapped[datetime] = mapped_column(UtcDateTime())
    #: reports received
    reports: Mapped[int] = mapped_column(BigInteger, default=0)
    #: the owner's verdict: stalled since (None: not stalled)
    stalled_since: Mapped[datetime | None] = mapped_column(UtcDateTime())


class ProgressSample(Base):
    """A short history of a job's progress (at most one sample per job per sampling interval,
    kept for a bounded time): what the console's sparkline draws."""

    __tablename__ = "progress_samples"
    __table_args__ = (Index("ix_progress_samples_job_id_at", "job_id", "at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"))
    run_id: Mapped[int] = mapped_column(Integer)
    at: Mapped[datetime] = mapped_column(UtcDateTime(), index=True)
    batch_id: Mapped[int | None] = mapped_column(BigInteger)
    rows: Mapped[int | None] = mapped_column(BigInteger)
    input_rate: Mapped[float | None] = mapped_column(Float)
    processing_rate: Mapped[float | None] = mapped_column(Float)
    batch_duration_ms: Mapped[int | None] = mapped_column(BigInteger)


class AlertChannel(Base):
    """Where alerts are sent: a generic webhook or a Slack-compatible one, of a team or of the
    platform (team ``*``)."""

    __tablename__ = "alert_channels"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(Name(), unique=True)
    #: ``webhook`` | ``slack``
    kind: Mapped[str] = mapped_column(String(16))
    url: Mapped[str] = mapped_column(String(2048))
    team: Mapped[str] = mapped_column(Name(), index=True)
    #: the alert kinds wanted (empty: all)
    kinds: Mapped[list[str]] = mapped_column(JSON, default=list)
    min_severity: Mapped[str] = mapped_column(String(16), default="warning")
    #: HMAC key of the webhook's signature header (never shown again)
    secret: Mapped[str | None] = mapped_column(String(256), nullable=True)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    description: Mapped[str] = mapped_column(String(512), default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class Alert(Base):
    """One alert: raised when a condition appears, resolved when it ends
    (scheduler.decisions.alerts)."""

    __tablename__ = "alerts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    #: ``kind:subject``; ``open_key`` holds it while the alert fires (unique: one at a time)
    key: Mapped[str] = mapped_column(Name(300), index=True)
    open_key: Mapped[str | None] = mapped_column(Name(300), unique=True, nullable=True)
    kind: Mapped[str] = mapped_column(String(32))
    subject: Mapped[str] = mapped_column(Name(300))
    severity: Mapped[str] = mapped_column(String(16))
    #: ``firing`` | ``resolved``
    status: Mapped[str] = mapped_column(String(16), index=True)
    summary: Mapped[str] = mapped_column(Text, default="")
    resolution: Mapped[str] = mapped_column(Text, default="")
    team: Mapped[str] = mapped_column(String(128), default="", index=True)
    cluster: Mapped[str | None] = mapped_column(Name(), nullable=True, index=True)
    group_name: Mapped[str | None] = mapped_column(Name(), nullable=True)
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    #: the cluster alert this one is folded into (None: sent on its own)
    folded_into: Mapped[int | None] = mapped_column(Integer, nullable=True, index=True)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    resolved_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)


class AlertDelivery(Base):
    """The outbox: one message of one alert to one channel, until it is delivered or given up.
    Written in the transaction that raised or resolved the alert."""

    __tablename__ = "alert_deliveries"
    __table_args__ = (
        UniqueConstraint("alert_id", "channel_id", "event"),
        Index("ix_alert_deliveries_pending_next_attempt_at", "pending", "next_attempt_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    alert_id: Mapped[int] = mapped_column(ForeignKey("alerts.id", ondelete="CASCADE"))
    channel_id: Mapped[int] = mapped_column(
        ForeignKey("alert_channels.id", ondelete="CASCADE"), index=True
    )
    #: ``firing`` | ``resolved``
    event: Mapped[str] = mapped_column(String(16))
    #: not yet delivered nor given up
    pending: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    next_attempt_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    #: the node sending it now, and until when its claim holds
    claimed_by: Mapped[str | None] = mapped_column(String(128), nullable=True)
    claim_token: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    claimed_until: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    delivered_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    failed_at: Mapped[datetime | None] = mapped_column(UtcDateTime(), nullable=True)
    response_status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    last_error: Mapped[str] = mapped_column(Text, default="")
    #: the body last sent
    body: Mapped[str] = mapped_column(Text, default="")


class BusinessQuota(Base):
    """A business's submission quota and its token bucket, shared by every node.

    ``rate`` submissions per second with bursts up to ``burst`` (``rate`` null: no rate limit);
    ``dedicated_group``: the group whose nodes alone own the business's jobs (null: any group).
    The bucket (``tokens`` counted at ``refilled_at``) is taken from by a conditional write on
    ``bucket_version`` (``scheduler.store.quotas.take_tokens``); ``version`` is the quota's
    ``If-Match``. See ``scheduler/decisions/gate.py``.
    """

    __tablename__ = "business_quotas"

    business: Mapped[str] = mapped_column(Name(), primary_key=True)
    rate: Mapped[float | None] = mapped_column(Float, nullable=True)
    burst: Mapped[int] = mapped_column(Integer, default=1)
    dedicated_group: Mapped[str | None] = mapped_column(
        ForeignKey("scheduling_groups.name"), nullable=True, index=True
    )
    #: the YARN queue of the business's applications (null: the job's own, else the default)
    yarn_queue: Mapped[str | None] = mapped_column(String(255), nullable=True)
    tokens: Mapped[float] = mapped_column(Float, default=0.0)
    refilled_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    bucket_version: Mapped[int] = mapped_column(Integer, default=1)
    version: Mapped[int] = mapped_column(Integer, default=1)
    updated_by: Mapped[str] = mapped_column(String(160), default="")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class QueueEntry(Base):
    """Why a QUEUED job waits at the submission gate, and its place in its owner's queue.

    Written by the job's owner when its gate holds the job back, deleted when it is admitted or
    no longer waits; never bumps the job's version (a place in a queue is not a job change)."""

    __tablename__ = "submission_queue"

    job_id: Mapped[int] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    #: ``rate`` (the business's bucket is empty) or ``cluster`` (a cluster cap is reached)
    kind: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    node_id: Mapped[str] = mapped_column(String(128), default="")
    since: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
