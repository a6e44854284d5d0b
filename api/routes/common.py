"""What the resource routes share.

- :class:`Listing`: a cursor page of a single store list without filters. Such a route
  (clusters, groups, quotas, teams, tokens, a job's runs, events and revisions) reads a window of
  the list and, when asked, its count in one session, sets the ``Link`` header and answers the
  page model.
- :func:`etag`, :func:`read_versioned` and :func:`changes_of`: a versioned resource's ``ETag``,
  its reading, and what a ``PATCH`` of it sent.
- :func:`store_plan` and :class:`OperationListing`: what the routes of operations over many jobs
  (failovers, bulk commands) share: a reviewed plan stored for the executors, and their lists
  newest first with each one's items per step.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from fastapi import Request, Response
from pydantic import BaseModel
from sqlalchemy.orm import Session

from api import paging
from api.deps import Caller
from scheduler.core.clock import utcnow
from scheduler.core.errors import Conflict, InvalidInput
from scheduler.core.operations import NewOperation, OperationRecord
from scheduler.core.paging import KeyPart, Sort
from scheduler.store import operations as ops_store
from scheduler.store.db import Store

R = TypeVar("R")
P = TypeVar("P", bound=paging.Page[Any])


@dataclass(frozen=True)
class Listing(Generic[R, P]):
    """A store list read a page at a time: ``page`` reads a window of its records in ``order``
    (``key_kinds``: the types of the sort key's parts), ``count_all`` counts them all, and
    ``page_model`` is the answer. Both store functions take the session, then the list's
    ``scope`` when it has one (the job whose runs, events or revisions these are), ``page`` the
    window last."""

    order: Sort
    key_kinds: tuple[type, ...]
    page: Callable[..., tuple[Sequence[R], tuple[KeyPart, ...] | None]]
    count_all: Callable[..., int]
    page_model: type[P]

    def read(
        self,
        request: Request,
        response: Response,
        store: Store,
        asked: paging.PageQuery,
        public: Callable[[R], Any],
        scope: tuple[Any, ...] = (),
        order: Sort | None = None,
    ) -> P:
        """The page after the ``asked`` cursor (in ``order``, the request's, else the list's),
        each record made public by ``public``, with the count of all when ``asked`` says; the
        ``Link`` header goes on ``response``."""
        order = order or self.order
        window = paging.window(order, asked.cursor, asked.limit, {}, self.key_kinds)
        with store.session() as session:
            records, next_key = self.page(session, *scope, window)
            total = self.count_all(session, *scope) if asked.count else None
        next_cursor, next_url = paging.links(request, response, order, next_key, {})
        return self.page_model(
            data=[public(r) for r in records],
            limit=asked.limit,
            next_cursor=next_cursor,
            next=next_url,
            count=total,
        )


def etag(response: Response, version: int) -> None:
    """The ``ETag`` of a versioned resource: the version ``If-Match`` is checked against."""
    response.headers["ETag"] = f'"{version}"'


class Versioned(Protocol):
    """A record with a version (what its ``ETag`` says)."""

    @property
    def version(self) -> int: ...


V = TypeVar("V", bound=Versioned)


def read_versioned(
    store: Store,
    response: Response,
    get: Callable[[Session, str], V],
    key: str,
    public: Callable[[V], Any],
) -> Any:
    """The record ``get`` reads by ``key`` made public by ``public``, its version the ``ETag``."""
    with store.session() as session:
        record = get(session, key)
    etag(response, record.version)
    return public(record)


def changes_of(body: BaseModel, nullable: Collection[str] | None = None) -> dict[str, Any]:
    """The fields a ``PATCH`` sent (InvalidInput when none); with ``nullable``, InvalidInput
    also when it sends null for another field (None: any field may be null)."""
    changes: dict[str, Any] = body.model_dump(exclude_unset=True)
    if not changes:
        raise InvalidInput("nothing to change: send at least one field")
    if nullable is not None:
        nulls = sorted(k for k, v in changes.items() if v is None and k not in nullable)
        if nulls:
            raise InvalidInput(f"fields cannot be null: {', '.join(nulls)}")
    return changes


def store_plan(
    caller: Caller,
    response: Response,
    planned: NewOperation,
    expected_plan: str | None,
    location: str,
) -> OperationRecord:
    """Store ``planned`` as an operation for the executors, its URL (``location`` + its id) in
    the ``Location`` header; Conflict when the dry run reviewed (``expected_plan``, its digest)
    planned otherwise."""
    if expected_plan is not None and expected_plan != planned.plan_digest:
        raise Conflict(
            f"the plan changed since the dry run (digest {expected_plan}, now "
            f"{planned.plan_digest}): review it again",
            plan_digest=planned.plan_digest,
        )
    with caller.store.transaction() as session:
        op = ops_store.persist(session, planned, node_id=caller.ctx.settings.node_id, now=utcnow())
    response.headers["Location"] = f"{location}/{op.id}"
    return op


class OperationSummary(Protocol):
    """Makes the public document of an operation in a list: its counts, without items."""

    def __call__(self, op: OperationRecord, *, counts: dict[str, int], items: bool) -> Any: ...


@dataclass(frozen=True)
class OperationListing(Generic[P]):
    """Stored operations read a page at a time, newest first, each made public by ``public``
    with its items per step (not the items themselves) in a ``page_model``."""

    page_model: type[P]
    public: OperationSummary

    def read(
        self,
        request: Request,
        response: Response,
        store: Store,
        cursor: str | None,
        limit: int,
        filters: Mapping[str, Any],
        which: Mapping[str, Any],
    ) -> P:
        """The page after ``cursor`` of the operations ``which`` selects (the keywords of
        ``ops_store.list_operations``); ``filters``, the query's, bind the cursor."""
        order = Sort("id", descending=True)
        window = paging.window(order, cursor, limit, filters, (int,))
        before = window.after[0] if window.after is not None else None
        with store.session() as session:
            rows = ops_store.list_operations(
                session,
                before_id=int(before) if isinstance(before, int) else None,
                limit=limit + 1,
                **which,
            )
            more = len(rows) > limit
            rows = rows[:limit]
            counts = ops_store.step_counts(session, [r.id for r in rows])
        next_key = (rows[-1].id,) if more and rows else None
        next_cursor, next_url = paging.links(request, response, order, next_key, filters)
        return self.page_model(
            data=[self.public(r, counts=counts.get(r.id, {}), items=False) for r in rows],
            limit=limit,
            next_cursor=next_cursor,
            next=next_url,
        )
