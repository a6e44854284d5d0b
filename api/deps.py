"""What route handlers depend on: the node context, the store, the caller, versions, paging, and
the request checks every route gets (``check_request``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Header, Path, Query, Request
from fastapi.routing import APIRoute
from sqlalchemy.orm import Session

from api.media import is_json
from api.paging import PageLimitQuery
from api.security.rules import authorize, principal_of
from scheduler.backends.registry import ClusterProbe
from scheduler.config import Settings
from scheduler.core.errors import InvalidInput, MalformedRequest, UnsupportedMediaType
from scheduler.core.ledger import Backends
from scheduler.core.metrics import ActorMetrics
from scheduler.core.names import MAX_NAME_LENGTH, NAME_PATTERN
from scheduler.core.records import ClusterRecord
from scheduler.decisions.identity import Principal
from scheduler.decisions.membership import MembershipSnapshot, Mode, NodeCard, unavailable
from scheduler.store import journal
from scheduler.store.db import Store


def _no_nudge(group: str, job: str | None = None) -> None:
    return None


def _no_views() -> MembershipSnapshot:
    """An API without a node's actors (tests, tools) knows no membership."""
    return unavailable(Mode.STARTING, NodeCard("", "", "", ""))


def _always_ready() -> tuple[bool, str]:
    return True, "no actors to wait for"


def _no_actor_metrics() -> ActorMetrics | None:
    return None


def _no_draining(draining: bool) -> dict[str, Any]:
    from scheduler.core.errors import Conflict

    raise Conflict("this node runs no actors (no membership): nothing to drain")


@dataclass
class NodeContext:
    """What the API of one node needs from the rest of the node."""

    settings: Settings
    store: Store
    #: wake the owner of a job at once (instead of at its next tick): this node's reconciler of
    #: the group, or the owning node's over HTTP
    nudge: Callable[[str, str | None], None] = field(default=_no_nudge)
    #: wake this node's reconciler of a group (what a forwarded nudge does)
    nudge_local: Callable[[str], None] = field(default=_no_nudge)
    #: membership as this node sees it (see ``NodeRuntime.views``)
    views: Callable[[], MembershipSnapshot] = field(default=_no_views)
    #: this node's actors (see ``NodeRuntime.status``)
    status: Callable[[], dict[str, Any]] = field(default=dict)
    #: whether the node's actors are up, and why not
    readiness: Callable[[], tuple[bool, str]] = field(default=_always_ready)
    #: the actors' figures as last collected (``NodeRuntime.actor_metrics``; None: no actors)
    actor_metrics: Callable[[], ActorMetrics | None] = field(default=_no_actor_metrics)
    #: drain (True) or undrain this node's membership (``NodeRuntime.set_draining``)
    set_draining: Callable[[bool], dict[str, Any]] = field(default=_no_draining)
    #: whether a cluster answers a probe now (a failover's plan kills on a source it reaches):
    #: the node's one ``ClusterProbe``; None: one of this context's own, built from ``settings``
    reachable: Callable[[ClusterRecord], bool] | None = None

    def __post_init__(self) -> None:
        if self.reachable is None:
            self.reachable = ClusterProbe(self.settings).reachable

    def probe(self, cluster: ClusterRecord) -> bool:
        """Whether ``cluster`` answers a probe now."""
        assert self.reachable is not None
        return self.reachable(cluster)

    #: the cluster backends the API reads from (driver logs); None: the app builds its own
    #: (``scheduler.backends.registry.BackendRegistry``)
    backends: Backends | None = None


def context_of(request: Request) -> NodeContext:
    """The node's context, from the request: what :func:`get_context` answers, for the hottest
    routes to read without a dependency (FastAPI's machinery costs ~10 µs a dependency a
    request, a few per cent of a ``GET /v1/jobs/{name}``)."""
    context: NodeContext = request.app.state.context
    return context


async def get_context(request: Request) -> NodeContext:
    return context_of(request)


async def get_store(request: Request) -> Store:
    return context_of(request).store


async def get_principal(request: Request) -> Principal:
    """The caller, as the security edge authenticated and authorized it."""
    return principal_of(request)


@dataclass(frozen=True)
class Caller:
    """What a route that changes something works with: this node's context, its store and the
    caller (``actor``, its subject, is the name the audit log and job events give it)."""

    ctx: NodeContext
    store: Store
    principal: Principal

    @property
    def actor(self) -> str:
        return self.principal.subject

    def audit(
        self,
        session: Session,
        action: str,
        target_name: str,
        detail: Mapping[str, Any] | None = None,
        *,
        target_kind: str | None = None,
        team: str = "",
        before: Mapping[str, Any] | None = None,
        after: Mapping[str, Any] | None = None,
    ) -> None:
        """The audit row of ``action`` (``<kind>.<verb>``) by the caller on ``target_name``,
        written by this node in the change's transaction (``session``): the target's kind is
        the action's first part unless ``target_kind`` names another; ``detail`` is what the
        request asked, ``team`` the target's, ``before`` and ``after`` its documents."""
        journal.add_audit(
            session,
            actor=self.actor,
            action=action,
            target_kind=target_kind or action.split(".", 1)[0],
            target_name=target_name,
            detail=detail,
            node_id=self.ctx.settings.node_id,
            team=team,
            before=before,
            after=after,
        )


