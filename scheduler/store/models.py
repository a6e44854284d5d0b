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
            raise ValueError("naive datetime given to the store; use utcnow()")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


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
    #: capacity limits, 0 = unlimited (see scheduler.catalog):
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
    ``scheduler.epochs``). Not tied to the group catalog: a node's groups come from its
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
    #: a reconciler's incremental read: its jobs changed since a time (and unowned jobs)
    __table_args__ = (
        Index("ix_jobs_owner_owner_epoch_updated_at", "owner", "owner_epoch", "updated_at"),
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

    owner: Mapped[str | None] = mapped_column(String(128))
    owner_epoch: Mapped[int] = mapped_column(BigInteger, default=0)
    #: the row's concurrency counter: bumped by every write (reconciler state changes, commands,
    #: spec changes); the reconciler's writes are conditional on it. Ownership claims leave it.
    version: Mapped[int] = mapped_column(Integer, default=1)
    #: the spec's version: bumped only by spec changes; the job's ETag, what If-Match checks
    spec_version: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)

    runs: Mapped[list[Run]] = relationship(
        back_populates="job", cascade="all, delete-orphan", passive_deletes=True
    )


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
    #: e.g. a plain PySpark pipeline without drover_runtime; see scheduler/selffencing.py)
    fence_checked_at: Mapped[datetime | None] = mapped_column(UtcDateTime())

    job: Mapped[Job] = relationship(back_populates="runs")


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


class ClusterVote(Base):
    """One node's probe of one cluster (``scheduler.health.Vote``); pruned after the history the
    monitor's decision looks at."""

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
    #: ``monitor`` or ``operator`` (``scheduler.health.Decider``)
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
