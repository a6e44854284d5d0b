"""The API's view of streaming progress and stalls (``scheduler.decisions.stalls`` says what they
mean)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field

from api.schemas import attributes
from scheduler.core.records import JobRecord, ProgressRecord
from scheduler.core.states import OnStall
from scheduler.decisions.stalls import (
    MAX_STALL_AFTER,
    MIN_STALL_AFTER,
    ProgressStatus,
    shown_status,
)
from scheduler.store.progress import Sample

StallAfter = Annotated[
    float,
    Field(
        ge=MIN_STALL_AFTER,
        le=MAX_STALL_AFTER,
        description="Seconds a RUNNING job may go without progress (no committed batch and no "
        "idle trigger reported) before it is marked stalled. Null: automatic, the longer of "
        "DROVER_STALL_AFTER_MIN (60 s) and DROVER_STALL_AFTER_TRIGGERS (5) trigger intervals "
        "as the pipeline reports them. Only pipelines using drover_runtime report progress.",
        examples=[120],
    ),
]
ON_STALL_DESCRIPTION = (
    "What Drover does when the job stalls, besides the event, the metric and the alert: "
    "`alert` (nothing more) or `restart` (the run is replaced, as by a restart, at most "
    "DROVER_RESTART_MAX_ATTEMPTS times within DROVER_RESTART_VALIDITY_INTERVAL)."
)


class ProgressPublic(BaseModel):
    """What the job's current run last reported of its progress."""

    status: ProgressStatus = Field(
        description="`no-reports`: the run's pipeline reports no progress (plain PySpark "
        "without drover_runtime): it is never called stalled; `starting`: it reports, no batch "
        "committed yet; `progressing`; `idle`: its last batch had no input; `stalled`: no "
        "progress for longer than the job's stall threshold while RUNNING (the owner's "
        "verdict, see `stalled_since`)."
    )
    batch_id: int | None = Field(default=None, description="the last batch known committed")
    rows: int | None = Field(default=None, description="input rows of the last batch")
    input_rate: float | None = Field(default=None, description="input rows per second")
    processing_rate: float | None = Field(default=None, description="processed rows per second")
    batch_duration_ms: int | None = None
    trigger_interval_ms: int | None = Field(
        default=None, description="milliseconds between the starts of the last two batches"
    )
    spark_timestamp: str | None = Field(
        default=None, description="Spark's timestamp of the last progress (the driver's clock)"
    )
    reported_at: datetime | None = Field(default=None, description="the last report")
    heartbeat_at: datetime | None = Field(
        default=None, description="the last report showing the query moving"
    )
    stalled_since: datetime | None = None

    @classmethod
    def of(cls, progress: ProgressRecord | None) -> ProgressPublic:
        if progress is None:
            return cls(status=ProgressStatus.NO_REPORTS)
        return cls(**attributes(cls, progress, status=shown_status(progress)))

    @classmethod
    def of_job(cls, job: JobRecord) -> ProgressPublic | None:
        """The job's progress: null when it has no run, ``no-reports`` when its run never
        reported."""
        if job.current_run is None:
            return None
        return cls.of(job.progress)


class SamplePublic(BaseModel):
    at: datetime
    run_id: int
    batch_id: int | None
    rows: int | None
    input_rate: float | None
    processing_rate: float | None
    batch_duration_ms: int | None

    @classmethod
    def of(cls, sample: Sample) -> SamplePublic:
        return cls(**attributes(cls, sample))


class JobProgressPublic(BaseModel):
    """A job's progress now and its recent history (oldest first): a sparkline's data."""

    job: str
    current: ProgressPublic | None
    stall_after: float | None = Field(description="the job's own threshold (null: automatic)")
    effective_stall_after: float = Field(
        description="the threshold in force for the current run (seconds)"
    )
    on_stall: OnStall
    history: list[SamplePublic]
