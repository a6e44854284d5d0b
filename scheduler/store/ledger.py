"""The ledger: the fenced transactions the reconciler acts through (DESIGN §2, invariant 3).

Claiming a pool slot's jobs, reading the jobs to reconcile, proving a claim, conditional state
transitions, and runs (intent, outcome, close). Every write that acts on a job is conditional on
the version the caller read and, with a fence, on the claim still owning the job: StaleWrite or
NotOwner otherwise, and nothing changes.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from scheduler.errors import (
    NotFound,
    NotOwner,
    StaleWrite,
)
from scheduler.ownership import Claim, Fence
from scheduler.records import (
    JobRecord,
    RunRecord,
)
from scheduler.states import DesiredState, JobState, RunState, transition
from scheduler.store.jobs import with_current_runs
from scheduler.store.mapping import run_record
from scheduler.store.models import Job, JobEvent, Run, utcnow


def jobs_to_reconcile(
    session: Session, groups: Iterable[str] | None, fence: Fence | None = None
) -> list[JobRecord]:
    """Jobs that may need work: desired RUNNING or not at rest; with ``fence``, only its own."""
    at_rest = [s.value for s in (JobState.STOPPED, JobState.FINISHED, JobState.FAILED)]
    stmt = select(Job).where(
        (Job.desired_state == DesiredState.RUNNING.value) | Job.state.not_in(at_rest)
    )
    if groups is not None:
        stmt = stmt.where(Job.group_name.in_(list(groups)))
    if fence is not None:
        stmt = stmt.where(*_owned_by(fence))
    jobs = list(session.scalars(stmt.order_by(Job.id)))
    return with_current_runs(session, jobs)


def _owned_by(fence: Fence) -> tuple[Any, ...]:
    return (Job.owner == fence.node_id, Job.owner_epoch == fence.epoch)


def claim_jobs(session: Session, claim: Claim) -> int:
    """Take the group's jobs that hash to this node's pool slot; returns how many changed hands.

    ``CRC32(name) % size = index`` runs in the database (SQLite gets a ``crc32`` function from
    the store). A job already claimed under a newer epoch is left alone: a node with a stale
    view can never take a job back. The version is not bumped: ownership is not a spec change.
    """
    fence = claim.fence
    result = session.execute(
        update(Job)
        .where(
            Job.group_name == claim.group,
            func.crc32(Job.name) % claim.size == claim.index,
            Job.owner_epoch <= fence.epoch,
            or_(Job.owner.is_(None), Job.owner != fence.node_id, Job.owner_epoch < fence.epoch),
        )
        .values(owner=fence.node_id, owner_epoch=fence.epoch)
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def jobs_per_owner(session: Session, group: str) -> dict[str | None, int]:
    """How many of ``group``'s jobs each node owns in the store (None: not claimed yet)."""
    rows = session.execute(
        select(Job.owner, func.count()).where(Job.group_name == group).group_by(Job.owner)
    )
    return {owner: int(count) for owner, count in rows}


def check_owner(session: Session, job: JobRecord, fence: Fence) -> None:
    """Prove in this transaction that ``fence`` still owns ``job``; raises NotOwner otherwise.

    A no-op UPDATE, so that on MySQL it also locks the row until the transaction ends: a
    concurrent claim by another node waits for this transaction instead of racing it.
    """
    result = session.execute(
        update(Job)
        .where(Job.id == job.id, *_owned_by(fence))
        .values(owner_epoch=Job.owner_epoch)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        raise NotOwner(
            f"job {job.name!r} is no longer owned by {fence.node_id} under epoch {fence.epoch}"
        )


def transition_job(
    session: Session,
    job: JobRecord,
    new_state: JobState,
    *,
    reason: str,
    cause: str,
    node_id: str,
    run_id: int | None = None,
    fence: Fence | None = None,
    **fields: Any,
) -> int:
    """Conditionally move ``job`` (as last read) to ``new_state``; returns the new version.

    The write only lands if the job is still at the version the caller read: a concurrent API
    write or another node's action makes it raise StaleWrite, and nothing is changed. With a
    ``fence`` it also only lands while that claim owns the job (NotOwner otherwise).
    """
    transition(job.state, new_state)
    values: dict[str, Any] = {
        "state": new_state.value,
        "version": job.version + 1,
        "updated_at": utcnow(),
        **fields,
    }
    if new_state != job.state or reason != job.state_reason:
        values["state_reason"] = reason
    conditions = [Job.id == job.id, Job.version == job.version]
    if fence is not None:
        conditions.extend(_owned_by(fence))
    result = session.execute(update(Job).where(*conditions).values(**values))
    if result.rowcount != 1:  # type: ignore[attr-defined]
        if fence is not None:
            check_owner(session, job, fence)  # raises NotOwner when that is the reason
        raise StaleWrite(f"job {job.name!r} changed since version {job.version}")
    if new_state != job.state:
        session.add(
            JobEvent(
                job_id=job.id,
                run_id=run_id if run_id is not None else job.current_run_id,
                from_state=job.state.value,
                to_state=new_state.value,
                cause=cause,
                message=reason,
                node_id=node_id,
            )
        )
    return job.version + 1


def create_run(
    session: Session,
    job: JobRecord,
    *,
    cluster: str,
    node_id: str,
    owner_epoch: int,
    checkpoint_location: str,
    app_name_for: Any,
) -> RunRecord:
    """Record the intent to submit a new run (state SUBMITTING) with a fresh fencing token."""
    last = session.scalar(select(func.max(Run.attempt)).where(Run.job_id == job.id)) or 0
    run = Run(
        job_id=job.id,
        attempt=last + 1,
        generation=job.generation,
        cluster_name=cluster,
        node_id=node_id,
        owner_epoch=owner_epoch,
        fencing_token=secrets.token_hex(16),
        app_name="",
        checkpoint_location=checkpoint_location,
        state=RunState.SUBMITTING.value,
        reason="",
        created_at=utcnow(),
    )
    session.add(run)
    session.flush()
    run.app_name = app_name_for(job.name, run.id)
    session.flush()
    return run_record(run, job.name)


RUN_FIELDS = frozenset(
    {
        "submission_id",
        "app_id",
        "state",
        "reason",
        "exit_code",
        "submitted_at",
        "started_at",
        "ended_at",
        "counts_as_failure",
    }
)


def update_run(session: Session, run: RunRecord, **fields: Any) -> RunRecord:
    unknown = set(fields) - RUN_FIELDS
    if unknown:
        raise ValueError(f"not run fields: {sorted(unknown)}")
    row = session.get(Run, run.id)
    if row is None:
        raise NotFound(f"no run {run.id}")
    if RunState(row.state).is_final:
        raise StaleWrite(f"run {run.id} is already closed ({row.state})")
    for key, value in fields.items():
        setattr(row, key, value.value if isinstance(value, RunState) else value)
    session.flush()
    return run_record(row, run.job_name)


def failures_since(
    session: Session, job: JobRecord, since: datetime
) -> tuple[int, datetime | None]:
    """Runs whose end counted as a failure (``counts_as_failure``) since ``since``, and the last
    end: not kills by Drover, runs never submitted, or failures on an abnormal cluster."""
    row = session.execute(
        select(func.count(), func.max(Run.ended_at)).where(
            Run.job_id == job.id, Run.counts_as_failure.is_(True), Run.ended_at >= since
        )
    ).one()
    last = row[1]
    return int(row[0]), last
