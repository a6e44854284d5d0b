"""``GET /v1/jobs/{name}/fence``: what a running pipeline asks before each micro-batch commit.

A pipeline's run is current while the job's current run is that run and is still open; its
fencing token is then the one the pipeline was started with. The answer carries the token of
the job's current *open* run, or ``null`` when there is none (no run yet, or the current run is
closed: killed, lost, finished, failed). A pipeline that holds another token, or sees ``null``,
has been superseded and stops itself (see ``pipelines/drover_runtime.py``).

Read-only and cheap (the job by its unique name, its current run by primary key), so it is not
audited and every micro-batch of every pipeline may call it. An unknown job is a 404 problem
document with the extension member ``job``, which tells the runtime "this job is gone" apart from
"this URL is not a Drover fence endpoint". Pipelines send ``Authorization: Bearer <token>`` when
they are given one (``spark.drover.fenceAuth``); checking it is left to the auth issue, through
the caller dependency like every other route.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from api.deps import ActorDep, StoreDep
from api.problems import problem
from scheduler.errors import NotFound
from scheduler.names import validate_name
from scheduler.states import DesiredState, RunState
from scheduler.store import jobs as jobs_store

router = APIRouter(prefix="/v1/jobs", tags=["fence"])


class FencePublic(BaseModel):
    """The fence of one job: which run may commit."""

    job: str
    current_run_id: int | None
    #: token of the job's current open run; null when no run may commit
    fencing_token: str | None
    #: state of the current run (even a closed one), null when the job never ran
    run_state: RunState | None
    desired_state: DesiredState


@router.get(
    "/{name}/fence",
    response_model=FencePublic,
    responses={404: {"description": "no such job (problem document with a `job` member)"}},
)
def get_fence(
    name: str, request: Request, store: StoreDep, actor: ActorDep, response: Response
) -> FencePublic | JSONResponse:
    name = validate_name(name, "job name")
    try:
        with store.session() as session:
            job = jobs_store.get_job(session, name)
    except NotFound as exc:
        return problem(404, exc.kind, exc.message, request.url.path, job=name)
    run = job.current_run
    open_run = run is not None and not run.state.is_final
    response.headers["Cache-Control"] = "no-store"
    return FencePublic(
        job=job.name,
        current_run_id=job.current_run_id,
        fencing_token=run.fencing_token if run is not None and open_run else None,
        run_state=run.state if run is not None else None,
        desired_state=job.desired_state,
    )