async def get_caller(request: Request) -> Caller:
    """The context, store and principal as :func:`get_context`, :func:`get_store` and
    :func:`get_principal` answer them, in one dependency (each costs ~10 µs a request)."""
    context = context_of(request)
    return Caller(context, context.store, principal_of(request))


#: ``*``, or one version as an entity tag (``"3"``, weak ``W/"3"``) or a bare number (``3``)
IF_MATCH_PATTERN = r'^\s*(?:\*|(?:W/)?"([0-9]{1,10})"|([0-9]{1,10}))\s*$'
_IF_MATCH = re.compile(IF_MATCH_PATTERN)


async def get_expected_version(
    if_match: Annotated[
        str | None,
        Header(
            description='the ETag last read, e.g. `"3"`: the write is refused with 412 unless the '
            "resource is still at that version (a job's `spec_version`; a cluster's or group's "
            "`version`). `*` or no header: no check.",
            examples=['"3"'],
            json_schema_extra={"pattern": IF_MATCH_PATTERN},
        ),
    ] = None,
) -> int | None:
    if if_match is None:
        return None
    match = _IF_MATCH.fullmatch(if_match)
    if match is None:
        raise InvalidInput(f'If-Match must be a version such as "3" (or *), not {if_match!r}')
    version = match.group(1) or match.group(2)
    return None if version is None else int(version)


# (the dependencies above are ``async``: they do no I/O, and a plain ``def`` dependency would be
# run in the thread pool, a hand-over to another thread and back on every request)


# -- checks every route gets (installed on the app in ``api.app``) ------------------------------


def _declared_query(route: APIRoute) -> frozenset[str]:
    """The query parameters ``route`` takes, its dependencies' included (a walk over a handful of
    dependants: cheaper than caching it)."""
    names: set[str] = set()
    pending = [route.dependant]
    while pending:
        dependant = pending.pop()
        names.update(param.alias for param in dependant.query_params)
        pending.extend(dependant.dependencies)
    return frozenset(names)


async def every_route(request: Request) -> None:
    """What every route runs before its own dependencies (installed on the app in
    ``api.app``): the one authorization function (``api/security/rules.py``), then the request
    checks. One dependency rather than two: each costs FastAPI's machinery ~10 µs a request."""
    await authorize(request)
    await check_request(request)


_MUTATIONS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


async def check_request(request: Request) -> None:
    """Refuse what a route would otherwise silently ignore or misread.

    - a query parameter the route does not declare → 400 (a typo'd filter such as ``?stat=FAILED``
      must not return every job);
    - a request body that is not JSON (``Content-Type`` other than ``application/json`` or
      ``application/*+json``) → 415 (a form post included); a request without a body never is.

    Malformed JSON is a 400 too, raised by the body parser before this runs (``api.problems``).
    """
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    if request.scope.get("query_string"):  # none: nothing undeclared (no parse, no walk)
        declared = _declared_query(route)
        unknown = sorted(set(request.query_params) - declared)
        if unknown:
            takes = ", ".join(sorted(declared)) or "none"
            raise MalformedRequest(
                f"unknown query parameter(s): {', '.join(repr(u) for u in unknown)} "
                f"(this route takes: {takes})"
            )
    if route.body_field is not None and request.method in ("POST", "PUT", "PATCH"):
        content_type = request.headers.get("content-type")
        if content_type is None:
            if await request.body():
                raise UnsupportedMediaType("a request body needs Content-Type: application/json")
        elif not is_json(content_type):
            raise UnsupportedMediaType(
                f"request bodies are JSON (application/json), not {content_type!r}"
            )
    elif request.method in _MUTATIONS:  # a route without a body: only what says it has one
        content_type = request.headers.get("content-type")
        if content_type is not None and not is_json(content_type) and await request.body():
            raise UnsupportedMediaType(
                f"this route takes no body, and bodies are JSON, not {content_type!r}"
            )


ContextDep = Annotated[NodeContext, Depends(get_context)]
StoreDep = Annotated[Store, Depends(get_store)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
CallerDep = Annotated[Caller, Depends(get_caller)]
ExpectedVersionDep = Annotated[int | None, Depends(get_expected_version)]
#: the ``{name}`` of a job, cluster or group in a path (the route checks it: ``validate_name``)
NamePath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        description="letters and digits of any script and -_. (1 to 128 characters, not . or ..)",
        json_schema_extra={"pattern": NAME_PATTERN},
    ),
]
#: ``limit`` of a list route (lists are cursor pages: ``api.paging``)
LimitQuery = PageLimitQuery
#: text searched for in names (the console's search box); no control characters
SearchQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=128,
        pattern=r"^[^\x00-\x1f\x7f-\x9f]*$",
        description="keep the items whose name contains this text, ignoring case",
        examples=["orders"],
    ),
]
