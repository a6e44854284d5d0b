"""``/v1/jobs``: create, list, read, change, delete jobs; start, stop, restart; runs and events.

Every mutation is one transaction that also writes the audit log, and then nudges the reconciler
of the job's group so the change is acted on at once, not at the next tick. A job created
stopped is the exception (``nudges.creation_wakes_owner``): there is nothing to act on, and the
owner's next tick claims it.

Versions: the job's ``ETag`` is its ``spec_version``, which only spec changes (``PATCH`` of spec
fields) move. ``If-Match`` on ``PATCH``, ``DELETE`` and the commands (start, stop, restart) is
checked against it: "act on the spec I read". The scheduler's state changes and ownership claims
never move it, so an ETag stays good while the job starts; the commands themselves are not spec
changes and do not move it either (they move the row's ``version``, the reconciler's concurrency
counter).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Query, Request, Response, status
from starlette.datastructures import State

from api import deferred, paging
from api.answers import bytes_answer, json_answer
from api.creations import Creation, Creations, policy_check
from api.deps import (
    Caller,
    CallerDep,
    ExpectedVersionDep,
    NamePath,
    NodeContext,
    SearchQuery,
    StoreDep,
    context_of,
)
from api.documents import JobDocuments, job_document
from api.idempotency import Idempotent
from api.paging import CountQuery, CursorQuery, PageDep, PageLimitQuery
from api.problems import problem_responses
from api.routes.common import Listing, changes_of, etag
from api.routes.replication import replication_of
from api.schemas.resources import (
    EventPage,
    EventPublic,
    JobCreate,
    JobPage,
    JobPublic,
    JobUpdate,
    Label,
    Name,
    RunPage,
    RunPublic,
    audit_doc,
)
from api.security.rules import principal_of
from api.threads import in_thread
from scheduler.config import Settings
from scheduler.core.names import MAX_NAME_LENGTH, validate_name
from scheduler.core.nudges import creation_wakes_owner
from scheduler.core.paging import Sort, Window
from scheduler.core.records import ClusterRecord, JobRecord
from scheduler.core.states import Command, DesiredState, JobState, Priority, command_effect
from scheduler.decisions import labels as label_rules
from scheduler.decisions.identity import Principal
from scheduler.store import catalog as catalog_store
from scheduler.store import jobs as jobs_store
from scheduler.store import journal, reads
from scheduler.store.db import Store

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

#: spec fields a PATCH may set to null (back to their default)
NULLABLE = frozenset({"replicate", "stall_after"})

#: the longest grace period a stop may ask for, and the longest upgrade deadline (a day)
MAX_GRACE_S = 86400
GraceQuery = Annotated[
    float | None,
    Query(
        ge=0,
        le=MAX_GRACE_S,
        description="seconds a graceful stop of the live run waits for its pipeline to finish "
        "its micro-batch and exit before it is killed (a self-fencing pipeline only; a plain "
        "one is killed at once). Absent: the node's `DROVER_STOP_GRACE_SECONDS` for a stop or "
        "restart (0 by default: kill), `DROVER_UPGRADE_GRACE_SECONDS` for an upgrade (30 by "
        "default); 0: kill now",
        examples=[30],
    ),
]
RollbackAfterQuery = Annotated[
    float | None,
    Query(
        gt=0,
        le=MAX_GRACE_S,
        description="an upgrade (a change of entrypoint, args, conf or checkpoint location of a "
        "running job) that is not RUNNING within this many seconds rolls back by itself to the "
        "revision before it (an event says so). Absent: no automatic rollback",
        examples=[300],
    ),
]


def _name(name: str) -> str:
    return validate_name(name, "job name")


def check_submission(
    session: Any,
    settings: Settings,
    principal: Principal,
    *,
    group: str,
    team: str,
    entrypoint: str | None,
    conf: dict[str, str] | None,
    previous_conf: dict[str, str] | None = None,
) -> None:
    """The submission policy (``scheduler.decisions.submission``) for a job of ``group``, on its
    clusters' artifact roots as read (only when there is an entrypoint to check)."""
    clusters = (
        catalog_store.artifact_roots_of_groups(session, [group]).get(group, {})
        if entrypoint is not None
        else {}
    )
    policy_check(
        clusters,
        settings,
        principal,
        team=team,
        entrypoint=entrypoint,
        conf=conf,
        previous_conf=previous_conf,
    )


