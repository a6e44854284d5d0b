"""Fence check-ins: the first time a run's pipeline asked the fence endpoint as itself.

Written by ``GET /v1/jobs/{name}/fence?run_id=<id>`` (api/routes/fence.py) once per run, read
back as ``runs.fence_checked_at`` (scheduler/selffencing.py says what it means for the job).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update
from sqlalchemy.orm import Session

from scheduler.states import RunState
from scheduler.store.models import Run

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
