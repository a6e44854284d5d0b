"""Wide rows read as the database answers them, typed only when a record is made of them.

The API's hot reads (``scheduler.store.reads``) select 100 to 140 columns: a job with its run,
progress, queue row, replica and group. Two costs grow with the column count, not with the
database's work, and both are Python:

- SQLAlchemy's type processing of every value (dates, JSON, booleans), needed only when the
  row becomes a record -- not when the API answers a document it already made from the same row
  (``api/documents.py`` memoizes on the raw row);
- on MySQL/MariaDB, PyMySQL parsing a column description packet per column per result, a third
  of a ``GET /v1/jobs/{name}``'s CPU with 140 of them.

So a :class:`RowCodec` reads its columns *raw*: on SQLite as the driver answers them (labels
kept, no type processing: a tuple of plain values); on MySQL/MariaDB packed into one
``JSON_ARRAY(...)`` column (one description, one string per row, parsed by the C JSON decoder).
Either way the raw form is hashable and equal for equal stored rows. :meth:`RowCodec.typed` turns
it into the values the typed statement would have answered -- the same records, made later.

Unpacking JSON_ARRAY: dates come as ``"YYYY-MM-DD HH:MM:SS[.ffffff]"``, JSON columns as their
parsed value, floats possibly as integers (``2`` for ``2.0``); each column gets the conversion
to what the driver would have answered, then its type's own result processing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Dialect, Float, Select, func, type_coerce
from sqlalchemy.types import DateTime, NullType, TypeDecorator

#: dialects whose rows are packed into one JSON_ARRAY column
PACKED = frozenset({"mysql", "mariadb"})

Convert = Callable[[Any], Any]


def _base_type(type_: Any) -> Any:
    return type_.impl_instance if isinstance(type_, TypeDecorator) else type_


def _unpacker(type_: Any, processor: Convert | None) -> Convert | None:
    """A packed value of a column of ``type_`` as its typed value."""
    base = _base_type(type_)
    if isinstance(base, DateTime):
        if processor is None:
            return datetime.fromisoformat
        return lambda v: processor(datetime.fromisoformat(v))
    if isinstance(base, JSON):
        return lambda v: json.loads(v) if isinstance(v, str) else v
    if isinstance(base, Float):
        if processor is None:
            return float
        return lambda v: processor(float(v))
    return processor


class RowCodec:
    """How the columns ``columns`` are read raw and typed again, per dialect."""

    def __init__(self, columns: Sequence[Any]) -> None:
        self.columns = list(columns)
        self._convert: dict[str, list[Convert | None]] = {}

    def select_list(self, dialect: Dialect) -> list[Any]:
        """What a statement selects to read the columns raw on ``dialect``."""
        if dialect.name in PACKED:
            return [type_coerce(func.json_array(*self.columns), NullType()).label("packed")]
        return [type_coerce(c, NullType()).label(c.name) for c in self.columns]

    def raw(self, dialect: Dialect, values: Sequence[Any]) -> Hashable:
        """The raw form of the selected ``values`` (of :meth:`select_list`)."""
        return values[0] if dialect.name in PACKED else tuple(values)

    def plain(self, dialect: Dialect, raw: Any) -> Sequence[Any]:
        """``raw``'s values before any conversion: enough for a text or a number (a packed
        date is still a string, a packed JSON column its parsed value)."""
        return json.loads(raw) if dialect.name in PACKED else raw  # type: ignore[no-any-return]

    def typed(self, dialect: Dialect, raw: Any) -> tuple[Any, ...]:
        """``raw`` as the typed statement would have answered it."""
        convert = self._convert.get(dialect.name)
        if convert is None:
            convert = self._converters(dialect)
        values = self.plain(dialect, raw)
        return tuple(
            v if c is None or v is None else c(v) for c, v in zip(convert, values, strict=True)
        )

    def _converters(self, dialect: Dialect) -> list[Convert | None]:
        processors = [
            c.type.dialect_impl(dialect).result_processor(dialect, None) for c in self.columns
        ]
        if dialect.name in PACKED:
            convert = [_unpacker(c.type, p) for c, p in zip(self.columns, processors, strict=True)]
        else:
            convert = processors
        self._convert[dialect.name] = convert
        return convert


class Statements:
    """One statement per dialect, built once from a codec's select list: SQLAlchemy makes a
    statement's cache key (a walk over all its columns) once per statement object."""

    def __init__(self, build: Callable[[list[Any]], Select[Any]], codec: RowCodec) -> None:
        self._build, self._codec = build, codec
        self._built: dict[str, Select[Any]] = {}

    def of(self, dialect: Dialect) -> Select[Any]:
        found = self._built.get(dialect.name)
        if found is None:
            found = self._built[dialect.name] = self._build(self._codec.select_list(dialect))
        return found
