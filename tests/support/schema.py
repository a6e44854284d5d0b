"""Drover's head schema in a fresh database, without running every migration again.

Running the Alembic chain costs ~1.2 s on MariaDB (each DDL statement commits and syncs) and
~0.2 s on SQLite, and most integration tests want a store "migrated to head" once each, on both
databases. The chain runs once per test process and database kind, into a *template*; each test's
database then gets a copy of the template's schema:

- SQLite: the template file's bytes (the database is one file);
- MySQL: every table's own ``SHOW CREATE TABLE`` of the template (columns, indexes, foreign keys,
  character set: the same DDL the chain left) plus the rows of ``alembic_version``, ~0.13 s.

The migrations themselves stay tested: the template is made by them, and the tests of the chain
(``test_store.py``: upgrade, downgrade, data kept) use ``empty_store`` and run it themselves.
"""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from scheduler.config import Settings
from scheduler.store.bootstrap import ensure_defaults
from scheduler.store.db import Store

_lock = threading.Lock()


@dataclass(frozen=True)
class _MysqlTemplate:
    tables: tuple[tuple[str, str], ...]  # (name, CREATE TABLE statement), in creation order
    versions: tuple[str, ...]  # alembic_version rows


_sqlite_template: Path | None = None
_mysql_templates: dict[str, _MysqlTemplate] = {}  # server URL (no database) -> template


def install_head_schema(store: Store) -> None:
    """Give ``store`` (an empty database) the schema of the migrations' head revision."""
    url = make_url(store.url)
    if url.get_backend_name() == "sqlite":
        _install_sqlite(store, url.database or "")
    elif url.get_backend_name() == "mysql":
        _install_mysql(store)
    else:  # a kind this helper does not know: the chain itself
        store.upgrade()


def _install_sqlite(store: Store, path: str) -> None:
    global _sqlite_template
    if not path or path == ":memory:" or (Path(path).exists() and Path(path).stat().st_size):
        store.upgrade()  # nothing to copy over (or not empty): the chain itself
        return
    with _lock:
        if _sqlite_template is None:
            folder = Path(tempfile.mkdtemp(prefix="drover-schema-"))
            atexit.register(shutil.rmtree, folder, True)  # one per test process, gone with it
            template = Store(f"sqlite:///{folder / 'head.db'}")
            try:
                template.upgrade()
                with template.engine.connect() as conn:  # one file: no WAL left beside it
                    conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                template.dispose()
            _sqlite_template = folder / "head.db"
    store.dispose()  # no connection may hold the (empty) file while it is replaced
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(_sqlite_template, path)


def _mysql_template(store: Store) -> _MysqlTemplate:
    """The head schema's DDL, read from a database the chain migrated (once per server)."""
    url = make_url(store.url)
    key = url.set(database="").render_as_string(hide_password=False)
    with _lock:
        found = _mysql_templates.get(key)
        if found is not None:
            return found
        server = sa.create_engine(url.set(database=""), isolation_level="AUTOCOMMIT")
        # one per test process (pytest-xdist runs several at once)
        name = f"drover_schema_head_{os.getpid()}_{secrets.token_hex(3)}"
        try:
            with server.connect() as conn:
                conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{name}`"))
                conn.execute(sa.text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
            template = Store(url.set(database=name).render_as_string(hide_password=False))
            try:
                template.upgrade()
            finally:
                template.dispose()
            with server.connect() as conn:
                tables = (
                    conn.execute(
                        sa.text(
                            "SELECT table_name FROM information_schema.tables"
                            " WHERE table_schema = :db AND table_type = 'BASE TABLE'"
                            " ORDER BY table_name"
                        ),
                        {"db": name},
                    )
                    .scalars()
                    .all()
                )
                ddl = tuple(
                    (
                        table,
                        conn.execute(sa.text(f"SHOW CREATE TABLE `{name}`.`{table}`")).one()[1],
                    )
                    for table in tables
                )
                versions = tuple(
                    conn.execute(sa.text(f"SELECT version_num FROM `{name}`.alembic_version"))
                    .scalars()
                    .all()
                )
                seeded = [
                    table
                    for table in tables
                    if table != "alembic_version"
                    and conn.execute(sa.text(f"SELECT 1 FROM `{name}`.`{table}` LIMIT 1")).first()
                ]
                # the copy carries DDL only: a migration that writes rows needs the chain
                assert not seeded, f"the migrations write rows into {seeded}: copy them too"
        finally:
            with server.connect() as conn:
                conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{name}`"))
            server.dispose()
        found = _mysql_templates[key] = _MysqlTemplate(ddl, versions)
        return found


def _install_mysql(store: Store) -> None:
    template = _mysql_template(store)
    with store.engine.connect() as conn:
        # foreign keys name tables of this database; their order does not matter while off
        conn.exec_driver_sql("SET SESSION foreign_key_checks = 0")
        try:
            for _table, create in template.tables:
                conn.exec_driver_sql(create)
            for version in template.versions:
                conn.execute(
                    sa.text("INSERT INTO alembic_version (version_num) VALUES (:v)"), {"v": version}
                )
            conn.commit()
        finally:
            conn.exec_driver_sql("SET SESSION foreign_key_checks = 1")


#: the time the seeded rows carry (naive UTC, as every time column)
_SEEDED_AT = "2024-01-01 00:00:00"


def seed_jobs(store: Store, jobs: dict[str, str]) -> None:
    """Rows a migration's data test starts from, written with plain SQL into a database at an
    older revision (0018 or later): a cluster ``c`` (root ``file:///ck/c``), a group ``g`` and
    the jobs ``name -> checkpoint location`` in it ("" for the default)."""
    at = {"at": _SEEDED_AT}
    with store.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO clusters (name, kind, master_url, rest_url, ui_url, az, cloud, "
                "storage_root, health, max_concurrent_submissions, created_at, updated_at) "
                "VALUES ('c', 'local', '', '', '', '', '', 'file:///ck/c', 'NORMAL', 0, :at, :at)"
            ),
            at,
        )
        conn.execute(
            sa.text(
                "INSERT INTO scheduling_groups (name, primary_cluster, created_at, updated_at) "
                "VALUES ('g', 'c', :at, :at)"
            ),
            at,
        )
        for name, location in jobs.items():
            conn.execute(
                sa.text(
                    "INSERT INTO jobs (name, group_name, team, business, priority, entrypoint, "
                    "args, conf, checkpoint_location, desired_state, state, state_reason, "
                    "generation, attempts_reset_at, owner_epoch, version, spec_version, "
                    "created_at, updated_at, on_stall) VALUES (:name, 'g', '', '', 'normal', "
                    "'/p.py', '[]', '{}', :location, 'RUNNING', 'RUNNING', '', 0, :at, 0, 1, 1, "
                    ":at, :at, 'alert')"
                ),
                {"name": name, "location": location, **at},
            )


def sqlite_head_store(path: Path, settings: Settings) -> Store:
    """A SQLite store in the file ``path`` at the head schema, with what a node with
    ``settings`` creates at start (``ensure_defaults``); the caller disposes of it."""
    store = Store(f"sqlite:///{path}")
    install_head_schema(store)
    ensure_defaults(store, settings)
    return store
