"""Cursor pagination (pure): sort orders, and the opaque cursors that carry a page's position.

Every list of the API is *keyset*-paginated: a page ends at the key of its last item (the sort
field and a unique tie-breaker, such as ``(state, name)``), and the next page starts strictly
after that key. Unlike ``OFFSET``, a keyset page neither repeats nor skips an item when rows are
inserted, deleted or changed before it while a client pages: an item whose sort key does not
change appears exactly once. (Sorting by a field that changes — a job's ``state`` or
``updated_at`` — shows an item that changes meanwhile at its new place, where the client may
meet it again or not at all; the default sorts are by immutable keys.)

A cursor is opaque to clients: URL-safe base64 of a small JSON document holding the sort, the key
after which the next page starts, and a digest of the listing's filters, so that a cursor is
refused (422) when it is used with another sort or other filters than the ones that made it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from scheduler.core.errors import InvalidInput

#: longest cursor the API accepts (a name key of 128 four-byte characters fits easily)
MAX_CURSOR_LENGTH = 1024
#: the alphabet of a cursor (URL-safe base64 without padding)
CURSOR_PATTERN = r"^[A-Za-z0-9_-]{1,1024}$"

#: a key part: text, an integer, or an instant (sent as ISO 8601 text with a marker)
KeyPart = str | int | datetime


@dataclass(frozen=True)
class Sort:
    """A sort order: a field (``name``, ``state``, ``updated_at``, ...) and its direction."""

    field: str
    descending: bool = False

    @classmethod
    def parse(cls, text: str, allowed: Sequence[str]) -> Sort:
        """``name`` or ``-name`` (descending); InvalidInput unless the field is allowed."""
        descending = text.startswith("-")
        field = text[1:] if descending else text
        if field not in allowed:
            choices = ", ".join(f"{a}, -{a}" for a in allowed)
            raise InvalidInput(f"sort: one of {choices}; not {text!r}", field="sort")
        return cls(field, descending)

    def __str__(self) -> str:
        return f"-{self.field}" if self.descending else self.field


def filters_digest(filters: Mapping[str, Any]) -> str:
    """A short digest of a listing's filters (None values left out; lists order-insensitive)."""
    canonical = {
        key: sorted(map(str, value)) if isinstance(value, list | tuple | set | frozenset) else value
        for key, value in sorted(filters.items())
        if value is not None and value != [] and value != ()
    }
    text = json.dumps(canonical, sort_keys=True, default=str, ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _part(value: KeyPart) -> Any:
    if isinstance(value, datetime):
        return {"t": value.astimezone(UTC).isoformat()}
    return value


def _unpart(value: Any) -> KeyPart:
    if isinstance(value, dict) and set(value) == {"t"} and isinstance(value["t"], str):
        instant = datetime.fromisoformat(value["t"])
        if instant.tzinfo is None:
            raise ValueError("naive instant")
        return instant
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f"bad key part {value!r}")
    return value


def encode(sort: Sort, key: Sequence[KeyPart], filters: Mapping[str, Any]) -> str:
    """The cursor of the page that starts after ``key``."""
    document = {"s": str(sort), "k": [_part(v) for v in key], "f": filters_digest(filters)}
    raw = json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode(
    cursor: str, sort: Sort, filters: Mapping[str, Any], kinds: Sequence[type]
) -> tuple[KeyPart, ...]:
    """The key after which the page of ``cursor`` starts; InvalidInput when the cursor is not
    one this listing made (malformed, another sort, other filters)."""
    bad = InvalidInput(
        "cursor: pass the next_cursor of the previous page, with the same sort and filters",
        field="cursor",
    )
    if not cursor or len(cursor) > MAX_CURSOR_LENGTH or not cursor.isascii():
        raise bad
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        document = json.loads(raw.decode("utf-8"))
        if not isinstance(document, dict):
            raise ValueError("not an object")
        key = tuple(_unpart(v) for v in document["k"])
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise bad from exc
    if document.get("s") != str(sort) or document.get("f") != filters_digest(filters):
        raise bad
    if len(key) != len(kinds) or not all(
        isinstance(part, kind) and not isinstance(part, bool)
        for part, kind in zip(key, kinds, strict=True)
    ):
        raise bad
    return key


@dataclass(frozen=True)
class Window:
    """What a store function needs to read one page: the sort, where to start, how many."""

    sort: Sort
    after: tuple[KeyPart, ...] | None
    limit: int
