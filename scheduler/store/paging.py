"""Keyset pages in SQL (``scheduler.core.paging`` holds the cursors and says why keysets).

``read_page`` reads one page of a select: ordered by the key columns (the sort field, then a
unique tie-breaker), strictly after the window's key, ``limit + 1`` rows to learn whether another
page follows. It never counts (``count`` reads the total only when a client asks for it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy import ColumnElement, Connection, Select, and_, func, or_, select
from sqlalchemy.orm import Session

from scheduler.core.errors import NotFound
from scheduler.core.paging import KeyPart, Window
from scheduler.store.models import Job

T = TypeVar("T")


def after_key(
    columns: Sequence[Any], key: Sequence[KeyPart], descending: bool
) -> ColumnElement[bool]:
    """``(c1, c2, ...) > (k1, k2, ...)`` (``<`` when descending), spelled out so that every
    database uses the index on the columns: ``c1 > k1 OR (c1 = k1 AND (c2 > k2 OR ...))``."""
    column, value = columns[-1], key[-1]
    condition: ColumnElement[bool] = column < value if descending else column > value
    for column, value in zip(reversed(columns[:-1]), reversed(key[:-1]), strict=True):
        beyond = column < value if descending else column > value
        condition = or_(beyond, and_(column == value, condition))
    return condition


def read_page(
    session: Session | Connection,
    query: Any,
    columns: Sequence[Any],
    window: Window,
    key_of: Callable[[Any], tuple[KeyPart, ...]],
    *,
    scalars: bool = True,
    connection: Connection | None = None,
) -> tuple[list[Any], tuple[KeyPart, ...] | None]:
    """One page of ``query``'s rows (ORM entities when it selects one and ``scalars``; result
    rows otherwise) and the key after which the next page starts (None on the last page).
    ``connection``: run a Core ``query`` there, outside the ORM (plain rows, no autoflush)."""
    if window.after is not None:
        query = query.where(after_key(columns, window.after, window.sort.descending))
    order = [c.desc() if window.sort.descending else c.asc() for c in columns]
    ordered = query.order_by(*order).limit(window.limit + 1)
    if connection is not None:
        rows: list[Any] = list(connection.execute(ordered).all())  # one fetch, not one a row
    else:
        rows = list(session.scalars(ordered) if scalars else session.execute(ordered))
    if len(rows) > window.limit:
        rows = rows[: window.limit]
        return rows, key_of(rows[-1])
    return rows, None


def count(session: Session | Connection, query: Select[Any]) -> int:
    """How many rows ``query`` selects (only when a client asks: ``count=true``)."""
    return int(session.scalar(select(func.count()).select_from(query.subquery())) or 0)


def count_job_rows(session: Session, name: str, model: Any) -> int:
    """How many rows of ``model`` the job named ``name`` has (those whose ``job_id`` is its id;
    none when there is no such job)."""
    job_id = session.scalar(select(Job.id).where(Job.name == name))
    return count(session, select(model.id).where(model.job_id == job_id))


def job_id_of(session: Session, name: str) -> int:
    """The id of the job named ``name``; NotFound when there is none."""
    job_id = session.scalar(select(Job.id).where(Job.name == name))
    if job_id is None:
        raise NotFound(f"no job named {name!r}")
    return int(job_id)


def read_job_page(
    session: Session,
    name: str,
    model: Any,
    key: Any,
    window: Window,
    record: Callable[[Any, str], T],
) -> tuple[list[T], tuple[KeyPart, ...] | None]:
    """One page of the job's rows of ``model`` (those whose ``job_id`` is the job named
    ``name``) by the one column ``key``, each made a record by ``record(row, name)``; and the key
    the next page starts after. NotFound when there is no such job."""
    job_id = job_id_of(session, name)
    rows, next_key = read_page(
        session,
        select(model).where(model.job_id == job_id),
        (key,),
        window,
        lambda row: (getattr(row, key.key),),
    )
    return [record(row, name) for row in rows], next_key
