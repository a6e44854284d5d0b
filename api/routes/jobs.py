"""``/v1/jobs``: create, list, read, change, delete jobs; start, stop, restart; runs and events.

Every mutation is one transaction that also writes the audit log, and then nudges the reconciler
of the job's group so the change is acted on at once, not at the next tick.

Versions: the job's ``ETag`` is its ``spec_version``, which only spec changes (``PATCH`` of spec
fields) move. ``If-Match`` on ``PATCH``, ``DELETE`` and the commands (start, stop, restart) is
checked against it: "act on the spec I read". The scheduler's state changes and ownership claims
never move it, so an ETag stays good while the job starts; the commands themselves are not spec
changes and do not move it either (they move the row's ``version``, the reconciler's concurrency
counter).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Response, status

from api.deps import (
    ActorDep,
    ContextDep,
    ExpectedVersionDep,
    LimitQuery,
    NamePath,
    NodeContext,
    OffsetQuery,
    PrincipalDep,
    StoreDep,
)
from api.problems import problem_responses
from api.schemas import (
    EventPublic,
    JobCreate,
    JobPublic,
    JobUpdate,
    Label,
    Name,
    Page,
    RunPublic,
)
from scheduler import submission
from scheduler.config import Settings
from scheduler.errors import InvalidInput, NotFound, RefusedSubmission
from scheduler.identity import Principal, Role
from scheduler.names import validate_name
from scheduler.records import JobRecord, JobSpec
from scheduler.states import Command, DesiredState, JobState, command_effect
from scheduler.store import catalog as catalog_store
from scheduler.store import jobs as jobs_store
from scheduler.store import journal
from scheduler.store.db import Store

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


def _etag(response: Response, job: JobRecord) -> None:
    response.headers["ETag"] = f'"{job.spec_version}"'


def _name(name: str) -> str:
    return validate_name(name, "job name")


def _doc(job: JobRecord) -> dict[str, Any]:
    """A job as the audit log keeps it: its spec and desired state (JSON)."""
    return JobPublic.of(job).model_dump(
        mode="json",
        include={
            "name",
            "group",
            "team",
            "business",
            "priority",
            "entrypoint",
            "args",
            "conf",
            "checkpoint_location",
            "desired_state",
            "spec_version",
            "version",
        },
    )


def check_submission(
    session: Any,
    settings: Settings,
    principal: Principal,
    *,
    group: str,
    team: str,
    entrypoint: str | None,
    conf: dict[str, str] | None,
) -> None:
    """The submission policy (``scheduler.submission``): the entrypoint lies under the artifact
    roots of every cluster the job may run on; non-admins set only allowed Spark properties."""
    if entrypoint is not None:
        try:
            clusters = catalog_store.artifact_roots_of_group(session, group)
        except NotFound:
            clusters = {}  # the job's creation refuses the unknown group itself
        for cluster, roots in clusters.items():
            allowed = roots or tuple(settings.resolved_artifact_roots)
            if not submission.artifact_allowed(entrypoint, allowed):
                raise RefusedSubmission(
                    f"entrypoint {entrypoint!r} is outside the artifact roots of cluster "
                    f"{cluster!r} ({', '.join(allowed)})",
                    field="entrypoint",
                )
    if conf:
        admin = principal.role_on(team) == Role.ADMIN
        refused = submission.refused_properties(conf, settings.spark_conf_allow_list, admin=admin)
        if refused:
            raise RefusedSubmission(
                f"these Spark properties may not be set by {principal.subject}: "
                f"{', '.join(refused)} (only admins set properties outside the allow-list)",
                field="conf",
                properties=refused,
            )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=JobPublic,
    responses=problem_responses(409, 415),
)
def create_job(
    body: JobCreate,
    ctx: ContextDep,
    store: StoreDep,
    actor: ActorDep,
    principal: PrincipalDep,
    response: Response,
) -> JobPublic:
    spec = JobSpec(
        name=body.name,
        entrypoint=body.entrypoint,
        group=body.group,
        team=body.team,
        business=body.business,
        priority=body.priority,
        args=tuple(body.args),
        conf=dict(body.conf),
        checkpoint_location=body.checkpoint_location,
        desired_state=body.desired_state,
    )
    node = ctx.settings.node_id
    with store.transaction() as session:
        check_submission(
            session,
            ctx.settings,
            principal,
            group=body.group,
            team=body.team,
            entrypoint=body.entrypoint,
            conf=body.conf,
        )
        job = jobs_store.create_job(session, spec, cause=f"api:create by {actor}", node_id=node)
        journal.add_audit(
            session,
            actor=actor,
            action="job.create",
            target_kind="job",
            target_name=job.name,
            detail=body.model_dump(mode="json"),
            node_id=node,
            team=job.team,
            after=_doc(job),
        )
    ctx.nudge(job.group, job.name)
    response.headers["Location"] = f"/v1/jobs/{quote(job.name, safe='')}"
    _etag(response, job)
    return JobPublic.of(job)


@router.get("", response_model=Page[JobPublic])
def list_jobs(
    store: StoreDep,
    principal: PrincipalDep,
    state: JobState | None = None,
    desired_state: DesiredState | None = None,
    team: Label | None = None,
    group: Name | None = None,
    cluster: Name | None = None,
    limit: LimitQuery = 100,
    offset: OffsetQuery = 0,
) -> Page[JobPublic]:
    with store.session() as session:
        jobs, count = jobs_store.list_jobs(
            session,
            state=state,
            desired_state=desired_state,
            team=team,
            group=group,
            cluster=cluster,
            limit=limit,
            offset=offset,
            teams=principal.teams(),  # only the teams the caller may see
        )
    return Page[JobPublic](
        data=[JobPublic.of(j) for j in jobs], count=count, limit=limit, offset=offset
    )


@router.get("/{name}", response_model=JobPublic, responses=problem_responses(404))
def get_job(name: NamePath, store: StoreDep, response: Response) -> JobPublic:
    with store.session() as session:
        job = jobs_store.get_job(session, _name(name))
    _etag(response, job)
    return JobPublic.of(job)


@router.patch("/{name}", response_model=JobPublic, responses=problem_responses(404, 409, 412, 415))
def update_job(
    name: NamePath,
    body: JobUpdate,
    ctx: ContextDep,
    store: StoreDep,
    actor: ActorDep,
    principal: PrincipalDep,
    expected_version: ExpectedVersionDep,
    response: Response,
) -> JobPublic:
    changes: dict[str, Any] = body.model_dump(exclude_unset=True)
    if not changes:
        raise InvalidInput("nothing to change: send at least one field")
    if any(value is None for value in changes.values()):
        nulls = sorted(k for k, v in changes.items() if v is None)
        raise InvalidInput(f"fields cannot be null: {', '.join(nulls)}")
    desired = changes.pop("desired_state", None)
    node = ctx.settings.node_id
    with store.transaction() as session:
        job = jobs_store.get_job(session, _name(name))
        before = _doc(job)
        check_submission(
            session,
            ctx.settings,
            principal,
            group=job.group,
            team=changes.get("team", job.team),
            entrypoint=changes.get("entrypoint"),
            conf=changes.get("conf"),
        )
        if changes:
            job = jobs_store.update_job_spec(
                session,
                job.name,
                changes,
                expected_version=expected_version,
                cause=f"api:update by {actor}",
                node_id=node,
            )
            # the spec version was checked; the command below is part of the same request
            expected_version = None
        if desired is not None and desired != job.desired_state:
            command = Command.START if desired == DesiredState.RUNNING else Command.STOP
            job = _apply(session, job, command, expected_version, actor, node)
        journal.add_audit(
            session,
            actor=actor,
            action="job.update",
            target_kind="job",
            target_name=job.name,
            detail=body.model_dump(mode="json", exclude_unset=True),
            node_id=node,
            team=job.team,
            before=before,
            after=_doc(job),
        )
    ctx.nudge(job.group, job.name)
    _etag(response, job)
    return JobPublic.of(job)


@router.delete(
    "/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problem_responses(404, 409, 412),
)
def delete_job(
    name: NamePath,
    ctx: ContextDep,
    store: StoreDep,
    actor: ActorDep,
    expected_version: ExpectedVersionDep,
) -> Response:
    node = ctx.settings.node_id
    with store.transaction() as session:
        job = jobs_store.delete_job(session, _name(name), expected_version=expected_version)
        journal.add_audit(
            session,
            actor=actor,
            action="job.delete",
            target_kind="job",
            target_name=job.name,
            node_id=node,
            team=job.team,
            before=_doc(job),
        )
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _apply(
    session: Any,
    job: JobRecord,
    command: Command,
    expected_version: int | None,
    actor: str,
    node: str,
) -> JobRecord:
    effect = command_effect(command, job.desired_state, job.state)
    return jobs_store.apply_command(
        session,
        job.name,
        desired=effect.desired,
        state=effect.state,
        bump_generation=effect.bump_generation,
        reset_attempts=effect.reset_attempts,
        expected_version=expected_version,
        cause=f"api:{command} by {actor}",
        node_id=node,
        message=f"{command} requested by {actor}",
    )


def _command(
    command: Command,
    name: str,
    ctx: NodeContext,
    store: Store,
    actor: str,
    expected_version: int | None,
    response: Response,
) -> JobPublic:
    node = ctx.settings.node_id
    with store.transaction() as session:
        before = jobs_store.get_job(session, _name(name))
        job = _apply(session, before, command, expected_version, actor, node)
        journal.add_audit(
            session,
            actor=actor,
            action=f"job.{command}",
            target_kind="job",
            target_name=job.name,
            node_id=node,
            team=job.team,
            before={"desired_state": before.desired_state.value, "state": before.state.value},
            after={"desired_state": job.desired_state.value, "state": job.state.value},
        )
    ctx.nudge(job.group, job.name)
    _etag(response, job)
    return JobPublic.of(job)


def _command_route(command: Command) -> None:
    def handler(
        name: NamePath,
        ctx: ContextDep,
        store: StoreDep,
        actor: ActorDep,
        expected_version: ExpectedVersionDep,
        response: Response,
    ) -> JobPublic:
        return _command(command, name, ctx, store, actor, expected_version, response)

    handler.__name__ = f"{command}_job"
    handler.__doc__ = f"Ask for the job to {command}; the job's owner acts on it at once."
    router.add_api_route(
        f"/{{name}}/{command}",
        handler,
        methods=["POST"],
        response_model=JobPublic,
        status_code=status.HTTP_202_ACCEPTED,
        name=f"{command}_job",
        responses=problem_responses(404, 409, 412),
    )


for _command_name in Command:  # POST /v1/jobs/{name}/start | stop | restart
    _command_route(_command_name)


@router.get("/{name}/runs", response_model=Page[RunPublic], responses=problem_responses(404))
def list_runs(
    name: NamePath, store: StoreDep, limit: LimitQuery = 100, offset: OffsetQuery = 0
) -> Page[RunPublic]:
    with store.session() as session:
        runs, count = jobs_store.list_runs(session, _name(name), limit=limit, offset=offset)
    return Page[RunPublic](
        data=[RunPublic.of(r) for r in runs], count=count, limit=limit, offset=offset
    )


@router.get("/{name}/events", response_model=Page[EventPublic], responses=problem_responses(404))
def list_events(
    name: NamePath, store: StoreDep, limit: LimitQuery = 100, offset: OffsetQuery = 0
) -> Page[EventPublic]:
    with store.session() as session:
        events, count = journal.list_events(session, _name(name), limit=limit, offset=offset)
    return Page[EventPublic](
        data=[EventPublic.of(e) for e in events], count=count, limit=limit, offset=offset
    )
