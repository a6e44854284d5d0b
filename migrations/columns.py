"""Column types, keys and constraints that the revisions share.

A revision describes a schema once and for all: what a function here builds must never change,
since revisions already applied were written against it. A new shape gets a new function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql


def name_type(length: int = 128) -> sa.types.TypeEngine[str]:
    """Case-sensitive names: utf8mb4_bin on MySQL/MariaDB."""
    return sa.String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )


def utc_datetime() -> sa.types.TypeEngine[object]:
    """Naive UTC with microseconds, as every time column (scheduler.store.models.UtcDateTime)."""
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def id_column() -> sa.Column[int]:
    """A table's surrogate key: an auto-incremented integer ``id``."""
    return sa.Column("id", sa.Integer(), autoincrement=True, nullable=False)


def foreign_key(
    table: str, column: str, target: str, *, ondelete: str | None = None
) -> sa.ForeignKeyConstraint:
    """``table.column`` referring to ``target`` (``table.column``), the constraint named as the
    models' naming convention names it: ``fk_<table>_<column>_<referred table>``."""
    referred = target.split(".", 1)[0]
    name = op.f(f"fk_{table}_{column}_{referred}")
    return sa.ForeignKeyConstraint([column], [target], name=name, ondelete=ondelete)


def added_columns(
    table: str, *columns: sa.Column[Any]
) -> tuple[Callable[[], None], Callable[[], None]]:
    """The ``upgrade`` and ``downgrade`` of a revision that only adds ``columns`` to ``table``:
    plain ADD COLUMN in order (no table rebuild on SQLite), DROP COLUMN in reverse order (SQLite
    3.35+ and MariaDB drop a column in place). Alembic loads a revision's module afresh for each
    command, so each column object is added to one table only."""

    def upgrade() -> None:
        for column in columns:
            op.add_column(table, column)

    def downgrade() -> None:
        for column in reversed(columns):
            op.drop_column(table, column.name)

    return upgrade, downgrade


def create_table_with_id(name: str, *items: sa.schema.SchemaItem) -> None:
    """``op.create_table(name, ...)`` for a table keyed by a surrogate ``id`` (``id_column``): the
    id comes first, then ``items`` (columns and constraints), and the primary key is
    ``pk_<name>``."""
    op.create_table(
        name, id_column(), *items, sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{name}"))
    )
