"""Fence check-ins: the first time a run's pipeline asked the fence endpoint as itself.

Written by ``GET /v1/jobs/{name}/fence`` (api/routes/fence.py) once per run, read back as
``runs.fence_checked_at`` (scheduler/decisions/selffencing.py says what it means for the job).
Which run a presented fencing token proves is ``identities.run_of_fencing_token``'s.

Leases: the latest end of a fence lease granted to a run's driver, ``runs.lease_until``, written
by the same route at most once per half lease (:func:`grant_lease`; the rule is
scheduler/decisions/leases.py), only while the run is open.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from scheduler.core.states import RunState
from scheduler.decisions import leases
from scheduler.store.models import Job, Run

_FINAL = [s.value for s in RunState if s.is_final]


def record_fence_check(session: Session, run_id: int, at: datetime) -> bool:
    """Note the first fence check of an open run; False when there is nothing to note (already
    noted, closed, or no such run). One conditional UPDATE: concurrent checks note it once."""
    result = session.execute(
        update(Run)
        .where(Run.id == run_id, Run.fence_checked_at.is_(None), Run.state.not_in(_FINAL))
        .values(fence_checked_at=at)
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def grant_lease(
    session: Session, run_id: int, recorded: datetime | None, now: datetime, lease_s: float
) -> datetime | None:
    """The end of the lease a confirming fence answer at ``now`` may grant run ``run_id``
    (``recorded``: its lease end as the caller read it), recording a later end first when the
    rule says so; None when the run is closed (then the answer must not confirm it: a lease is
    never granted to a run Drover no longer counts as live). The answer's lease never ends after
    the run's recorded end. One conditional UPDATE when a write is due, none otherwise."""
    decided = leases.grant(recorded, now, lease_s)
    if decided.record is None:
        return decided.ends
    result = session.execute(
        update(Run)
        .where(
            Run.id == run_id,
            Run.state.not_in(_FINAL),
            or_(Run.lease_until.is_(None), Run.lease_until < decided.record),
        )
        .values(lease_until=decided.record)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount:  # type: ignore[attr-defined]
        return decided.ends
    # closed meanwhile, or another check recorded a later end already
    row = session.execute(select(Run.state, Run.lease_until).where(Run.id == run_id)).first()
    if row is None or RunState(row.state).is_final or row.lease_until is None:
        return None
    return min(decided.ends, row.lease_until)


def record_stop_batch(
    session: Session, run_id: int, job_id: int, batch_id: int, at: datetime
) -> bool:
    """Note the batch a run's pipeline stopped at after a graceful stop was asked of it (the
    run is open and draining); False when there is nothing to note. The job's ``updated_at``
    moves too (not its version: this is no write of the owner's), so the owner's next
    incremental read sees the run as it is now and says the batch when it closes the run."""
    result = session.execute(
        update(Run)
        .where(Run.id == run_id, Run.drain_deadline.is_not(None), Run.state.not_in(_FINAL))
        .values(stop_batch=batch_id)
        .execution_options(synchronize_session=False)
    )
    if not result.rowcount:  # type: ignore[attr-defined]
        return False
    session.execute(
        update(Job)
        .where(Job.id == job_id, Job.current_run_id == run_id)
        .values(updated_at=at)
        .execution_options(synchronize_session=False)
    )
    return True