def change_spec(
    session: Any,
    ctx: NodeContext,
    principal: Principal,
    job: JobRecord,
    changes: dict[str, Any],
    *,
    expected_version: int | None,
    cause: str,
    grace_seconds: float | None,
    rollback_after: float | None = None,
    rollback_of: int | None = None,
) -> JobRecord:
    """``changes`` to ``job``'s spec as a new revision (an upgrade of a running job: graceful
    stop within ``grace_seconds``, default the node's upgrade grace), once the submission policy
    allows what they set. An edit and a rollback both come through here.

    What a change keeps of the job's conf is not judged again, unless the job moves to another
    team: then its whole conf, changed or not, is judged for the new team."""
    team = changes.get("team", job.team)
    moved = team != job.team
    check_submission(
        session,
        ctx.settings,
        principal,
        group=job.group,
        team=team,
        entrypoint=changes.get("entrypoint"),
        conf=changes.get("conf", job.conf if moved else None),
        previous_conf=None if moved else job.conf,
    )
    return jobs_store.update_job_spec(
        session,
        job.name,
        changes,
        expected_version=expected_version,
        cause=cause,
        node_id=ctx.settings.node_id,
        grace_seconds=ctx.settings.upgrade_grace_seconds
        if grace_seconds is None
        else grace_seconds,
        rollback_after=rollback_after,
        rollback_of=rollback_of,
        anywhere=principal.platform_admin,
    )


@router.post(
    "",
    operation_id="create_job",
    summary="Create a job",
    description=(
        "Create a job from its spec. With `desired_state: RUNNING` the job's owner starts it at "
        "once. The answer's `Location` names the new job and its `ETag` is the job's "
        "`spec_version`. A job name is unique: creating an existing one is a 409. Honours "
        "`Idempotency-Key` (a retry returns the first answer and creates nothing)."
    ),
    status_code=status.HTTP_201_CREATED,
    response_model=JobPublic,
    responses=problem_responses(409, 415),
    dependencies=[Idempotent],
)
async def create_job(body: JobCreate, request: Request, response: Response) -> Response:
    # the caller from the request, not from dependencies (``deps.context_of``: a hot route);
    # the store's work in the API's threads (``api/threads.py``: a hot route)
    principal = principal_of(request)
    spec = body.spec()
    creation = Creation.of_request(spec, principal, principal.subject, body.model_dump(mode="json"))
    public = await in_thread(request, _create, request.app.state, creation)
    response.headers["Location"] = f"/v1/jobs/{quote(public.name, safe='')}"
    etag(response, public.spec_version)
    return json_answer(public, response, status.HTTP_201_CREATED)


def _create(state: State, creation: Creation) -> JobPublic:
    """The job ``creation`` made (batched: ``api/creations.py``), its owner woken if it should
    start."""
    creations: Creations = state.creations
    public = creations.create(creation)
    if creation_wakes_owner(creation.spec.desired_state):
        state.context.nudge(public.group, public.name)
    return public


#: the sorts of ``GET /v1/jobs`` (``-`` first: descending)
JOB_SORTS = tuple(jobs_store.JOB_SORTS)
SortQuery = Annotated[
    str,
    Query(
        pattern=r"^-?(" + "|".join(JOB_SORTS) + ")$",
        description="order of the list: `name` (the default; never changes, so a job appears "
        "exactly once across the pages), `state` or `updated_at` (a job whose state changes "
        "while you page moves in the list); `-` first for descending, e.g. `-updated_at`",
        examples=["-updated_at"],
    ),
]
LabelQuery = Annotated[
    list[str] | None,
    Query(
        max_length=label_rules.MAX_REQUIREMENTS,
        description="label requirements, all of which a job meets (repeat the parameter): "
        "`key=value`, `key!=value`, `key` (has the key), `!key` (lacks it)",
        examples=[["env=prod", "!canary"]],
        json_schema_extra={"items": {"type": "string", "pattern": label_rules.REQUIREMENT_PATTERN}},
    ),
]
PrefixQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        description="only jobs whose name begins with this text",
        examples=["orders-"],
    ),
]


