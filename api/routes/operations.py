"""``/v1/operations``: bulk start, stop and restart by selector; every operation, followed and
cancelled in one place.

``POST`` plans a bulk operation over the jobs a selector picks (teams, businesses, groups,
clusters, states, priorities, a name prefix, labels, job names): with ``dry_run`` it answers the
ordered plan and stores nothing; without, it stores the plan as an operation that the executor of
its home group's pool runs item by item (``scheduler/loops/operations.py``, the machinery of
failovers) and answers 201 at once. Each item applies the job command (what ``POST
/v1/jobs/{name}/start|stop|restart`` does) and waits until the job reached it; the job's owner
submits through the submission gate, so a bulk start is paced by the businesses' quotas.
``GET /v1/operations`` lists operations of every kind (failovers too), newest first, in cursor
pages; ``GET /v1/operations/{id}`` shows each item's progress; ``POST
/v1/operations/{id}/cancel`` stops it after the current steps. The writes take an
``Idempotency-Key``.

Who may: a bulk operation acts on jobs, so it needs the operator role on the team of every job
it acts on. The selection is limited to the teams the caller may act on (naming a team it may
not is a 403); a team's operator or admin acts only on that team's jobs. An operation of one
team is visible to that team's members; one of several teams (or a failover) to platform roles
(``*``) and to whoever created it. Creating and cancelling are audited, and so is every job
command an item applies (as its creator, with the operation's id).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response, status

from api import paging
from api.deps import CallerDep, PrincipalDep, StoreDep
from api.idempotency import Idempotent
from api.paging import CursorQuery, PageLimitQuery
from api.problems import problem_responses
from api.routes.common import OperationListing, store_plan
from api.schemas.bulk import BulkCreate, OperationPage, OperationPublic
from api.security.authz import Authorizer
from scheduler.core.errors import Forbidden, InvalidInput, NotFound
from scheduler.core.records import JobRecord
from scheduler.decisions.identity import Action, Principal
from scheduler.decisions.operations import bulk
from scheduler.decisions.operations.model import OperationKind, OperationRecord, OperationState
from scheduler.store import catalog as catalog_store
from scheduler.store import operations as ops_store
from scheduler.store.db import Store

router = APIRouter(prefix="/v1/operations", tags=["operations"])

_LISTING = OperationListing(OperationPage, OperationPublic.of)

OperationId = Annotated[
    int, Path(ge=1, le=2**31 - 1, description="the operation's id", examples=[42])
]


def _authorizer(request: Request) -> Authorizer:
    authorizer: Authorizer = request.app.state.authorizer
    return authorizer


def _may_write(authorizer: Authorizer, principal: Principal, team: str) -> bool:
    return authorizer.decide(
        principal, Action.JOB_WRITE, resource=f"team/{team}", team=team
    ).allowed


def plan(
    store: Store,
    authorizer: Authorizer,
    principal: Principal,
    kind: OperationKind,
    selector: bulk.Selector,
) -> bulk.Plan:
    """The plan of ``kind`` over the jobs ``selector`` picks among those ``principal`` may act
    on (Forbidden when the selector names a team it may not act on)."""
    for team in sorted(selector.teams):
        if not _may_write(authorizer, principal, team):
            raise Forbidden(
                f"{principal.subject} may not act on the jobs of team {team!r} (the operator "
                "role there is needed)"
            )
    visible = principal.teams() if authorizer.center is None else None
    with store.session() as session:
        groups = {g.name: g for g in catalog_store.list_groups(session)}
        clusters = {c.name: c for c in catalog_store.list_clusters(session)}
        jobs = ops_store.bulk_candidates(
            session,
            teams=selector.teams,
            businesses=selector.businesses,
            groups=selector.groups,
            states=[s.value for s in selector.states],
            priorities=[p.value for p in selector.priorities],
            jobs=selector.jobs,
            name_prefix=selector.name_prefix,
            visible_teams=visible,
        )
    allowed: dict[str, bool] = {}

    def permitted(job: JobRecord) -> bool:
        if job.team not in allowed:
            allowed[job.team] = _may_write(authorizer, principal, job.team)
        return allowed[job.team]

    return bulk.plan_bulk(kind, selector, filter(permitted, jobs), groups, clusters)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=OperationPublic,
    responses={
        200: {"model": OperationPublic, "description": "the plan of a dry run (nothing stored)"},
        **problem_responses(403, 409, 415),
    },
    operation_id="create_operation",
    summary="Plan (dry run) or start a bulk start, stop or restart by selector",
    dependencies=[Idempotent],
)
def create_operation(
    body: BulkCreate, request: Request, caller: CallerDep, response: Response
) -> OperationPublic:
    """Plan the bulk operation over the selected jobs you may act on: priority high first, then
    by name, each item with what will happen and why (``skip`` when the job needs nothing,
    ``refuse`` when its cluster is abnormal). With ``dry_run`` nothing is stored (200);
    otherwise the plan is stored and executed (201, ``Location`` of the operation). Pass the dry
    run's ``plan_digest`` as ``expected_plan`` to refuse (409) an execution whose plan differs
    from the one reviewed."""
    kind = OperationKind(body.kind.value)
    selector = body.selector.selector().check()
    if body.grace_seconds is not None and kind == OperationKind.START:
        raise InvalidInput("grace_seconds goes with stop and restart (a start stops nothing)")
    parallelism = body.parallelism or bulk.DEFAULT_PARALLELISM[kind]
    found = plan(caller.store, _authorizer(request), caller.principal, kind, selector)
    if body.dry_run:
        response.status_code = status.HTTP_200_OK
        return OperationPublic.dry(
            found,
            selector,
            reason=body.reason,
            by=caller.actor,
            parallelism=parallelism,
            grace_seconds=body.grace_seconds,
        )
    planned = bulk.new_operation(
        found,
        selector,
        created_by=caller.actor,
        reason=body.reason,
        home_group=found.home_group("default"),
        parallelism=parallelism,
        grace_seconds=body.grace_seconds,
    )
    op = store_plan(caller, response, planned, body.expected_plan, "/v1/operations")
    return OperationPublic.of(op)


def _visible_to(principal: Principal) -> tuple[frozenset[str], str] | None:
    teams = principal.teams()
    return None if teams is None else (teams, principal.subject)


def _visible(principal: Principal, op: OperationRecord) -> bool:
    scope = _visible_to(principal)
    if scope is None:
        return True
    teams, subject = scope
    return op.created_by == subject or (op.team is not None and op.team in teams)


@router.get(
    "",
    response_model=OperationPage,
    operation_id="list_operations",
    summary="List operations (bulk and failovers), newest first",
)
def list_operations(
    request: Request,
    response: Response,
    store: StoreDep,
    principal: PrincipalDep,
    kind: Annotated[
        list[OperationKind] | None,
        Query(description="only these kinds (repeatable)", examples=[["restart"]], max_length=4),
    ] = None,
    state: Annotated[
        list[OperationState] | None,
        Query(description="only these states (repeatable)", examples=[["RUNNING"]], max_length=5),
    ] = None,
    cursor: CursorQuery = None,
    limit: PageLimitQuery = paging.DEFAULT_LIMIT,
) -> OperationPage:
    """The operations you may see, newest first, without their items (``counts`` says how many
    are at each step); follow ``next`` (or pass ``next_cursor`` as ``cursor``) for the next
    page."""
    filters = {
        "kind": sorted(k.value for k in kind or ()),
        "state": sorted(s.value for s in state or ()),
    }
    which = {"kinds": kind or (), "states": state or (), "visible_to": _visible_to(principal)}
    return _LISTING.read(request, response, store, cursor, limit, filters, which)


def _get(store: Store, principal: Principal, operation_id: int) -> OperationRecord:
    with store.session() as session:
        op = ops_store.get_operation(session, operation_id)
    if not _visible(principal, op):
        raise NotFound(f"no operation {operation_id}")
    return op


@router.get(
    "/{operation_id}",
    response_model=OperationPublic,
    responses=problem_responses(404),
    operation_id="get_operation",
    summary="An operation and each item's progress",
)
def get_operation(
    operation_id: OperationId,
    store: StoreDep,
    principal: PrincipalDep,
    items: Annotated[
        bool,
        Query(
            description="include the items (false: the summary and counts only)", examples=[True]
        ),
    ] = True,
) -> OperationPublic:
    """The operation, and per item (in plan order) its step, what it waits for and the history
    of its steps."""
    return OperationPublic.of(_get(store, principal, operation_id), items=items)


@router.post(
    "/{operation_id}/cancel",
    response_model=OperationPublic,
    responses=problem_responses(403, 404, 409),
    operation_id="cancel_operation",
    summary="Cancel an operation after its current steps",
    dependencies=[Idempotent],
)
def cancel_operation(
    operation_id: OperationId, request: Request, caller: CallerDep
) -> OperationPublic:
    """No item starts any more; items under way finish (a bulk item whose command was applied
    waits for its job; a failover item finishes its current step). An operation no node has
    started is cancelled at once. 409 when it is over. Its creator, an operator of its team, or
    (for an operation of several teams, or a failover) a platform operator may cancel it."""
    principal, actor = caller.principal, caller.actor
    op = _get(caller.store, principal, operation_id)
    authorizer = _authorizer(request)
    if op.created_by != actor:
        allowed = (
            _may_write(authorizer, principal, op.team)
            if op.team is not None
            else authorizer.decide(principal, Action.FAILOVER_WRITE, resource="operations").allowed
        )
        if not allowed:
            raise Forbidden(f"{actor} may not cancel operation {operation_id}")
    with caller.store.transaction() as session:
        after = ops_store.request_cancel(session, operation_id, by=actor)
        caller.audit(
            session,
            f"{op.kind}.cancel" if op.kind == OperationKind.FAILOVER else "operation.cancel",
            str(operation_id),
            {"kind": op.kind.value, "state": op.state.value},
            target_kind="operation",
            team=op.team or "",
            before={"state": op.state.value},
            after={"state": after.state.value, "cancel_requested": True},
        )
    return OperationPublic.of(after)
