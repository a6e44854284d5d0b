"""The tables of issue 12 (see it): what pipelines report of their progress and the stall
verdicts on it; alert channels, alerts and their delivery outbox. Same metadata as
:mod:`scheduler.store.models` (which imports this module)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from scheduler.core.clock import utcnow
from scheduler.store.models import Base, Name, UtcDateTime


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
