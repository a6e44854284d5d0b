"""What the stray sweep reads and writes (``scheduler.decisions.strays``): the runs listed
applications claim to be (with their recorded submission ids), and the event recorded on a job
when a stray or a duplicate of one of its runs was killed."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from scheduler.core.states import RunState
from scheduler.decisions.strays import RunView, Stray
from scheduler.store import journal
from scheduler.store.models import Job, Run


def runs_for_sweep(
    session: Session, run_ids: Iterable[int], fence_tag: Callable[[str], str]
) -> dict[int, RunView]:
    ids = sorted(set(run_ids))
    if not ids:
        return {}
    rows = session.execute(
        select(
            Run.id, Job.name, Run.state, Run.fencing_token, Run.submission_id, Run.superseded_tokens
        )
        .join(Job, Job.id == Run.job_id)
        .where(Run.id.in_(ids))
    )
    return {
        run_id: RunView(
            run_id,
            name,
            state,
            RunState(state).is_final,
            fence_tag(token),
            submission_id,
            frozenset(fence_tag(d) for d in (superseded or "").split(",") if d),
        )
        for run_id, name, state, token, submission_id, superseded in rows
    }


def record_stray_kill(session: Session, stray: Stray, cluster: str, node_id: str) -> None:
    """An event on the stray's job: which application of which closed run was killed again."""
    job = session.execute(select(Job).where(Job.name == stray.job_name)).scalar_one_or_none()
    if job is None:
        return
    journal.add_event(
        session,
        job,
        stray.run_id,
        None,
        cause="stray-sweep",
        message=stray.reason(cluster),
        node_id=node_id,
    )
