"""The route table: every API route's authorization rule, and the one function that applies it.

:func:`authorize` is an application-wide dependency: every route runs it before its handler,
and a route missing from :data:`RULES` is refused (500 at runtime; the authorization matrix test
fails first). Routes never check permissions themselves; they read the decided principal from
:func:`principal_of`.

A rule names the :class:`Action` and where the resource's team comes from:

- ``NONE``: no team (catalog, platform actions);
- ``JOB``: the job named by the ``{name}`` path parameter (its team; 404 when there is none);
- ``JOB_BODY``: the ``team`` of the JSON body (job creation);
- ``TEAM``: the ``{team}`` path parameter;
- ``LISTING``: none; the route filters its rows to the principal's teams;
- ``OWN_IDENTITY``: the caller's own tokens need ``token.own`` (any stored identity, with a
  write scope); anybody else's need ``platform.admin``. Both are decided like any write (the
  permission center when one is configured); what a minted token may be is the route's
  ``may_mint``;
- ``PUBLIC``: no credential needed at all.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from api import deferred
from api.security.authz import Authorizer
from api.threads import in_thread
from scheduler.core.errors import Forbidden, InvalidInput, NotFound, Unauthenticated
from scheduler.core.names import name_problem
from scheduler.decisions.identity import ANONYMOUS, Action, Principal
from scheduler.store import reads


class Target(enum.Enum):
    PUBLIC = "public"
    NONE = "none"
    JOB = "job"
    JOB_BODY = "job-body"
    TEAM = "team"
    LISTING = "listing"
    OWN_IDENTITY = "own-identity"


@dataclass(frozen=True)
class Rule:
    action: Action | None
    target: Target


def _r(action: Action | None, target: Target) -> Rule:
    return Rule(action, target)


PUBLIC = _r(None, Target.PUBLIC)

#: (method, path template) -> rule: every route of the API, nothing else
RULES: dict[tuple[str, str], Rule] = {
    ("GET", "/healthz"): PUBLIC,
    ("GET", "/readyz"): PUBLIC,
    ("GET", "/metrics"): PUBLIC,
    # jobs
    ("POST", "/v1/jobs"): _r(Action.JOB_WRITE, Target.JOB_BODY),
    ("GET", "/v1/jobs"): _r(Action.JOB_READ, Target.LISTING),
    ("GET", "/v1/jobs/{name}"): _r(Action.JOB_READ, Target.JOB),
    ("PATCH", "/v1/jobs/{name}"): _r(Action.JOB_WRITE, Target.JOB),
    ("DELETE", "/v1/jobs/{name}"): _r(Action.JOB_WRITE, Target.JOB),
    ("POST", "/v1/jobs/{name}/start"): _r(Action.JOB_WRITE, Target.JOB),
    ("POST", "/v1/jobs/{name}/stop"): _r(Action.JOB_WRITE, Target.JOB),
    ("POST", "/v1/jobs/{name}/restart"): _r(Action.JOB_WRITE, Target.JOB),
    ("GET", "/v1/jobs/{name}/runs"): _r(Action.JOB_READ, Target.JOB),
    ("GET", "/v1/jobs/{name}/events"): _r(Action.JOB_READ, Target.JOB),
    ("GET", "/v1/jobs/{name}/revisions"): _r(Action.JOB_READ, Target.JOB),
    ("GET", "/v1/jobs/{name}/revisions/{revision}"): _r(Action.JOB_READ, Target.JOB),
    ("GET", "/v1/jobs/{name}/revisions/{revision}/diff"): _r(Action.JOB_READ, Target.JOB),
    ("POST", "/v1/jobs/{name}/rollback"): _r(Action.JOB_WRITE, Target.JOB),
    ("GET", "/v1/jobs/{name}/fence"): _r(Action.JOB_FENCE, Target.JOB),
    ("GET", "/v1/jobs/{name}/replication"): _r(Action.JOB_READ, Target.JOB),
    ("GET", "/v1/replication"): _r(Action.JOB_READ, Target.LISTING),
    ("GET", "/v1/jobs/{name}/progress"): _r(Action.JOB_READ, Target.JOB),
    # a run's driver log may hold the pipeline's data: the job team's viewers and up, like the
    # job; between nodes, the node that started a local run serves it to the others
    ("GET", "/v1/jobs/{name}/runs/{attempt}/log"): _r(Action.JOB_READ, Target.JOB),
    ("GET", "/v1/internal/jobs/{name}/runs/{attempt}/log"): _r(Action.INTERNAL, Target.NONE),
    # catalog
    ("POST", "/v1/clusters"): _r(Action.CATALOG_WRITE, Target.NONE),
    ("GET", "/v1/clusters"): _r(Action.CATALOG_READ, Target.NONE),
    ("GET", "/v1/clusters/{name}"): _r(Action.CATALOG_READ, Target.NONE),
    ("PATCH", "/v1/clusters/{name}"): _r(Action.CATALOG_WRITE, Target.NONE),
    ("GET", "/v1/clusters/{name}/health"): _r(Action.CATALOG_READ, Target.NONE),
    ("POST", "/v1/clusters/{name}/mark-abnormal"): _r(Action.CLUSTER_MARK, Target.NONE),
    ("POST", "/v1/clusters/{name}/clear"): _r(Action.CLUSTER_MARK, Target.NONE),
    ("POST", "/v1/groups"): _r(Action.CATALOG_WRITE, Target.NONE),
    ("GET", "/v1/groups"): _r(Action.CATALOG_READ, Target.NONE),
    ("GET", "/v1/groups/{name}"): _r(Action.CATALOG_READ, Target.NONE),
    ("PATCH", "/v1/groups/{name}"): _r(Action.CATALOG_WRITE, Target.NONE),
    ("DELETE", "/v1/groups/{name}"): _r(Action.CATALOG_WRITE, Target.NONE),
    ("GET", "/v1/nodes"): _r(Action.CATALOG_READ, Target.NONE),
    ("POST", "/v1/internal/nudge"): _r(Action.INTERNAL, Target.NONE),
    ("GET", "/v1/nodes/{node_id}"): _r(Action.CATALOG_READ, Target.NONE),
    ("POST", "/v1/nodes/{node_id}/drain"): _r(Action.PLATFORM_ADMIN, Target.NONE),
    ("POST", "/v1/nodes/{node_id}/undrain"): _r(Action.PLATFORM_ADMIN, Target.NONE),
    ("POST", "/v1/internal/drain"): _r(Action.INTERNAL, Target.NONE),
    # identities
    ("GET", "/v1/whoami"): _r(None, Target.NONE),
    ("POST", "/v1/teams"): _r(Action.PLATFORM_ADMIN, Target.NONE),
    ("GET", "/v1/teams"): _r(Action.TEAM_READ, Target.LISTING),
    ("GET", "/v1/teams/{team}"): _r(Action.TEAM_READ, Target.TEAM),
    ("PUT", "/v1/teams/{team}/members/{identity}"): _r(Action.TEAM_ADMIN, Target.TEAM),
    ("DELETE", "/v1/teams/{team}/members/{identity}"): _r(Action.TEAM_ADMIN, Target.TEAM),
    ("POST", "/v1/tokens"): _r(Action.PLATFORM_ADMIN, Target.OWN_IDENTITY),
    ("GET", "/v1/tokens"): _r(None, Target.LISTING),
    ("DELETE", "/v1/tokens/{token_id}"): _r(Action.PLATFORM_ADMIN, Target.OWN_IDENTITY),
    ("GET", "/v1/audit"): _r(Action.AUDIT_READ, Target.LISTING),
    # failovers: they move every team's jobs on a cluster (platform roles)
    ("POST", "/v1/failovers"): _r(Action.FAILOVER_WRITE, Target.NONE),
    ("GET", "/v1/failovers"): _r(Action.FAILOVER_READ, Target.NONE),
    ("GET", "/v1/failovers/{operation_id}"): _r(Action.FAILOVER_READ, Target.NONE),
    ("POST", "/v1/failovers/{operation_id}/cancel"): _r(Action.FAILOVER_WRITE, Target.NONE),
    # bulk operations (and every operation as one list): the routes limit what they act on
    # and show to the caller's teams (a team's operator acts on that team's jobs only)
    ("POST", "/v1/operations"): _r(Action.JOB_WRITE, Target.LISTING),
    ("GET", "/v1/operations"): _r(Action.JOB_READ, Target.LISTING),
    ("GET", "/v1/operations/{operation_id}"): _r(Action.JOB_READ, Target.LISTING),
    ("POST", "/v1/operations/{operation_id}/cancel"): _r(Action.JOB_WRITE, Target.LISTING),
    ("GET", "/v1/groups/{name}/auto-failover"): _r(Action.CATALOG_READ, Target.NONE),
    ("PUT", "/v1/groups/{name}/auto-failover"): _r(Action.CATALOG_WRITE, Target.NONE),
    # automatic failover platform-wide: a platform operator pauses, resumes, clears cool-downs
    ("GET", "/v1/auto-failover"): _r(Action.FAILOVER_READ, Target.NONE),
    ("POST", "/v1/auto-failover/pause"): _r(Action.FAILOVER_WRITE, Target.NONE),
    ("POST", "/v1/auto-failover/resume"): _r(Action.FAILOVER_WRITE, Target.NONE),
    ("POST", "/v1/auto-failover/clusters/{name}/clear"): _r(Action.FAILOVER_WRITE, Target.NONE),
    # alerts: the platform's channels, a team's channels, the alerts (a caller's teams')
    ("POST", "/v1/alert-channels"): _r(Action.PLATFORM_ADMIN, Target.NONE),
    ("GET", "/v1/alert-channels"): _r(Action.PLATFORM_ADMIN, Target.NONE),
    ("GET", "/v1/alert-channels/{name}"): _r(Action.PLATFORM_ADMIN, Target.NONE),
    ("DELETE", "/v1/alert-channels/{name}"): _r(Action.PLATFORM_ADMIN, Target.NONE),
    ("POST", "/v1/alert-channels/{name}/test"): _r(Action.PLATFORM_ADMIN, Target.NONE),
    ("POST", "/v1/teams/{team}/alert-channels"): _r(Action.TEAM_ADMIN, Target.TEAM),
    ("GET", "/v1/teams/{team}/alert-channels"): _r(Action.TEAM_READ, Target.TEAM),
    ("DELETE", "/v1/teams/{team}/alert-channels/{name}"): _r(Action.TEAM_ADMIN, Target.TEAM),
    ("POST", "/v1/teams/{team}/alert-channels/{name}/test"): _r(Action.TEAM_ADMIN, Target.TEAM),
    ("GET", "/v1/alerts"): _r(Action.JOB_READ, Target.LISTING),
    # submission quotas: read by any team's member, changed by platform admins (catalog)
    ("GET", "/v1/quotas"): _r(Action.CATALOG_READ, Target.NONE),
    ("GET", "/v1/quotas/{business}"): _r(Action.CATALOG_READ, Target.NONE),
    ("PUT", "/v1/quotas/{business}"): _r(Action.CATALOG_WRITE, Target.NONE),
    ("DELETE", "/v1/quotas/{business}"): _r(Action.CATALOG_WRITE, Target.NONE),
    # the fleet at a glance (counts over the caller's visible jobs)
    ("GET", "/v1/overview"): _r(Action.JOB_READ, Target.LISTING),
    ("GET", "/v1/overview/history"): _r(Action.JOB_READ, Target.LISTING),
}


#: routes whose job check ``authorize`` leaves to the route's own thread (``api/deferred.py``):
#: each runs its work through ``deferred.run_in_route_thread``, which hands it the job the check
#: read (``reads.JobView``; the security edge refuses a success answer from one that does not)
DEFERRED: frozenset[tuple[str, str]] = frozenset({("GET", "/v1/jobs/{name}")})


def api_routes(routes: Iterable[BaseRoute]) -> Iterator[tuple[str, str]]:
    """``(method, path)`` of every API route, through included routers (any FastAPI version)."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from api_routes(included.routes)
        elif isinstance(route, APIRoute):
            for method in sorted(route.methods or ()):
                if method != "HEAD":
                    yield method, route.path


