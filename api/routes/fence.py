"""``GET /v1/jobs/{name}/fence``: what a running pipeline asks before each micro-batch commit.

A pipeline's run is current while the job's current run is that run and is still open. The
pipeline proves which run it is by sending its fencing token (``X-Drover-Fencing-Token``; see
``pipelines/drover_runtime.py``); the answer says whether that run is current:
``fencing_token`` echoes the caller's own token when it is, and is ``null`` otherwise (another
run is current, or none is open). The token of the current run is never handed to anyone else:
a viewer of the job's team may call the route too, and always sees ``null``.

Cheap (the job by its unique name, its current run by primary key), so it is not audited and
every micro-batch of every pipeline may call it. The first check a run *proves* to be the job's
current open run (its own token) is recorded as the run's ``fence_checked_at``, one conditional
UPDATE per run and never again: that is how the job shows that its pipeline fences itself
(``self_fencing``, scheduler/selffencing.py). The answer is the same either way. An unknown job
is a 404 problem document with the extension member ``job``, which tells the runtime "this job is
gone" apart from "this URL is not a Drover fence endpoint".
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from api.deps import NamePath, PrincipalDep, StoreDep
from api.problems import problem, problem_responses
from scheduler.errors import NotFound
from scheduler.identity import FENCING_TOKEN_HEADER, same_secret
from scheduler.names import validate_name
from scheduler.states import DesiredState, RunState
from scheduler.store import jobs as jobs_store
from scheduler.store.fence_checks import record_fence_check

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/jobs", tags=["fence"])


class FencePublic(BaseModel):
    """The fence of one job: which run may commit."""

    job: str
    current_run_id: int | None
    #: the caller's own fencing token when its run is the job's current open run, else null
    fencing_token: str | None
    #: whether the caller's run is current (null: the caller is not a run)
    current: bool | None = None
    #: state of the current run (even a closed one), null when the job never ran
    run_state: RunState | None
    desired_state: DesiredState


@router.get(
    "/{name}/fence",
    response_model=FencePublic,
    responses=problem_responses(404),
)
def get_fence(
    name: NamePath, request: Request, store: StoreDep, principal: PrincipalDep, response: Response
) -> FencePublic | JSONResponse:
    name = validate_name(name, "job name")
    try:
        with store.session() as session:
            job = jobs_store.get_job(session, name)
    except NotFound as exc:
        return problem(404, exc.kind, exc.message, request.url.path, job=name)
    run = job.current_run
    open_run = run is not None and not run.state.is_final
    presented = request.headers.get(FENCING_TOKEN_HEADER)
    is_run = principal.run_of_job is not None and presented is not None
    current = (
        is_run and run is not None and open_run and same_secret(presented or "", run.fencing_token)
    )
    if current and run is not None and run.fence_checked_at is None:
        try:
            with store.transaction() as session:  # the run's first proven check, written once
                record_fence_check(session, run.id, datetime.now(UTC))
        except Exception:  # a courtesy: the fence answer never fails over it
            log.warning("cannot record the fence check of run %s", run.id, exc_info=True)
    response.headers["Cache-Control"] = "no-store"
    # a run of another job (or of no job) learns it is not current here, nothing more
    details = not is_run or principal.run_of_job == job.name
    return FencePublic(
        job=job.name,
        current_run_id=job.current_run_id if details else None,
        fencing_token=presented if current else None,
        current=current if is_run else None,
        run_state=run.state if run is not None and details else None,
        desired_state=job.desired_state,
    )
