"""Streaming progress and stalls: the pure decisions (no store, no clock, no HTTP).

A pipeline that uses ``drover_runtime`` reports its progress with the fence check it makes
before every micro-batch commit (``X-Drover-Progress`` on ``GET /v1/jobs/{name}/fence``, see
``pipelines/drover_runtime.py``): the batch it is about to commit, and what Spark said of the
last completed one (its id, rows in, input and processing rates, duration, timestamp), plus the
time between the starts of its last two batches (the trigger interval it actually runs at). Its
first check, when the session starts, declares that the run reports at all.

Drover keeps the latest report per run (:func:`merge`) and a short history. A report *moves*
the run when it shows a newer committed batch (a check before batch N means N - 1 committed)
or a new progress of the query (Spark reports an idle trigger of a stream without input every
10 s, and the runtime's idle check forwards it): that instant is the run's **heartbeat**.

A RUNNING job whose current run's heartbeat is older than its stall threshold is **stalled**
(:func:`progress_status`); the threshold (:func:`effective_stall_after`) is the job's
``stall_after`` when set, else ``max(60 s, 5 x the observed trigger interval)`` (the policy's
``minimum`` and ``triggers``). It is counted from the later of the heartbeat and the moment the
run was seen RUNNING, so a slow start is not a stall. It recovers as soon as a report moves the
run again. A run whose pipeline never reported (plain PySpark without ``drover_runtime``, an
older runtime) has **no progress reports**: it is never called stalled.

The owner of a job records the verdict's changes (:func:`decide_stall`): an event, a metric, an
alert; with ``on_stall = restart`` it also replaces the run (a restart), at most
``max_restarts`` times within the restart validity interval.

============  ===============================================================================
status        meaning
============  ===============================================================================
no-reports    the run's pipeline reports no progress (or there is no run): nothing to judge
starting      it reports, no batch committed yet
progressing   its last completed batch had input rows, and it moved within the threshold
idle          its last completed batch had no input (a stream with nothing to read)
stalled       no movement for longer than the threshold while the job is RUNNING
============  ===============================================================================
"""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from scheduler.core.records import ProgressRecord
from scheduler.core.states import OnStall

#: the batch id the runtime reports for its check when the session starts / while idle
START_CHECK = -2
IDLE_CHECK = -1
#: a report is at most this long (the header is small: a dozen numbers)
MAX_REPORT_BYTES = 1024
#: the smallest stall_after a job may set (seconds)
MIN_STALL_AFTER = 5.0
MAX_STALL_AFTER = 7 * 24 * 3600.0


class ProgressStatus(enum.StrEnum):
    NO_REPORTS = "no-reports"
    STARTING = "starting"
    PROGRESSING = "progressing"
    IDLE = "idle"
    STALLED = "stalled"


@dataclass(frozen=True)
class StallPolicy:
    #: the automatic threshold is at least this many seconds...
    minimum: float = 60.0
    #: ...and at least this many observed trigger intervals
    triggers: float = 5.0


@dataclass(frozen=True)
class ProgressReport:
    """One report, as a pipeline sent it (see :func:`parse_report`)."""

    #: the batch the fence check is for (>= 0), or START_CHECK / IDLE_CHECK
    batch: int
    #: Spark's last progress: the last completed batch and its figures
    last_batch_id: int | None = None
    rows: int | None = None
    input_rate: float | None = None
    processing_rate: float | None = None
    duration_ms: int | None = None
    spark_timestamp: str | None = None
    #: ms between the starts of the last two batches
    interval_ms: int | None = None

    @property
    def committed(self) -> int | None:
        """The newest batch this report shows committed."""
        known = [b for b in (self.last_batch_id, self.batch - 1 if self.batch > 0 else None)]
        values = [b for b in known if b is not None and b >= 0]
        return max(values) if values else None


# -- reports --------------------------------------------------------------------------------------


def _int(value: Any, name: str, low: int = 0) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} is not a number")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ValueError(f"{name} is not an integer")
    number = int(value)
    if number < low or number > 2**62:
        raise ValueError(f"{name} is out of range")
    return number


def _rate(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} is not a number")
    number = float(value)
    if not math.isfinite(number) or number < 0 or number > 1e15:
        raise ValueError(f"{name} is out of range")
    return number


def parse_report(raw: str) -> ProgressReport:
    """The report in an ``X-Drover-Progress`` header; ValueError says what is wrong with it.

    The header holds one compact JSON object (what ``drover_runtime`` sends)::

        {"v": 1, "batch": 12, "id": 11, "rows": 500, "in": 250.0, "proc": 410.5,
         "dur": 1210, "ts": "2026-11-24T21:48:31.643Z", "gap": 2000}

    ``batch`` is required; every other member is optional (null or absent: unknown).
    Unknown members are ignored (newer runtimes may send more).
    """
    if len(raw) > MAX_REPORT_BYTES:
        raise ValueError(f"longer than {MAX_REPORT_BYTES} bytes")
    try:
        doc = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    if doc.get("v", 1) != 1:
        raise ValueError(f"unknown version {doc.get('v')!r}")
    batch = _int(doc.get("batch"), "batch", low=START_CHECK)
    if batch is None:
        raise ValueError("batch is missing")
    timestamp = doc.get("ts")
    if timestamp is not None and (not isinstance(timestamp, str) or len(timestamp) > 40):
        raise ValueError("ts is not a timestamp")
    return ProgressReport(
        batch=batch,
        last_batch_id=_int(doc.get("id"), "id"),
        rows=_int(doc.get("rows"), "rows"),
        input_rate=_rate(doc.get("in"), "in"),
        processing_rate=_rate(doc.get("proc"), "proc"),
        duration_ms=_int(doc.get("dur"), "dur"),
        spark_timestamp=timestamp,
        interval_ms=_int(doc.get("gap"), "gap"),
    )