@router.get(
    "",
    operation_id="list_jobs",
    summary="List jobs (filtered, one page at a time)",
    response_model=JobPage,
)
async def list_jobs(
    request: Request,
    response: Response,
    state: JobState | None = None,
    desired_state: DesiredState | None = None,
    team: Label | None = None,
    business: Label | None = None,
    group: Name | None = None,
    cluster: Name | None = None,
    priority: Priority | None = None,
    name_prefix: PrefixQuery = None,
    label: LabelQuery = None,
    q: SearchQuery = None,
    sort: SortQuery = "name",
    limit: PageLimitQuery = paging.DEFAULT_LIMIT,
    cursor: CursorQuery = None,
    count: CountQuery = False,
) -> Response:
    """The jobs the caller may see that match every filter given, one page at a time; ``q``
    keeps those whose name contains it, ignoring case (the console's search box)."""
    # the store and the caller from the request, not from dependencies (``deps.context_of``),
    # the reads in the API's threads (``api/threads.py``): a hot route
    store, principal = context_of(request).store, principal_of(request)
    order = Sort.parse(sort, JOB_SORTS)
    filters = {
        "state": state,
        "desired_state": desired_state,
        "team": team,
        "business": business,
        "group": group,
        "cluster": cluster,
        "priority": priority,
        "name_prefix": name_prefix,
        "label": label,
        "q": q,
    }
    selector = jobs_store.JobFilter(
        state=state,
        desired_state=desired_state,
        team=team,
        business=business,
        group=group,
        cluster=cluster,
        priority=priority,
        name_prefix=name_prefix,
        labels=label_rules.parse_selector(label or ()),
        search=q,
        teams=principal.teams(),  # only the teams the caller may see
    )
    window = paging.window(order, cursor, limit, filters, jobs_store.JOB_SORT_KINDS[order.field])
    rows, total = await in_thread(request, _page_of_jobs, store, selector, window, count)
    documents: JobDocuments = request.app.state.job_documents
    next_cursor, next_url = paging.links(request, response, order, rows.next_key, filters)
    page = JobPage(data=[], limit=limit, next_cursor=next_cursor, next=next_url, count=total)
    return json_answer(page, response, data=documents.of_rows(rows.rows, rows.record))


def _page_of_jobs(
    store: Store, selector: jobs_store.JobFilter, window: Window, count: bool
) -> tuple[reads.JobRows, int | None]:
    """A page of the jobs ``selector`` keeps, and how many it keeps in all when ``count``."""
    with store.connection() as session:
        rows = reads.page_job_rows(session, selector, window)
        total = jobs_store.count_jobs(session, selector) if count else None
    return rows, total


@router.get(
    "/{name}",
    operation_id="get_job",
    summary="Read a job",
    description=(
        "The job's spec, observed state, owner, current run, streaming progress and checkpoint "
        "replication. The `ETag` header is its `spec_version`, the value `If-Match` checks on "
        "changes and commands."
    ),
    response_model=JobPublic,
    responses=problem_responses(404),
)
async def get_job(name: NamePath, request: Request, response: Response) -> Response:
    # the job's authorization check and the read in one thread (rules.DEFERRED): the check
    # reads the job, the route answers with it. The context from the request, not from
    # dependencies (``deps.context_of``: a hot route)
    ctx = context_of(request)
    documents: JobDocuments = request.app.state.job_documents
    return await deferred.run_in_route_thread(request, _read_job, ctx, documents, response)


def _read_job(
    found: reads.ViewRow,
    ctx: NodeContext,
    documents: JobDocuments,
    response: Response,
) -> Response:
    """The answer from the job row the check read (``reads.job_view_row``): memoized on the
    row when the row holds everything it shows (``ViewRow.self_contained``)."""
    etag(response, found.spec_version)

    def document(now: datetime) -> tuple[bytes, datetime | None]:
        view = found.view()

        def clusters() -> list[ClusterRecord]:
            with ctx.store.connection() as connection:
                return reads.clusters(connection)

        replication = replication_of(view, ctx.settings, clusters)
        return job_document(view.job, view.queue, now, replication)

    if found.self_contained:
        body = documents.document(("view", found.raw), document)
    else:
        body = document(datetime.now(UTC))[0]
    return bytes_answer(body, response)


