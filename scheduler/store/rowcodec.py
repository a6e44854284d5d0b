"""Wide rows read as the database answers them, typed only when a record is made of them.

The API's hot reads (``scheduler.store.reads``) select 100 to 140 columns: a job with its run,
progress, queue row, replica and group. Two costs grow with the column count, not with the
database's work, and both are Python:

- SQLAlchemy's type processing of every value (dates, JSON, booleans), needed only when the
  row becomes a record -- not when the API answers a document it already made from the same row
  (``api/documents.py`` memoizes on the raw row);
- on MySQL/MariaDB, PyMySQL parsing a column description packet per column per result, a third
  of a ``GET /v1/jobs/{name}``'s CPU with 140 of them;
- on SQLite, the driver making a Python object of every value, and the API's memo hashing and
  comparing each of them: 50 rows of 78 columns took 210 us to fetch as values, 97 us as one
  array per row.

So a :class:`RowCodec` reads its columns *raw*: packed into one ``JSON_ARRAY(...)`` column (one
value per row, made by the database, parsed by the C JSON decoder only when a record is made)
on MySQL/MariaDB and SQLite; on another database as the driver answers them (labels kept, no
type processing: a tuple of plain values). The raw form is hashable and equal for equal stored
rows. :meth:`RowCodec.typed` turns it into the values the typed statement would have answered --
the same records, made later.

On SQLite, ``REAL`` columns stay out of the array, next to it: SQLite writes a double into JSON
with 15 significant digits, so 0.30000000000000004 would come back as 0.3. Its dates and JSON
columns are text, in the array as in a plain row, and get their type's own result processing.

Unpacking MySQL/MariaDB's JSON_ARRAY: dates come as ``"YYYY-MM-DD HH:MM:SS[.ffffff]"``, JSON
columns as their parsed value, floats possibly as integers (``2`` for ``2.0``); each column gets
the conversion to what the driver would have answered, then its type's own result processing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Dialect, Float, LargeBinary, Select, func, literal_column, type_coerce
from sqlalchemy.types import DateTime, NullType, TypeDecorator

#: dialects whose rows are packed into one JSON_ARRAY column, every column in it
PACKED = frozenset({"mysql", "mariadb"})
#: dialects whose rows are packed too, but for their floats (and bytes, which JSON cannot hold)
PACKED_BUT_FLOATS = frozenset({"sqlite"})

Convert = Callable[[Any], Any]


def _base_type(type_: Any) -> Any:
    return type_.impl_instance if isinstance(type_, TypeDecorator) else type_


def _unpacker(type_: Any, processor: Convert | None) -> Convert | None:
    """A value from MySQL/MariaDB's JSON_ARRAY of a column of ``type_`` as its typed value."""
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


def _stays_out(dialect: Dialect, type_: Any) -> bool:
    """Whether a column of ``type_`` is selected next to the packed array, not in it."""
    if dialect.name in PACKED:
        return False
    if dialect.name in PACKED_BUT_FLOATS:
        return isinstance(_base_type(type_), Float | LargeBinary)
    return True


@dataclass(frozen=True)
class _Layout:
    """How a codec's columns are selected on one dialect."""

    #: the columns in the array, in its order (indices into the codec's columns)
    packed: tuple[int, ...]
    #: the columns selected next to it, in select order
    loose: tuple[int, ...]
    #: column i's place in ``packed values + loose values``
    order: tuple[int, ...]
    #: column i's conversion from its raw value (None: none)
    convert: tuple[Convert | None, ...]


class RowCodec:
    """How the columns ``columns`` are read raw and typed again, per dialect."""

    def __init__(self, columns: Sequence[Any]) -> None:
        self.columns = list(columns)
        self._layouts: dict[str, _Layout] = {}
        self._texts: dict[str, list[Any]] = {}

    def _layout(self, dialect: Dialect) -> _Layout:
        found = self._layouts.get(dialect.name)
        if found is not None:
            return found
        out = [_stays_out(dialect, c.type) for c in self.columns]
        packed = tuple(i for i, o in enumerate(out) if not o)
        loose = tuple(i for i, o in enumerate(out) if o)
        place = {column: at for at, column in enumerate(packed + loose)}
        processors = [
            c.type.dialect_impl(dialect).result_processor(dialect, None) for c in self.columns
        ]
        if dialect.name in PACKED:
            convert = [_unpacker(c.type, p) for c, p in zip(self.columns, processors, strict=True)]
        else:  # SQLite's array holds what its driver would answer (floats stay out of it)
            convert = processors
        layout = _Layout(
            packed, loose, tuple(place[i] for i in range(len(self.columns))), tuple(convert)
        )
        self._layouts[dialect.name] = layout
        return layout

    def select_list(self, dialect: Dialect) -> list[Any]:
        """What a statement selects to read the columns raw on ``dialect``."""
        layout = self._layout(dialect)
        selected: list[Any] = []
        if layout.packed:
            array = func.json_array(*(self.columns[i] for i in layout.packed))
            selected.append(type_coerce(array, NullType()).label("packed"))
        for i in layout.loose:
            column = self.columns[i]
            selected.append(type_coerce(column, NullType()).label(column.name))
        return selected

    def select_list_text(self, dialect: Dialect) -> list[Any]:
        """:meth:`select_list` with the array as SQL text, made once per dialect. For a
        statement built anew on every request (a page's filters, order and cursor): SQLAlchemy
        then makes its cache key of one string for the array, not of a walk over every column
        in it (several times the cost of the query itself, on SQLite)."""
        found = self._texts.get(dialect.name)
        if found is not None:
            return found
        selected = self.select_list(dialect)
        if self._layout(dialect).packed:
            compiled = selected[0].element.compile(dialect=dialect)
            sql = str(compiled)
            # nothing bound, nothing a driver would read as a parameter marker
            if compiled.params or "%" in sql or "?" in sql:
                raise RuntimeError(f"unexpected SQL for a packed row on {dialect.name}: {sql}")
            selected[0] = literal_column(sql, NullType()).label("packed")
        self._texts[dialect.name] = selected
        return selected

    def raw(self, dialect: Dialect, values: Sequence[Any]) -> Hashable:
        """The raw form of the selected ``values`` (of :meth:`select_list`)."""
        layout = self._layout(dialect)
        return values[0] if not layout.loose else tuple(values)

    def plain(self, dialect: Dialect, raw: Any) -> Sequence[Any]:
        """``raw``'s values before any conversion: enough for a text or a number (a packed
        MySQL date is still a string, a packed MySQL JSON column its parsed value)."""
        layout = self._layout(dialect)
        if not layout.loose:
            return json.loads(raw)  # type: ignore[no-any-return]
        if not layout.packed:
            return raw  # type: ignore[no-any-return]
        values = json.loads(raw[0])
        values.extend(raw[1:])
        return [values[at] for at in layout.order]

    def typed(self, dialect: Dialect, raw: Any) -> tuple[Any, ...]:
        """``raw`` as the typed statement would have answered it."""
        convert = self._layout(dialect).convert
        values = self.plain(dialect, raw)
        return tuple(
            v if c is None or v is None else c(v) for c, v in zip(convert, values, strict=True)
        )


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
