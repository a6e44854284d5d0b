"""Streaming progress in the store: the latest report per run, the short history, and the
owner's stall verdicts (fenced). The decisions are :mod:`scheduler.decisions.stalls`'s.

Each function takes a session; the caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import delete, func, insert, or_, select, update
from sqlalchemy.dialects import mysql, sqlite
from sqlalchemy.orm import Session

from scheduler.core.ownership import Fence
from scheduler.core.records import JobRecord, ProgressRecord
from scheduler.core.states import JobState, OnStall
from scheduler.decisions.alerts import AlertKind, Signal, key_of
from scheduler.decisions.stalls import StallChange
from scheduler.store.alerts import raise_alert, resolve_alert
from scheduler.store.journal import add_event
from scheduler.store.mapping import from_row
from scheduler.store.models import Job, JobEvent, ProgressSample, Run, RunProgress

#: the job event causes of the stall verdicts (and of the restarts they make)
STALLED = "stall"
RECOVERED = "stall:recovered"
RESTARTED = "stall:restart"

_SAVED = (
    "batch_id",
    "rows",
    "input_rate",
    "processing_rate",
    "batch_duration_ms",
    "trigger_interval_ms",
    "spark_timestamp",
    "reported_at",
    "heartbeat_at",
    "reports",
)


def progress_record(row: RunProgress) -> ProgressRecord:
    return from_row(ProgressRecord, row)


def load(session: Session, run_ids: Iterable[int]) -> dict[int, ProgressRecord]:
    """The progress of these runs (those that reported), by run id."""
    ids = sorted(set(run_ids))
    if not ids:
        return {}
    rows = session.scalars(select(RunProgress).where(RunProgress.run_id.in_(ids)))
    return {row.run_id: progress_record(row) for row in rows}


def attach(jobs: list[JobRecord], known: Mapping[int, ProgressRecord]) -> list[JobRecord]:
    """``jobs``, each with its current run's progress where ``known`` (by run id) has it."""
    if not known:
        return jobs
    return [
        replace(j, progress=known[j.current_run_id])
        if j.current_run_id is not None and j.current_run_id in known
        else j
        for j in jobs
    ]


def _values(record: ProgressRecord) -> dict[str, object]:
    values: dict[str, object] = {name: getattr(record, name) for name in _SAVED}
    values.update(run_id=record.run_id, job_id=record.job_id, declared_at=record.declared_at)
    return values


def save(session: Session, records: Sequence[ProgressRecord]) -> None:
    """Insert or update these runs' progress in one statement; the stall verdict
    (``stalled_since``, the owner's) is never touched here. Runs deleted meanwhile (their job
    was deleted) are skipped."""
    if not records:
        return
    existing = set(
        session.scalars(select(Run.id).where(Run.id.in_(sorted({r.run_id for r in records}))))
    )
    rows = [_values(r) for r in records if r.run_id in existing]
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    if dialect in ("mysql", "mariadb"):
        ours = mysql.insert(RunProgress).values(rows)
        session.execute(
            ours.on_duplicate_key_update({name: ours.inserted[name] for name in _SAVED})
        )
    else:
        lite = sqlite.insert(RunProgress).values(rows)
        session.execute(
            lite.on_conflict_do_update(
                index_elements=[RunProgress.run_id],
                set_={name: lite.excluded[name] for name in _SAVED},
            )
        )


def add_samples(session: Session, records: Sequence[ProgressRecord], at: datetime) -> None:
    """One history sample of each of these runs' progress, taken ``at``."""
    if not records:
        return
    session.execute(
        insert(ProgressSample),
        [
            {
                "job_id": r.job_id,
                "run_id": r.run_id,
                "at": at,
                "batch_id": r.batch_id,
                "rows": r.rows,
                "input_rate": r.input_rate,
                "processing_rate": r.processing_rate,
                "batch_duration_ms": r.batch_duration_ms,
            }
            for r in records
        ],
    )


