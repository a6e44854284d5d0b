"""``GET /v1/jobs/{name}/progress``: a job's streaming progress now and its recent history.

The progress is what the job's pipeline reports with its fence checks (``drover_runtime``;
``scheduler/decisions/stalls.py`` says what it means); the history keeps one sample per job every
``DROVER_PROGRESS_SAMPLE_INTERVAL`` seconds for ``DROVER_PROGRESS_HISTORY`` seconds, enough for
a sparkline.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import ContextDep, NamePath, StoreDep
from api.problems import problem_responses
from api.schemas.progress import JobProgressPublic, ProgressPublic, SamplePublic
from scheduler.core.clock import utcnow
from scheduler.core.names import validate_name
from scheduler.decisions.stalls import effective_stall_after
from scheduler.store import jobs as jobs_store
from scheduler.store import progress as progress_store

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.get(
    "/{name}/progress",
    response_model=JobProgressPublic,
    responses=problem_responses(404),
    operation_id="get_job_progress",
    summary="A job's streaming progress and its recent history",
    description="The current run's last progress report (batch, rows, rates, duration, "
    "stall verdict) and the job's samples of the last `minutes` (oldest first, at most "
    "`limit`), across its runs.",
)
def get_progress(
    name: NamePath,
    ctx: ContextDep,
    store: StoreDep,
    minutes: Annotated[int, Query(ge=1, le=24 * 60, description="how far back")] = 60,
    limit: Annotated[int, Query(ge=1, le=1000, description="at most this many samples")] = 120,
) -> JobProgressPublic:
    since = utcnow() - timedelta(minutes=minutes)
    with store.session() as session:
        job = jobs_store.get_job(session, validate_name(name, "job name"))
        samples = progress_store.history(session, job.id, since=since, limit=limit)
    interval = job.progress.trigger_interval_ms if job.progress is not None else None
    return JobProgressPublic(
        job=job.name,
        current=ProgressPublic.of_job(job),
        stall_after=job.stall_after,
        effective_stall_after=effective_stall_after(
            job.stall_after, interval, ctx.settings.stall_policy
        ),
        on_stall=job.on_stall,
        history=[SamplePublic.of(s) for s in samples],
    )