@router.patch(
    "/{name}",
    operation_id="update_job",
    summary="Change a job's spec",
    description=(
        "Change the fields sent (fields left out keep their value; `replicate` and `stall_after` "
        "may be `null`: back to the default). Any spec change moves `spec_version`; with "
        "`If-Match` the change applies only to that spec version (412 otherwise). `desired_state`"
        " in the body starts or stops the job in the same request. Honours `Idempotency-Key` "
        "(a spec change to a running job restarts it: a retry must not do that twice)."
    ),
    response_model=JobPublic,
    responses=problem_responses(404, 409, 412, 415),
    dependencies=[Idempotent],
)
def update_job(
    name: NamePath,
    body: JobUpdate,
    caller: CallerDep,
    expected_version: ExpectedVersionDep,
    response: Response,
    grace_seconds: GraceQuery = None,
    rollback_after_seconds: RollbackAfterQuery = None,
) -> Response:
    """Change the job: spec fields (a new revision) and/or its desired state. A change of
    entrypoint, args, conf or checkpoint location of a running job is an **upgrade**: graceful
    stop of the live run (``grace_seconds``), then the new spec from the same checkpoint, one
    application at a time; with ``rollback_after_seconds`` it rolls back by itself unless it is
    RUNNING in time. Other spec changes apply without a restart."""
    changes = changes_of(body, NULLABLE)
    desired = changes.pop("desired_state", None)
    actor, node = caller.actor, caller.ctx.settings.node_id
    with caller.store.transaction() as session:
        job = jobs_store.get_job(session, _name(name))
        before = audit_doc(job)
        if changes:
            job = change_spec(
                session,
                caller.ctx,
                caller.principal,
                job,
                changes,
                expected_version=expected_version,
                cause=f"api:update by {actor}",
                grace_seconds=grace_seconds,
                rollback_after=rollback_after_seconds,
            )
            # the spec version was checked; the command below is part of the same request
            expected_version = None
        if desired is not None and desired != job.desired_state:
            command = Command.START if desired == DesiredState.RUNNING else Command.STOP
            job = _apply(session, job, command, expected_version, actor, node, grace_seconds)
        caller.audit(
            session,
            "job.update",
            job.name,
            body.model_dump(mode="json", exclude_unset=True),
            team=job.team,
            before=before,
            after=audit_doc(job),
        )
    caller.ctx.nudge(job.group, job.name)
    etag(response, job.spec_version)
    return json_answer(JobPublic.of(job), response)


@router.delete(
    "/{name}",
    operation_id="delete_job",
    summary="Delete a job",
    description=(
        "Delete the job with its runs and events. A job that should run or still has a live "
        "application is a 409: stop it first. With `If-Match` only that spec version is deleted "
        "(412 otherwise)."
    ),
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problem_responses(404, 409, 412),
)
def delete_job(name: NamePath, caller: CallerDep, expected_version: ExpectedVersionDep) -> Response:
    with caller.store.transaction() as session:
        job = jobs_store.delete_job(
            session,
            _name(name),
            expected_version=expected_version,
            lease_margin=caller.ctx.settings.fence_lease_margin,
        )
        caller.audit(session, "job.delete", job.name, team=job.team, before=audit_doc(job))
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _apply(
    session: Any,
    job: JobRecord,
    command: Command,
    expected_version: int | None,
    actor: str,
    node: str,
    grace_seconds: float | None = None,
) -> JobRecord:
    return jobs_store.apply_command(
        session,
        job.name,
        command_effect(command, job.desired_state, job.state),
        expected_version=expected_version,
        cause=f"api:{command} by {actor}",
        node_id=node,
        message=f"{command} requested by {actor}"
        + (f" (grace {grace_seconds:g} s)" if grace_seconds is not None else ""),
        grace_seconds=grace_seconds,
    )


def _command(
    command: Command,
    name: str,
    caller: Caller,
    expected_version: int | None,
    response: Response,
    grace_seconds: float | None = None,
) -> Response:
    actor, node = caller.actor, caller.ctx.settings.node_id
    with caller.store.transaction() as session:
        before = jobs_store.get_job(session, _name(name))
        job = _apply(session, before, command, expected_version, actor, node, grace_seconds)
        caller.audit(
            session,
            f"job.{command}",
            job.name,
            team=job.team,
            before={"desired_state": before.desired_state.value, "state": before.state.value},
            after={"desired_state": job.desired_state.value, "state": job.state.value},
        )
    caller.ctx.nudge(job.group, job.name)
    etag(response, job.spec_version)
    return json_answer(JobPublic.of(job), response, status.HTTP_202_ACCEPTED)