def prune_samples(session: Session, before: datetime) -> int:
    """Forget the history older than ``before``; returns how many samples went."""
    result = session.execute(
        delete(ProgressSample)
        .where(ProgressSample.at < before)
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Sample:
    at: datetime
    run_id: int
    batch_id: int | None
    rows: int | None
    input_rate: float | None
    processing_rate: float | None
    batch_duration_ms: int | None


def history(session: Session, job_id: int, *, since: datetime, limit: int) -> list[Sample]:
    """The job's samples since ``since``, oldest first, at most the newest ``limit``."""
    rows = session.scalars(
        select(ProgressSample)
        .where(ProgressSample.job_id == job_id, ProgressSample.at >= since)
        .order_by(ProgressSample.at.desc(), ProgressSample.id.desc())
        .limit(limit)
    ).all()
    return [
        Sample(
            r.at, r.run_id, r.batch_id, r.rows, r.input_rate, r.processing_rate, r.batch_duration_ms
        )
        for r in reversed(rows)
    ]


# -- the owner's verdicts -------------------------------------------------------------------------


@dataclass(frozen=True)
class StallCandidate:
    """An owned job whose current run's verdict may change now."""

    job_id: int
    job: str
    team: str
    cluster: str | None
    state: JobState
    stall_after: float | None
    on_stall: OnStall
    run_id: int
    run_started_at: datetime | None
    progress: ProgressRecord


def stall_candidates(
    session: Session, group: str, fence: Fence, *, quiet_before: datetime
) -> list[StallCandidate]:
    """The jobs of ``group`` this node owns under ``fence`` whose current run either has not
    moved since ``quiet_before`` while RUNNING, or is marked stalled (to clear or keep)."""
    rows = session.execute(
        select(Job, Run.started_at, RunProgress)
        .join(RunProgress, RunProgress.run_id == Job.current_run_id)
        .join(Run, Run.id == Job.current_run_id)
        .where(
            Job.group_name == group,
            Job.owner == fence.node_id,
            Job.owner_epoch == fence.epoch,
            or_(
                (Job.state == JobState.RUNNING.value) & (RunProgress.heartbeat_at < quiet_before),
                RunProgress.stalled_since.is_not(None),
            ),
        )
    ).all()
    return [
        StallCandidate(
            job_id=job.id,
            job=job.name,
            team=job.team,
            cluster=job.cluster_name,
            state=JobState(job.state),
            stall_after=job.stall_after,
            on_stall=OnStall(job.on_stall or OnStall.ALERT),
            run_id=progress.run_id,
            run_started_at=started_at,
            progress=progress_record(progress),
        )
        for job, started_at, progress in rows
    ]


def stall_restarts(session: Session, job_id: int, since: datetime) -> int:
    """How many times the job was restarted for a stall since ``since``."""
    return int(
        session.scalar(
            select(func.count())
            .select_from(JobEvent)
            .where(JobEvent.job_id == job_id, JobEvent.cause == RESTARTED, JobEvent.at >= since)
        )
        or 0
    )


def record_stall(
    session: Session,
    fence: Fence,
    candidate: StallCandidate,
    change: StallChange,
    *,
    now: datetime,
) -> bool:
    """Record a verdict change, fenced: only while this node owns the job under ``fence`` and
    the run is still the job's current one. With ``change.restart`` the job's generation moves
    (the reconciler replaces the run, as for an operator's restart). Returns whether it landed.
    """
    job = session.scalars(
        select(Job).where(
            Job.id == candidate.job_id,
            Job.owner == fence.node_id,
            Job.owner_epoch == fence.epoch,
            Job.current_run_id == candidate.run_id,
        )
    ).first()
    if job is None:
        return False
    stalled = change.kind == "stalled"
    result = session.execute(
        update(RunProgress)
        .where(
            RunProgress.run_id == candidate.run_id,
            RunProgress.stalled_since.is_(None)
            if stalled
            else RunProgress.stalled_since.is_not(None),
        )
        .values(stalled_since=now if stalled else None)
        .execution_options(synchronize_session=False)
    )
    if not result.rowcount:  # type: ignore[attr-defined]
        return False  # another verdict landed first

    def note(cause: str, message: str) -> None:
        add_event(
            session,
            job,
            candidate.run_id,
            None,
            cause=cause,
            message=message,
            node_id=fence.node_id,
        )

    note(STALLED if stalled else RECOVERED, change.reason)
    key = key_of(AlertKind.JOB_STALLED, job.name)
    if stalled:
        raise_alert(
            session,
            Signal(
                AlertKind.JOB_STALLED,
                job.name,
                f"job {job.name}: {change.reason}",
                team=job.team,
                cluster=job.cluster_name,
                group=job.group_name,
                details={
                    "run_id": candidate.run_id,
                    "batch_id": candidate.progress.batch_id,
                    "restart": change.restart,
                },
            ),
            now,
        )
    else:
        resolve_alert(session, key, f"job {job.name}: {change.reason}", now)
    if change.restart:
        job.generation += 1
        job.grace_seconds = 0  # a stalled pipeline finishes no batch: no graceful stop
        job.version += 1
        job.updated_at = now
        note(RESTARTED, "restart: the run is replaced because it stalled (on_stall = restart)")
    return True


def stalled_counts(session: Session, node_id: str) -> list[tuple[str, str, int]]:
    """``(group, cluster, count)`` of the RUNNING jobs ``node_id`` owns whose run is stalled."""
    rows = session.execute(
        select(Job.group_name, Job.cluster_name, func.count())
        .join(RunProgress, RunProgress.run_id == Job.current_run_id)
        .where(Job.owner == node_id, RunProgress.stalled_since.is_not(None))
        .group_by(Job.group_name, Job.cluster_name)
    ).all()
    return [(str(g), str(c or ""), int(n)) for g, c, n in rows]