def unruled_routes(routes: Iterable[BaseRoute]) -> list[tuple[str, str]]:
    """Routes :data:`RULES` has no rule for (create_app refuses to build such an app)."""
    return sorted(set(api_routes(routes)) - set(RULES))


def rule_for(route: BaseRoute | None, method: str) -> Rule | None:
    path = getattr(route, "path", None)
    if path is None:
        return None
    return RULES.get((method, path))


def principal_of(request: Request) -> Principal:
    # the scope's state as the security edge left it (``request.state`` would wrap it anew in
    # each Request object: a hot path)
    state = request.scope.get("state")
    principal: Principal = state.get("principal", ANONYMOUS) if state is not None else ANONYMOUS
    return principal


async def authorize(request: Request) -> None:
    """The one authorization function every route goes through (first in
    ``api.deps.every_route``, the app-wide dependency)."""
    method = "GET" if request.method == "HEAD" else request.method
    route = request.scope.get("route")
    rule = rule_for(route, method)
    if rule is None:
        raise Forbidden(f"no authorization rule for {method} {request.url.path}")
    if rule.target is Target.PUBLIC:
        return
    principal = principal_of(request)
    if principal is ANONYMOUS or principal.subject == ANONYMOUS.subject:
        raise Unauthenticated("credentials required")
    if rule.action is None:
        if principal.node:  # the deployment secret opens /v1/internal, nothing else
            raise Forbidden("the deployment secret only opens /v1/internal")
        return  # any authenticated caller (whoami, own token listing)
    context = request.app.state.context
    authorizer: Authorizer = request.app.state.authorizer
    params = request.path_params
    action: Action = rule.action
    checks: list[tuple[str | None, str, str | None]] = []  # (team, resource, job)
    if rule.target is Target.JOB and (method, getattr(route, "path", None)) in DEFERRED:
        # the route runs this first in its own thread (api/deferred.py): one hand-over, not two;
        # the job read for its team is the one the route answers with
        name = str(params.get("name", ""))

        def check() -> reads.ViewRow:
            found = _job_view(context.store, name)
            _decide(authorizer, principal, rule, found.team, f"job/{name}", name)
            return found

        deferred.defer(request, check)
        return
    if rule.target is Target.JOB:
        name = str(params.get("name", ""))
        team = await in_thread(request, _team_of_job, context.store, name)
        checks.append((team, f"job/{name}", name))
        if method == "PATCH":
            body = await _json_body(request)
            new_team = body.get("team")
            if isinstance(new_team, str) and new_team != team:
                checks.append((new_team, f"job/{name}", name))
    elif rule.target is Target.JOB_BODY:
        body = await _json_body(request)
        team = body.get("team", "")
        checks.append((team if isinstance(team, str) else "", f"job/{body.get('name', '')}", None))
    elif rule.target is Target.TEAM:
        team = str(params.get("team", ""))
        checks.append((team, f"team/{team}", None))
    elif rule.target is Target.OWN_IDENTITY:
        if method == "POST":
            body = await _json_body(request)
            wanted = body.get("identity") or principal.identity
            mine = principal.identity is not None and wanted == principal.identity
        else:
            mine = await in_thread(request, _owns_token, request, principal)
        if mine:
            action = Action.TOKEN_OWN
            checks.append((None, f"tokens/{principal.identity}", None))
        else:
            checks.append((None, "tokens", None))
    else:  # NONE, LISTING
        checks.append((None, request.url.path, None))
    for on_team, resource, on_job in checks:
        if authorizer.may_block(principal):
            decide = partial(authorizer.decide, resource=resource, team=on_team, job=on_job)
            decision = await in_thread(request, decide, principal, action)
        else:  # the built-in bindings: a pure function, no hand-over to a thread
            decision = authorizer.decide(
                principal, action, resource=resource, team=on_team, job=on_job
            )
        if not decision.allowed:
            raise Forbidden(f"{principal.subject} may not {action}: {decision.reason}")