_COMMAND_SUMMARY = {
    Command.START: "Start a job",
    Command.STOP: "Stop a job",
    Command.RESTART: "Restart a job",
}
_COMMAND_DESCRIPTION = {
    Command.START: "Set the job's desired state to RUNNING; its owner submits it at once "
    "(re-attaching to a live application of the job rather than submitting a second one).",
    Command.STOP: "Set the job's desired state to STOPPED; its owner kills the application and "
    "the job leaves the cluster once the cluster confirms it is gone.",
    Command.RESTART: "Ask for a new run of the job: the current application is stopped and the "
    "job submitted again from its checkpoint (a stopped job is started).",
}


def _command_route(command: Command) -> None:
    def handler(
        name: NamePath, caller: CallerDep, expected_version: ExpectedVersionDep, response: Response
    ) -> Response:
        return _command(command, name, caller, expected_version, response)

    def stopping_handler(
        name: NamePath,
        caller: CallerDep,
        expected_version: ExpectedVersionDep,
        response: Response,
        grace_seconds: GraceQuery = None,
    ) -> Response:
        return _command(command, name, caller, expected_version, response, grace_seconds)

    if command != Command.START:  # stop and restart end the live run: gracefully if they can
        handler = stopping_handler
    handler.__name__ = f"{command}_job"
    handler.__doc__ = f"Ask for the job to {command}; the job's owner acts on it at once." + (
        " A self-fencing pipeline is asked to finish its micro-batch and exit first "
        "(`grace_seconds`), then killed if it has not."
        if command != Command.START
        else ""
    )
    router.add_api_route(
        f"/{{name}}/{command}",
        handler,
        methods=["POST"],
        response_model=JobPublic,
        status_code=status.HTTP_202_ACCEPTED,
        name=f"{command}_job",
        operation_id=f"{command}_job",
        summary=_COMMAND_SUMMARY[command],
        description=_COMMAND_DESCRIPTION[command]
        + " With `If-Match` only while the job is at that spec version (412 otherwise). "
        "Honours `Idempotency-Key`: a retry with the same key returns the first answer and does "
        "nothing again.",
        responses=problem_responses(404, 409, 412),
        dependencies=[Idempotent],
    )


for _command_name in Command:  # POST /v1/jobs/{name}/start | stop | restart
    _command_route(_command_name)


RunSortQuery = Annotated[
    str,
    Query(
        pattern=r"^-?attempt$",
        description="`-attempt` (newest first, the default) or `attempt` (oldest first)",
        examples=["attempt"],
    ),
]
_NEWEST_RUN = Sort.parse("-attempt", ("attempt",))
_RUNS = Listing(_NEWEST_RUN, (int,), jobs_store.page_runs, jobs_store.count_runs, RunPage)
_EVENTS = Listing(
    Sort.parse("-id", ("id",)), (int,), journal.page_events, journal.count_events, EventPage
)
EventSortQuery = Annotated[
    str,
    Query(
        pattern=r"^-?id$",
        description="`-id` (newest first, the default) or `id` (oldest first)",
        examples=["id"],
    ),
]


@router.get(
    "/{name}/runs",
    operation_id="list_job_runs",
    summary="List a job's runs",
    response_model=RunPage,
    responses=problem_responses(404),
)
def list_runs(
    name: NamePath,
    request: Request,
    response: Response,
    store: StoreDep,
    *,
    sort: RunSortQuery = "-attempt",
    asked: PageDep,
) -> RunPage:
    """The job's runs (its execution history), newest first."""
    job, order = _name(name), Sort.parse(sort, ("attempt",))
    return _RUNS.read(request, response, store, asked, RunPublic.of, (job,), order)


@router.get(
    "/{name}/events",
    operation_id="list_job_events",
    summary="List a job's events",
    response_model=EventPage,
    responses=problem_responses(404),
)
def list_events(
    name: NamePath,
    request: Request,
    response: Response,
    store: StoreDep,
    *,
    sort: EventSortQuery = "-id",
    asked: PageDep,
) -> EventPage:
    """Every state transition of the job with its cause, and its other events, newest first."""
    job, order = _name(name), Sort.parse(sort, ("id",))
    return _EVENTS.read(request, response, store, asked, EventPublic.of, (job,), order)
