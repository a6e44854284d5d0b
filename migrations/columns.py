"""Column types, keys and constraints that the revisions share.

A revision describes a schema once and for all: what a function here builds must never change,
since revisions already applied were written against it. A new shape gets a new function.
"""

from __future__ import annotations

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