def _decide(
    authorizer: Authorizer,
    principal: Principal,
    rule: Rule,
    team: str | None,
    resource: str,
    job: str | None,
) -> None:
    """One decision, in a thread already (a deferred check: the permission center may block)."""
    assert rule.action is not None
    decision = authorizer.decide(principal, rule.action, resource=resource, team=team, job=job)
    if not decision.allowed:
        raise Forbidden(f"{principal.subject} may not {rule.action}: {decision.reason}")


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _valid_job_name(name: str) -> None:
    problem = name_problem(name)
    if problem is not None:
        raise InvalidInput(f"job name {problem}")


def _team_of_job(store: Any, name: str) -> str:
    _valid_job_name(name)
    with store.connection() as connection:
        team = reads.team_of_job(connection, name)
    if team is None:
        raise NotFound(f"no job named {name!r}", job=name)
    return str(team)


def _job_view(store: Any, name: str) -> reads.ViewRow:
    """The job of a deferred check, as ``GET /v1/jobs/{name}`` shows it (one statement: its
    team decides, and the route answers with the rest)."""
    _valid_job_name(name)
    with store.connection() as connection:
        found = reads.job_view_row(connection, name)
    if found is None:
        raise NotFound(f"no job named {name!r}", job=name)
    return found


def _owns_token(request: Request, principal: Principal) -> bool:
    """Is the token of the ``{token_id}`` path parameter one of the caller's own?"""
    if principal.identity is None:
        return False
    token_id = request.path_params.get("token_id")
    if token_id is not None:
        from scheduler.store import identities

        try:
            number = int(token_id)
        except ValueError:
            return False
        if not 1 <= number <= 2**31 - 1:  # no such token (and no query past an INTEGER)
            return False
        context = request.app.state.context
        with context.store.session() as session:
            try:
                return identities.get_token(session, number).identity == principal.identity
            except NotFound:
                return False
    return False
