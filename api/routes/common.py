"""One cursor page of a list route that reads a single store list without filters.

Such a route (clusters, groups, quotas, a job's revisions) reads a window of the list and,
when asked, its count in one session, sets the ``Link`` header and answers the page model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from fastapi import Request, Response
from sqlalchemy.orm import Session

from api import paging
from scheduler.core.paging import KeyPart, Sort, Window
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
