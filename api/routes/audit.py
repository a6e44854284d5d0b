"""``GET /v1/audit``: who changed what, when, with the target before and after the change.

Newest first, cursor-paginated: ``next_cursor`` of one page is the ``cursor`` of the next (an
opaque string; entries keep their order while new ones arrive). A platform admin sees every
entry; a team admin the entries of their teams.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, BeforeValidator

from api import paging
from api.deps import PrincipalDep, StoreDep
from api.paging import CursorQuery, Page, PageLimitQuery
from api.schemas import attributes
from scheduler.core.errors import InvalidInput
from scheduler.core.paging import Sort
from scheduler.decisions.identity import Role
from scheduler.store import journal

router = APIRouter(prefix="/v1/audit", tags=["audit"])

Short = Annotated[str | None, Query(min_length=1, max_length=300)]


def _date_time_text(value: object) -> object:
    """An ISO 8601 date-time, as the OpenAPI says: not a bare number (which pydantic would take
    for a Unix time)."""
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+(\.\d*)?\s*", value):
        raise ValueError("an ISO 8601 date-time such as 2030-01-02T03:04:05Z")
    return value


Instant = Annotated[datetime | None, BeforeValidator(_date_time_text), Query()]


class AuditPublic(BaseModel):
    id: int
    at: datetime
    actor: str
    action: str
    target_kind: str
    target_name: str
    team: str
    detail: dict[str, Any]
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    node: str


class AuditPage(Page[AuditPublic]):
    """A page of audit entries, newest first."""


@router.get(
    "",
    operation_id="list_audit_entries",
    summary="List audit log entries",
    response_model=AuditPage,
)
def list_audit(
    request: Request,
    response: Response,
    store: StoreDep,
    principal: PrincipalDep,
    actor: Short = None,
    action: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
    target_kind: Annotated[str | None, Query(min_length=1, max_length=32)] = None,
    target_name: Short = None,
    since: Instant = None,
    until: Instant = None,
    cursor: CursorQuery = None,
    limit: PageLimitQuery = paging.DEFAULT_LIMIT,
) -> AuditPage:
    """Who changed what and when, newest first, with the target before and after the change."""
    for name, value in (("since", since), ("until", until)):
        if value is not None and value.tzinfo is None:
            raise InvalidInput(f"{name}: give a time zone (e.g. 2026-01-01T00:00:00Z)")
    filters = {
        "actor": actor,
        "action": action,
        "target_kind": target_kind,
        "target_name": target_name,
        "since": since,
        "until": until,
    }
    order = Sort("id", descending=True)
    window = paging.window(order, cursor, limit, filters, (int,))
    before_id = None
    if window.after is not None and isinstance(window.after[0], int):
        before_id = window.after[0]
    teams = None
    if not principal.platform_admin:
        teams = frozenset(t for t, r in principal.roles.items() if r >= Role.ADMIN)
    with store.session() as session:
        rows = journal.list_audit(
            session,
            limit=limit + 1,
            before_id=before_id,
            actor=actor,
            action=action,
            target_kind=target_kind,
            target_name=target_name,
            since=since,
            until=until,
            teams=teams,
        )
    more = len(rows) > limit
    rows = rows[:limit]
    next_key = (rows[-1].id,) if more and rows else None
    next_cursor, next_url = paging.links(request, response, order, next_key, filters)
    return AuditPage(
        data=[AuditPublic(**attributes(AuditPublic, r, node=r.node_id)) for r in rows],
        limit=limit,
        next_cursor=next_cursor,
        next=next_url,
    )
