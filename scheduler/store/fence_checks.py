"""Fencing tokens and fence check-ins.

:func:`run_holding_token` is the one place a fencing token a pipeline presents is checked
against the store (the API's security edge calls it for every request carrying one): how the
token is kept (its SHA-256 digest, never the token: ``scheduler/store/ledger.py`` says why), and
what else a valid token must satisfy, is decided there and nowhere else.

Check-ins: the first time a run's pipeline asked the fence endpoint as itself, written by
``GET /v1/jobs/{name}/fence`` (api/routes/fence.py) once per run, read back as
``runs.fence_checked_at`` (scheduler/decisions/selffencing.py says what it means for the job).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, bindparam, select, update
from sqlalchemy.orm import Session

from scheduler.core.ledger import fencing_digest
from scheduler.core.states import RunState
from scheduler.store.models import Job, Run

_FINAL = [s.value for s in RunState if s.is_final]

#: the longest fencing token a run is given (``runs.fencing_token``)
MAX_TOKEN_LENGTH = 64

_RUN_OF_TOKEN = (
    select(Run.__table__.c.id)
    .join(Job.__table__, Job.__table__.c.id == Run.__table__.c.job_id)
    .where(
        Job.__table__.c.name == bindparam("job"),
        Run.__table__.c.fencing_token == bindparam("token"),
    )
)


def run_holding_token(session: Session | Connection, job: str, token: str) -> int | None:
    """The id of the run of job ``job`` whose fencing token is ``token``, or None (no such job,
    no such run, or a run of another job: one answer for all, so a caller learns nothing about
    which jobs exist). Any run of the job, current or not: whether it is current is the fence's
    answer (api/routes/fence.py), not a matter of who is asking."""
    if not token or len(token) > MAX_TOKEN_LENGTH or not job:
        return None
    connection = session.connection() if isinstance(session, Session) else session
    found = connection.execute(_RUN_OF_TOKEN, {"job": job, "token": fencing_digest(token)}).first()
    return None if found is None else int(found[0])


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
