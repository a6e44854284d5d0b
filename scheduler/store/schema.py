"""The schema's revision without Alembic: what a node checks at start and every readiness probe.

Alembic (with Mako and Pygments) costs a process about 10 MiB resident and reads every migration
script through its machinery on each check; a node checks its schema at start and on every
``/readyz``. The two answers a check needs are simple to read directly:

- the code's head revision: the one ``revision`` of ``migrations/versions/*.py`` that no script
  names as its ``down_revision`` (read with ``ast``, literal values only, once per process);
- the database's revision: the ``version_num`` row of Alembic's ``alembic_version`` table.

Anything unusual (several heads or several rows: branches; a script whose revision is not a
literal) answers None from here, and the caller asks Alembic itself. Migrations are still run by
Alembic (``drover db upgrade``).
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from sqlalchemy import Connection, text
from sqlalchemy.exc import SQLAlchemyError


class Unusual(Exception):
    """The simple reading does not apply (branches, non-literal revisions): ask Alembic."""


@cache
def head_revision(versions_dir: Path) -> str:
    """The single head of the migration scripts in ``versions_dir`` (Unusual otherwise)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for script in sorted(versions_dir.glob("*.py")):
        values = _assignments(script, {"revision", "down_revision"})
        revision = values.get("revision")
        if not isinstance(revision, str):
            raise Unusual(f"{script.name}: no literal revision")
        revisions.add(revision)
        down = values.get("down_revision")
        if isinstance(down, str):
            parents.add(down)
        elif isinstance(down, tuple | list):  # a merge point
            parents.update(str(d) for d in down)
        elif down is not None:
            raise Unusual(f"{script.name}: down_revision is not a literal")
    heads = revisions - parents
    if len(heads) != 1:
        raise Unusual(f"{len(heads)} heads in {versions_dir}")
    return heads.pop()


def current_revision(conn: Connection) -> str | None:
    """The database's revision (None: not migrated at all; Unusual: several rows)."""
    try:
        rows = conn.execute(text("SELECT version_num FROM alembic_version")).all()
    except SQLAlchemyError:
        conn.rollback()
        if _has_version_table(conn):
            raise
        return None
    if len(rows) > 1:
        raise Unusual("several rows in alembic_version (branches)")
    return str(rows[0][0]) if rows else None


def _has_version_table(conn: Connection) -> bool:
    from sqlalchemy import inspect

    return bool(inspect(conn).has_table("alembic_version"))


def _assignments(script: Path, names: set[str]) -> dict[str, object]:
    """Module-level ``name = <literal>`` (or annotated) assignments of ``names`` in ``script``."""
    found: dict[str, object] = {}
    tree = ast.parse(script.read_text(encoding="utf-8"), filename=str(script))
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        for target in targets:
            if isinstance(target, ast.Name) and target.id in names and value is not None:
                try:
                    found[target.id] = ast.literal_eval(value)
                except ValueError as exc:
                    raise Unusual(f"{script.name}: {target.id} is not a literal") from exc
    return found
