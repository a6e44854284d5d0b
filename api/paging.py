"""Cursor pages at the API edge (``scheduler.core.paging`` says how they work).

Every list route takes ``limit`` (1 to 1000), ``cursor`` (the ``next_cursor`` of the previous
page) and ``count`` (also count every matching item: one more query, so only on request), and
answers a page: ``data``, ``limit``, ``next_cursor`` and ``next`` (the URL of the next page, also
sent as a ``Link: <...>; rel="next"`` header; both null on the last page) and ``count``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Generic, TypeVar
from urllib.parse import urlencode

from fastapi import Depends, Query, Request, Response
from pydantic import BaseModel, Field

from scheduler.core.paging import (
    CURSOR_PATTERN,
    MAX_CURSOR_LENGTH,
    KeyPart,
    Sort,
    Window,
    decode,
    encode,
)

#: the largest page a list returns
MAX_LIMIT = 1000
DEFAULT_LIMIT = 100

CursorQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_CURSOR_LENGTH,
        pattern=CURSOR_PATTERN,
        description="where the page starts: the `next_cursor` of the previous page (opaque; "
        "valid with the same sort and filters only). Absent: the first page.",
        examples=["eyJzIjoibmFtZSIsImsiOlsib3JkZXJzIl0sImYiOiI0NGEzIn0"],
    ),
]
PageLimitQuery = Annotated[
    int,
    Query(
        ge=1,
        le=MAX_LIMIT,
        description=f"most items in the page (1 to {MAX_LIMIT})",
        examples=[50],
    ),
]
CountQuery = Annotated[
    bool,
    Query(
        description="also count every item that matches the filters (`count` in the answer; "
        "costs one more query, so it is null unless asked for)",
        examples=[True],
    ),
]


@dataclass(frozen=True)
class PageQuery:
    """The paging parameters of a list route that counts on request: ``limit``, ``cursor``
    and ``count``, in that order (a route's own filters and sort come before them)."""

    limit: int
    cursor: str | None
    count: bool


def page_query(
    limit: PageLimitQuery = DEFAULT_LIMIT, cursor: CursorQuery = None, count: CountQuery = False
) -> PageQuery:
    return PageQuery(limit, cursor, count)


#: a list route's ``limit``, ``cursor`` and ``count`` query parameters as one argument
PageDep = Annotated[PageQuery, Depends(page_query)]

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """A page of a list, in a stable order. Follow `next` (or pass `next_cursor` as `cursor`)
    until it is null to read every item exactly once, even while items change."""

    data: list[T] = Field(description="the items of this page, in the list's order")
    limit: int = Field(description="the most items a page of this request holds", examples=[50])
    next_cursor: str | None = Field(
        description="pass as `cursor` for the next page; null on the last page",
        examples=["eyJzIjoibmFtZSIsImsiOlsib3JkZXJzIl0sImYiOiI0NGEzIn0"],
    )
    next: str | None = Field(
        description="the path and query of the next page (the same filters, sort and limit); "
        'null on the last page. Also sent as a `Link` header with `rel="next"`.',
        examples=["/v1/jobs?limit=50&cursor=eyJzIjoibmFtZSIsImsiOlsib3JkZXJzIl0sImYiOiI0NGEzIn0"],
    )
    count: int | None = Field(
        default=None,
        description="how many items match the filters in all (only with `count=true`, else null)",
        examples=[1234],
    )


def window(
    sort: Sort,
    cursor: str | None,
    limit: int,
    filters: Mapping[str, Any],
    kinds: Sequence[type],
) -> Window:
    """The window a store function reads: the cursor is checked against this sort and filters."""
    after = None if cursor is None else decode(cursor, sort, filters, kinds)
    return Window(sort, after, limit)


def links(
    request: Request,
    response: Response | None,
    sort: Sort,
    next_key: tuple[KeyPart, ...] | None,
    filters: Mapping[str, Any],
) -> tuple[str | None, str | None]:
    """``(next_cursor, next)`` of a page, and the ``Link`` header on ``response``."""
    if next_key is None:
        return None, None
    cursor = encode(sort, next_key, filters)
    params = [(k, v) for k, v in request.query_params.multi_items() if k != "cursor"]
    params.append(("cursor", cursor))
    url = f"{request.url.path}?{urlencode(params)}"
    if response is not None:
        response.headers["Link"] = f'<{url}>; rel="next"'
    return cursor, url
