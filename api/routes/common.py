"""What the resource routes share.

- :class:`Listing`: a cursor page of a single store list without filters. Such a route
  (clusters, groups, quotas, a job's revisions) reads a window of the list and, when asked, its
  count in one session, sets the ``Link`` header and answers the page model.
- :func:`audit`: the audit row of a change, written by this node in the change's transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fastapi import Request, Response
from sqlalchemy.orm import Session

from api import paging
from api.deps import NodeContext
from scheduler.core.paging import KeyPart, Sort, Window
from scheduler.store import journal
from scheduler.store.db import Store

R = TypeVar("R")
P = TypeVar("P", bound=paging.Page[Any])


@dataclass(frozen=True)
class Listing(Generic[R, P]):
    """A store list read a page at a time: ``page`` reads a window of its records in ``order``
    (``key_kinds``: the types of the sort key's parts), ``count_all`` counts them all, and
    ``page_model`` is the answer."""

    order: Sort
    key_kinds: tuple[type, ...]
    page: Callable[[Session, Window], tuple[Sequence[R], tuple[KeyPart, ...] | None]]
    count_all: Callable[[Session], int]
    page_model: type[P]

    def read(
        self,
        request: Request,
        response: Response,
        store: Store,
        cursor: str | None,
        limit: int,
        count: bool,
        public: Callable[[R], Any],
    ) -> P:
        """The page after ``cursor``, each record made public by ``public``, with the count of
        all when ``count`` asks; the ``Link`` header goes on ``response``."""
        window = paging.window(self.order, cursor, limit, {}, self.key_kinds)
        with store.session() as session:
            records, next_key = self.page(session, window)
            total = self.count_all(session) if count else None
        next_cursor, next_url = paging.links(request, response, self.order, next_key, {})
        return self.page_model(
            data=[public(r) for r in records],
            limit=limit,
            next_cursor=next_cursor,
            next=next_url,
            count=total,
        )


def audit(
    session: Session,
    ctx: NodeContext,
    actor: str,
    action: str,
    target_name: str,
    detail: Mapping[str, Any] | None,
    *,
    target_kind: str | None = None,
    team: str = "",
    before: Mapping[str, Any] | None = None,
    after: Mapping[str, Any] | None = None,
) -> None:
    """The audit row of ``action`` (``<kind>.<verb>``) by ``actor`` on ``target_name``, whose
    kind is the action's first part unless ``target_kind`` names another, with the request's
    ``detail``, the target's ``team`` and its documents ``before`` and ``after`` the change."""
    journal.add_audit(
        session,
        actor=actor,
        action=action,
        target_kind=target_kind or action.split(".", 1)[0],
        target_name=target_name,
        detail=detail,
        node_id=ctx.settings.node_id,
        team=team,
        before=before,
        after=after,
    )
