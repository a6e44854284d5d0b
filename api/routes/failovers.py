"""``/v1/failovers``: plan (dry run), execute, follow and cancel cluster failovers.

A failover moves the selected jobs on a source cluster to a target cluster (default: each job's
group's other cluster), each resumed from its checkpoint, never running twice
(``scheduler/decisions/operations/failover.py`` says how). ``POST`` plans it: with ``dry_run`` it
answers the plan and stores nothing; without, it stores the plan as an operation that the executor
of its home group's pool runs (``scheduler/loops/operations.py``) and answers 201 at once.
Follow it with ``GET /v1/failovers/{id}`` (each item's step, what it waits for, its history);
``POST /v1/failovers/{id}/cancel`` stops it after the current steps. Both writes take an
``Idempotency-Key``: a retried request (a CLI that timed out) starts no second failover.

Who may: a failover moves the jobs of every team on a cluster, so running or cancelling one needs
the operator role on every team (``*``: a platform operator) and reading them the viewer role
there. Creating and cancelling are audited in the same transaction.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response, status

from api import paging
from api.deps import CallerDep, ContextDep, StoreDep
from api.idempotency import Idempotent
from api.paging import CursorQuery, PageLimitQuery
from api.problems import problem_responses
from api.routes.common import OperationListing, store_plan
from api.schemas.operations import FailoverCreate, FailoverPage, FailoverPublic
from scheduler.core.clock import utcnow
from scheduler.core.errors import NotFound
from scheduler.core.records import ClusterRecord
from scheduler.decisions.operations import failover as fo
from scheduler.decisions.operations.model import OperationKind, OperationState
from scheduler.store import catalog as catalog_store
from scheduler.store import operations as ops_store

router = APIRouter(prefix="/v1/failovers", tags=["failovers"])

_LISTING = OperationListing(FailoverPage, FailoverPublic.of)

OperationId = Annotated[int, Path(ge=1, le=2**31 - 1, description="the failover's id")]


def plan(
    ctx: ContextDep, store: StoreDep, request: fo.Request
) -> tuple[fo.Plan, dict[str, ClusterRecord]]:
    with store.session() as session:
        clusters = {c.name: c for c in catalog_store.list_clusters(session)}
        groups = {g.name: g for g in catalog_store.list_groups(session)}
        if request.source not in clusters:
            raise NotFound(f"no cluster named {request.source!r}")
        if request.target is not None and request.target not in clusters:
            raise NotFound(f"no cluster named {request.target!r}")
        jobs = ops_store.candidate_jobs(session, request.source)
    up = ctx.probe(clusters[request.source])  # the node's probe (api.deps.NodeContext)
    return (
        fo.plan_failover(request, jobs, groups, clusters, source_reachable=up, now=utcnow()),
        clusters,
    )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=FailoverPublic,
    responses={
        200: {"model": FailoverPublic, "description": "the plan of a dry run (nothing stored)"},
        **problem_responses(404, 409, 415),
    },
    operation_id="create_failover",
    summary="Plan (dry run) or start a failover",
    dependencies=[Idempotent],
)
def create_failover(body: FailoverCreate, caller: CallerDep, response: Response) -> FailoverPublic:
    """Plan the failover of the selected jobs on ``source`` to ``target``: priority high first,
    then by name, each item with what will happen and why. With ``dry_run`` nothing is stored
    (200); otherwise the plan is stored and executed (201, ``Location`` of the failover). Pass the
    dry run's ``plan_digest`` as ``expected_plan`` to refuse (409) an execution whose plan differs
    from the one reviewed."""
    actor = caller.actor
    request = body.request(actor).check()
    parallelism = body.parallelism or caller.ctx.settings.failover_parallelism
    found, _ = plan(caller.ctx, caller.store, request)
    if body.dry_run:
        response.status_code = status.HTTP_200_OK
        return FailoverPublic.dry(
            found, request, reason=body.reason, by=actor, parallelism=parallelism
        )
    planned = fo.new_operation(
        found,
        request,
        created_by=actor,
        reason=body.reason,
        home_group=found.home_group("default"),
        parallelism=parallelism,
    )
    op = store_plan(caller, response, planned, body.expected_plan, "/v1/failovers")
    return FailoverPublic.of(op)


@router.get(
    "",
    response_model=FailoverPage,
    operation_id="list_failovers",
    summary="List failovers, newest first",
)
def list_failovers(
    request: Request,
    response: Response,
    store: StoreDep,
    state: Annotated[
        list[OperationState] | None,
        Query(
            max_length=len(OperationState),
            description="only failovers in these states (repeat the parameter)",
            examples=[["RUNNING"]],
        ),
    ] = None,
    source: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=128,
            description="only failovers from this cluster",
            examples=["spark-a"],
        ),
    ] = None,
    cursor: CursorQuery = None,
    limit: PageLimitQuery = paging.DEFAULT_LIMIT,
) -> FailoverPage:
    """Failovers newest first, without their items (``counts`` says how many are at each step);
    follow ``next`` (or pass ``next_cursor`` as ``cursor``) for the next page."""
    filters = {"state": sorted(s.value for s in state or ()), "source": source}
    which = {"kind": OperationKind.FAILOVER, "states": state or (), "source_cluster": source}
    return _LISTING.read(request, response, store, cursor, limit, filters, which)


def _get(store: StoreDep, operation_id: int) -> FailoverPublic:
    with store.session() as session:
        op = ops_store.get_operation(session, operation_id)
    if op.kind != OperationKind.FAILOVER:
        raise NotFound(f"no failover {operation_id}")
    return FailoverPublic.of(op)


@router.get(
    "/{operation_id}",
    response_model=FailoverPublic,
    responses=problem_responses(404),
    operation_id="get_failover",
    summary="A failover and each item's progress",
)
def get_failover(operation_id: OperationId, store: StoreDep) -> FailoverPublic:
    """The failover, and per item (in plan order) its step, what it waits for, the runs involved,
    the checkpoint it resumes from and the history of its steps."""
    return _get(store, operation_id)


@router.post(
    "/{operation_id}/cancel",
    response_model=FailoverPublic,
    responses=problem_responses(404, 409),
    operation_id="cancel_failover",
    summary="Cancel a failover after its current steps",
    dependencies=[Idempotent],
)
def cancel_failover(operation_id: OperationId, caller: CallerDep) -> FailoverPublic:
    """No item starts any more; an item under way finishes its current step and, if its job has
    not been switched yet, ends CANCELLED with the job left where it is (a job already switched
    finishes its move). A failover no node has started is cancelled at once. 409 when it is
    over."""
    with caller.store.transaction() as session:
        op = ops_store.get_operation(session, operation_id)
        if op.kind != OperationKind.FAILOVER:
            raise NotFound(f"no failover {operation_id}")
        after = ops_store.request_cancel(session, operation_id, by=caller.actor)
        caller.audit(
            session,
            "failover.cancel",
            str(operation_id),
            {"state": op.state.value},
            target_kind="operation",
            before={"state": op.state.value},
            after={"state": after.state.value, "cancel_requested": True},
        )
    return FailoverPublic.of(after)
