"""``GET /v1/audit``: who changed what, when, with the target before and after the change.

Newest first, cursor-paginated: ``next_cursor`` of one page is the ``cursor`` of the next (an
opaque string; entries keep their order while new ones arrive). A platform admin sees every
entry; a team admin the entries of their teams.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, BeforeValidator

from api.deps import PrincipalDep, StoreDep
from scheduler.errors import InvalidInput
from scheduler.identity import Role
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


class AuditPage(BaseModel):
    data: list[AuditPublic]
    #: pass as ``cursor`` for the next (older) page; null on the last page
    next_cursor: str | None
    limit: int


@router.get("", response_model=AuditPage)
def list_audit(
    store: StoreDep,
    principal: PrincipalDep,
    actor: Short = None,
    action: Annotated[str | None, Query(min_length=1, max_length=64)] = None,
    target_kind: Annotated[str | None, Query(min_length=1, max_length=32)] = None,
    target_name: Short = None,
    since: Instant = None,
    until: Instant = None,
    cursor: Annotated[str | None, Query(max_length=24)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> AuditPage:
    before_id = None
    if cursor is not None:
        if not (cursor.isascii() and cursor.isdigit()) or int(cursor) > 2**62:
            raise InvalidInput("cursor: pass the next_cursor of the previous page")
        before_id = int(cursor)
    for name, value in (("since", since), ("until", until)):
        if value is not None and value.tzinfo is None:
            raise InvalidInput(f"{name}: give a time zone (e.g. 2026-01-01T00:00:00Z)")
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
    return AuditPage(
        data=[
            AuditPublic(
                id=r.id,
                at=r.at,
                actor=r.actor,
                action=r.action,
                target_kind=r.target_kind,
                target_name=r.target_name,
                team=r.team,
                detail=r.detail,
                before=r.before,
                after=r.after,
                node=r.node_id,
            )
            for r in rows
        ],
        next_cursor=str(rows[-1].id) if more and rows else None,
        limit=limit,
    )