def merge(
    previous: ProgressRecord | None,
    report: ProgressReport,
    *,
    run_id: int,
    job_id: int,
    now: datetime,
) -> ProgressRecord:
    """The run's progress after ``report`` arrived at ``now`` (a node's clock)."""
    committed = report.committed
    if previous is None:
        return ProgressRecord(
            run_id=run_id,
            job_id=job_id,
            batch_id=committed,
            rows=report.rows,
            input_rate=report.input_rate,
            processing_rate=report.processing_rate,
            batch_duration_ms=report.duration_ms,
            trigger_interval_ms=report.interval_ms,
            spark_timestamp=report.spark_timestamp,
            declared_at=now,
            reported_at=now,
            heartbeat_at=now,
            reports=1,
        )
    newer_batch = committed is not None and (
        previous.batch_id is None or committed > previous.batch_id
    )
    new_progress = (
        report.spark_timestamp is not None and report.spark_timestamp != previous.spark_timestamp
    )
    older = (
        committed is not None and previous.batch_id is not None and committed < previous.batch_id
    )
    if older:  # a late report (another node, a retried check): only counted
        return replace(
            previous, reported_at=max(now, previous.reported_at), reports=previous.reports + 1
        )
    has_figures = report.last_batch_id is not None or report.spark_timestamp is not None
    return replace(
        previous,
        batch_id=committed if newer_batch else previous.batch_id,
        rows=report.rows if has_figures else previous.rows,
        input_rate=report.input_rate if has_figures else previous.input_rate,
        processing_rate=report.processing_rate if has_figures else previous.processing_rate,
        batch_duration_ms=report.duration_ms if has_figures else previous.batch_duration_ms,
        trigger_interval_ms=report.interval_ms or previous.trigger_interval_ms,
        spark_timestamp=report.spark_timestamp or previous.spark_timestamp,
        reported_at=max(now, previous.reported_at),
        heartbeat_at=now if newer_batch or new_progress else previous.heartbeat_at,
        reports=previous.reports + 1,
    )


# -- verdicts -------------------------------------------------------------------------------------


def effective_stall_after(
    stall_after: float | None, trigger_interval_ms: int | None, policy: StallPolicy
) -> float:
    """The job's threshold: its own ``stall_after``, or the automatic one."""
    if stall_after is not None:
        return stall_after
    automatic = policy.minimum
    if trigger_interval_ms:
        automatic = max(automatic, policy.triggers * trigger_interval_ms / 1000.0)
    return automatic


def quiet_seconds(
    progress: ProgressRecord, run_started_at: datetime | None, now: datetime
) -> float:
    """Seconds the run has not moved, counted from when it was both reporting and RUNNING."""
    since = progress.heartbeat_at
    if run_started_at is not None and run_started_at > since:
        since = run_started_at
    return max(0.0, (now - since).total_seconds())


def progress_status(
    running: bool,
    progress: ProgressRecord | None,
    *,
    stall_after: float,
    run_started_at: datetime | None,
    now: datetime,
) -> ProgressStatus:
    """What the run's progress says now (``running``: the job is RUNNING)."""
    if progress is None:
        return ProgressStatus.NO_REPORTS
    if running and quiet_seconds(progress, run_started_at, now) > stall_after:
        return ProgressStatus.STALLED
    if progress.batch_id is None:
        return ProgressStatus.STARTING
    if progress.rows == 0:
        return ProgressStatus.IDLE
    return ProgressStatus.PROGRESSING


@dataclass(frozen=True)
class StallChange:
    """A change of a run's stall verdict for its owner to record."""

    #: ``stalled`` or ``recovered``
    kind: str
    reason: str
    #: replace the run (on_stall = restart, within the budget)
    restart: bool = False


def decide_stall(
    *,
    running: bool,
    progress: ProgressRecord | None,
    stall_after: float,
    run_started_at: datetime | None,
    now: datetime,
    on_stall: OnStall = OnStall.ALERT,
    restarts_in_window: int = 0,
    max_restarts: int = 3,
) -> StallChange | None:
    """Whether the recorded verdict on the run must change now, and how."""
    if progress is None:
        return None
    status = progress_status(
        running, progress, stall_after=stall_after, run_started_at=run_started_at, now=now
    )
    stalled = status == ProgressStatus.STALLED
    if stalled and progress.stalled_since is None:
        quiet = quiet_seconds(progress, run_started_at, now)
        last = (
            f"last batch {progress.batch_id} reported {progress.heartbeat_at:%H:%M:%S} UTC"
            if progress.batch_id is not None
            else "no batch committed yet"
        )
        reason = f"stalled: no progress for {quiet:.0f} s (stall_after {stall_after:g} s); {last}"
        restart = on_stall == OnStall.RESTART and restarts_in_window < max_restarts
        if on_stall == OnStall.RESTART and not restart:
            reason += f"; not restarted ({restarts_in_window} stall restarts recently)"
        return StallChange("stalled", reason, restart=restart)
    if not stalled and progress.stalled_since is not None:
        if not running:
            return StallChange("recovered", "no longer stalled: the job is not RUNNING")
        batch = f"batch {progress.batch_id}" if progress.batch_id is not None else "progress"
        return StallChange("recovered", f"recovered: {batch} reported")
    return None


def shown_status(progress: ProgressRecord | None) -> ProgressStatus:
    """The status the API shows: the owner's recorded verdict for ``stalled`` (one answer on
    every node), what the last report says otherwise."""
    if progress is None:
        return ProgressStatus.NO_REPORTS
    if progress.stalled_since is not None:
        return ProgressStatus.STALLED
    return progress_status(
        False, progress, stall_after=math.inf, run_started_at=None, now=progress.reported_at
    )
