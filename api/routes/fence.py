"""``GET /v1/jobs/{name}/fence``: what a running pipeline asks before each micro-batch commit.

A pipeline's run is current while the job's current run is that run and is still open. The
pipeline proves which run it is by sending its fencing token (``X-Drover-Fencing-Token``; see
``pipelines/drover_runtime.py``); the security edge has checked it before this route runs (a
token that no run of this job holds is a 401 there, the same whether the job exists or not:
``scheduler.store.identities.run_of_fencing_token``), so here the caller is that run or a person.
The answer says whether that run is current:
``fencing_token`` echoes the caller's own token when it is, and is ``null`` otherwise (another
run is current, or none is open). The token of the current run is never handed to anyone else:
a viewer of the job's team may call the route too, and always sees ``null``.

Cheap (the job by its unique name, its current run by primary key), so it is not audited and
every micro-batch of every pipeline may call it. The first check a run *proves* to be the job's
current open run (its own token) is recorded as the run's ``fence_checked_at``, one conditional
UPDATE per run and never again: that is how the job shows that its pipeline fences itself
(``self_fencing``, scheduler/decisions/selffencing.py). Likewise the first check of one of the job's
runs that is *not* current (closed, or replaced) is recorded as that run's ``fence_superseded_at``:
its driver was told to stop, which a failover's fence step waits for
(scheduler/decisions/operations/failover.py). The answer is the same either way. An unknown job
(asked by a person) is a 404 problem document, and a fencing token no run of the job holds a 401
one, both with the extension member ``job``, which tells the runtime "this job (or run) is gone"
apart from "this URL is not a Drover fence endpoint".

**Leases.** A run whose runtime honours fence leases says so (``X-Drover-Fence-Lease: 1``).
Every answer that confirms such a run grants it a lease: ``lease_seconds``, how long the run may
go on committing without another confirming answer, measured by the run from before it sent
the request (``DROVER_FENCE_LEASE_SECONDS``, 90 s by default). The node records the run's
latest lease end coarsely -- a write only when less than half a lease of the recorded end
remains, so most checks stay reads -- and never answers with a lease ending after it
(``scheduler.decisions.leases``); the write is conditional on the run being open, and a run
closed meanwhile is answered "not current". A failover waits for that recorded end before it
counts a cut-off run as gone.

A run's pipeline may send its streaming progress with the check (``X-Drover-Progress``, one
small JSON object: ``scheduler.decisions.stalls``). It is taken only from the current run itself,
buffered in memory and written in batches by the node's progress sink
(``scheduler/loops/progress.py``), so the answer never waits on it; a malformed one is ignored.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from api.deps import ContextDep, NamePath, PrincipalDep, StoreDep
from api.problems import problem, problem_responses
from scheduler.core.errors import NotFound
from scheduler.core.names import validate_name
from scheduler.core.records import RunRecord
from scheduler.core.states import DesiredState, RunState
from scheduler.decisions import leases
from scheduler.decisions.identity import FENCING_TOKEN_HEADER
from scheduler.decisions.stalls import parse_report
from scheduler.loops.progress import ProgressSink
from scheduler.store import jobs as jobs_store
from scheduler.store.db import Store
from scheduler.store.fence_checks import grant_lease, record_fence_check, record_stop_batch
from scheduler.store.operations import record_superseded_check

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/jobs", tags=["fence"])

#: the header a run's pipeline sends its progress in, with its fence check
#: (scheduler.decisions.stalls)
PROGRESS_HEADER = "X-Drover-Progress"
#: the header a gracefully stopped run's pipeline names the last batch it committed in
STOPPED_HEADER = "X-Drover-Stopped-At-Batch"


def take_progress(request: Request, run_id: int, job_id: int, raw: str) -> None:
    """Hand the run's progress report to the node's sink (no I/O here: see
    scheduler/loops/progress.py); a malformed report is counted and ignored, never an error."""
    sink: ProgressSink = request.app.state.progress
    try:
        report = parse_report(raw)
    except ValueError as exc:
        sink.invalid()
        log.debug("run %s sent a malformed progress report (%s)", run_id, exc)
        return
    sink.report(run_id, job_id, report)


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
    #: the caller's run is asked to finish its current micro-batch and exit (a graceful stop);
    #: null when the caller is not the current run
    stop: bool | None = None
    lease_seconds: float | None = Field(
        default=None,
        description="The fence lease this answer grants the caller's run, in seconds: it may "
        "commit for that long (measured from before it sent the request) without another "
        "confirming answer, and must stop committing then. Null when the caller is not the "
        "job's current run or did not ask for a lease (`X-Drover-Fence-Lease: 1`).",
        examples=[90.0],
    )


@router.get(
    "/{name}/fence",
    operation_id="get_job_fence",
    summary="Fence check of a running pipeline",
    description=(
        "What a running pipeline asks before each micro-batch commit: `fencing_token` echoes the "
        "caller's own token (`X-Drover-Fencing-Token`) while its run is the job's current open "
        "run, and is `null` otherwise (the pipeline must then stop). The token of the current run"
        " is never shown to anyone else. An unknown job is a 404 with the extension member `job`."
    ),
    response_model=FencePublic,
    responses=problem_responses(404),
)
def get_fence(
    name: NamePath,
    request: Request,
    store: StoreDep,
    principal: PrincipalDep,
    response: Response,
    ctx: ContextDep,
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
    # the run the edge proved the caller to be (a run of this job: see the module docstring)
    caller_run = principal.run_id if principal.run_of_job == job.name else None
    is_run = caller_run is not None and presented is not None
    current = is_run and run is not None and open_run and run.id == caller_run
    lease_seconds: float | None = None
    if current and run is not None:
        wants_lease = request.headers.get(leases.LEASE_HEADER, "").strip() == "1"
        current, lease_seconds = _confirm(store, run, wants_lease, ctx.settings.fence_lease_seconds)
    if is_run and not current and caller_run is not None:
        try:
            with store.transaction() as session:  # a stale driver told to stop, noted once
                record_superseded_check(session, job.name, caller_run, datetime.now(UTC))
        except Exception:  # a courtesy too
            log.warning("cannot record a superseded check of job %s", job.name, exc_info=True)
    stop = bool(current and run is not None and run.drain_deadline is not None)
    stopped_at = request.headers.get(STOPPED_HEADER)
    if stop and run is not None and stopped_at:
        _take_stop_batch(store, run.id, job.id, stopped_at)
    raw_progress = request.headers.get(PROGRESS_HEADER)
    if current and run is not None and raw_progress:
        take_progress(request, run.id, job.id, raw_progress)
    response.headers["Cache-Control"] = "no-store"
    return FencePublic(
        job=job.name,
        current_run_id=job.current_run_id,
        fencing_token=presented if current else None,
        current=current if is_run else None,
        run_state=run.state if run is not None else None,
        desired_state=job.desired_state,
        stop=stop if current else None,
        lease_seconds=lease_seconds,
    )


def _confirm(
    store: Store, run: RunRecord, wants_lease: bool, lease_s: float
) -> tuple[bool, float | None]:
    """Confirm the current open ``run`` to its own driver: note its first check, and grant a
    lease when it asks for one (recorded first when due). Returns whether it is still current
    (False: closed since it was read, so no lease) and the lease in seconds (None: none).

    The steady state writes nothing: the first check is noted once, and a lease end once per
    half lease. A store error on the way is logged; the answer then confirms without a lease
    (the run goes on under the lease it holds, if any), never fails."""
    now = datetime.now(UTC)
    first = run.fence_checked_at is None
    if wants_lease:
        granted = leases.grant(run.lease_until, now, lease_s)
        if granted.record is None and not first:
            return True, granted.seconds(now)
    elif not first:
        return True, None
    try:
        with store.transaction() as session:
            if first:  # the run's first proven check, written once
                record_fence_check(session, run.id, now)
            if not wants_lease:
                return True, None
            ends = grant_lease(session, run.id, run.lease_until, now, lease_s)
    except Exception:  # the answer never fails over a note
        log.warning("cannot record the fence check of run %s", run.id, exc_info=True)
        return True, None
    if ends is None:  # closed since it was read: not current, no lease
        return False, None
    return True, max(0.0, (ends - now).total_seconds())


def _take_stop_batch(store: Any, run_id: int, job_id: int, raw: str) -> None:
    """Record the batch a draining run says it stopped at (a courtesy, never an error)."""
    try:
        batch = int(raw.strip()) if raw.strip().isascii() else -1
    except ValueError:
        batch = -1
    if not 0 <= batch < 2**62:
        log.debug("run %s sent a malformed stop batch %r", run_id, raw[:40])
        return
    try:
        with store.transaction() as session:
            record_stop_batch(session, run_id, job_id, batch, datetime.now(UTC))
    except Exception:
        log.warning("cannot record the stop batch of run %s", run_id, exc_info=True)
