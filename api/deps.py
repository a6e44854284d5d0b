"""What route handlers depend on: the node context, the store, the caller, versions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Header, Request

from api.security.rules import principal_of
from scheduler.config import Settings
from scheduler.errors import InvalidInput
from scheduler.identity import Principal
from scheduler.membership import MembershipSnapshot, Mode, NodeCard, unavailable
from scheduler.store.db import Store


def _no_nudge(group: str, job: str | None = None) -> None:
    return None


def _no_views() -> MembershipSnapshot:
    """An API without a node's actors (tests, tools) knows no membership."""
    return unavailable(Mode.STARTING, NodeCard("", "", "", ""))


def _always_ready() -> tuple[bool, str]:
    return True, "no actors to wait for"


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


def get_context(request: Request) -> NodeContext:
    context: NodeContext = request.app.state.context
    return context


def get_store(context: Annotated[NodeContext, Depends(get_context)]) -> Store:
    return context.store


def get_principal(request: Request) -> Principal:
    """The caller, as the security edge authenticated and authorized it."""
    return principal_of(request)


def get_actor(principal: Annotated[Principal, Depends(get_principal)]) -> str:
    """Who is calling, as written to the audit log and job events."""
    return principal.subject


def get_expected_version(
    if_match: Annotated[str | None, Header(description='job version, e.g. "3"')] = None,
) -> int | None:
    if if_match is None or if_match.strip() == "*":
        return None
    raw = if_match.strip().removeprefix("W/").strip('"')
    if not raw.isdigit():
        raise InvalidInput(f'If-Match must be a job version such as "3", not {if_match!r}')
    return int(raw)


ContextDep = Annotated[NodeContext, Depends(get_context)]
StoreDep = Annotated[Store, Depends(get_store)]
ActorDep = Annotated[str, Depends(get_actor)]
PrincipalDep = Annotated[Principal, Depends(get_principal)]
ExpectedVersionDep = Annotated[int | None, Depends(get_expected_version)]
