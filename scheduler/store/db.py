"""Engines, sessions and schema migrations of the metadata store.

All SQL lives in the store package. Callers own transactions (``with store.transaction() as s:``).
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection, Engine, Select, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from scheduler.core.errors import (
    AlreadyExists,
    NotFound,
    SchemaOutOfDate,
    StoreError,
    StoreUnavailable,
)
from scheduler.store import schema

if TYPE_CHECKING:
    from alembic.config import Config

# Alembic (with Mako and Pygments, ~10 MiB resident) is imported only where migrations run (or a
# schema check meets branches): not by the store, the node, the reconciler actor (a node's
# memory, bench/node_rss.py); the schema check reads the revisions itself
# (scheduler/store/schema.py).

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"

#: what every commit of a store session in this context must also do, in the same transaction
#: (the API's idempotency keys: "this request's change committed" is written with the change;
#: see ``api.idempotency``). None: nothing.
COMMIT_HOOK: ContextVar[Callable[[Session], None] | None] = ContextVar(
    "drover_commit_hook", default=None
)


#: the connection of the store's :meth:`Store.reading` in this context, if one is open
_READING: ContextVar[tuple[Store, Connection] | None] = ContextVar("drover_reading", default=None)


def _before_commit(session: Session) -> None:
    hook = COMMIT_HOOK.get()
    if hook is not None:
        hook(session)


def _crc32(value: str | None) -> int | None:
    """MySQL's ``CRC32()`` for SQLite: the ownership hash over UTF-8 bytes
    (``scheduler.core.ownership``), so a node selects its own jobs in SQL on either store."""
    return None if value is None else zlib.crc32(value.encode("utf-8"))


#: MySQL errors that mean "this database has not got our schema" (no such table, no such column)
_MYSQL_SCHEMA_ERRORS = frozenset({1146, 1054})


RowT = TypeVar("RowT")


def load_one(
    session: Session, stmt: Select[RowT], missing: str, *, for_update: bool = False
) -> RowT:
    """The first row ``stmt`` selects (locked when ``for_update``); NotFound(``missing``) when
    there is none."""
    if for_update:
        stmt = stmt.with_for_update()
    row = session.scalars(stmt).first()
    if row is None:
        raise NotFound(missing)
    return row


def add_new(session: Session, row: object, conflict: str) -> None:
    """Insert ``row`` now; AlreadyExists(``conflict``) when a unique key already holds one like it
    (a concurrent create: the caller's transaction is then unusable)."""
    session.add(row)
    try:
        session.flush()
    except IntegrityError as exc:
        raise AlreadyExists(conflict) from exc


def is_unavailable(exc: SQLAlchemyError) -> bool:
    """Whether a driver error means the store cannot be used right now (try again later) rather
    than that this statement failed: unreachable, timed out, or without Drover's schema."""
    if isinstance(
        exc,
        sa_exc.OperationalError  # SQLite's "no such table" is one too
        | sa_exc.InterfaceError
        | sa_exc.DisconnectionError
        | sa_exc.TimeoutError,
    ):
        return True
    if isinstance(exc, sa_exc.ProgrammingError):
        args: tuple[Any, ...] = tuple(getattr(exc.orig, "args", ()))
        return len(args) > 0 and args[0] in _MYSQL_SCHEMA_ERRORS
    return False


def store_error(exc: SQLAlchemyError, what: str = "metadata store error") -> StoreError:
    """The driver's error as one of ours (chain it: ``raise store_error(exc) from exc``)."""
    kind = StoreUnavailable if is_unavailable(exc) else StoreError
    return kind(f"{what}: {type(exc).__name__}: {exc}")


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # the same SQL selects a node's jobs on both databases: CRC32(name) % :n = :i
    dbapi_connection.create_function("crc32", 1, _crc32, deterministic=True)
    cursor = dbapi_connection.cursor()
    # Several processes (API, actors) share the file: WAL lets readers run beside one writer.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


#: pooled connections kept open (MySQL), unless a store says how many threads share it
DEFAULT_POOL_SIZE = 5


def is_sqlite_file(url: URL) -> bool:
    """A SQLite database in a file (not in memory)."""
    return url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:")


def is_mysql(url: URL) -> bool:
    """A MySQL or MariaDB database."""
    return url.get_backend_name() in ("mysql", "mariadb")


def make_engine(
    url: str,
    *,
    pool_size: int = DEFAULT_POOL_SIZE,
    ping_after_idle: float | None = None,
    autocommit: bool = False,
) -> Engine:
    """An engine for ``url``. ``pool_size``: how many MySQL connections stay open; size it to
    the threads that use the store at once (a connection beyond it is opened for one checkout
    and closed again: a TCP connection, authentication and, with PyMySQL's preferred TLS, a new
    TLS context per transaction -- about 10 ms of CPU each).

    ``ping_after_idle`` (MySQL): ping a pooled connection before it is handed out only when it
    has been idle that many seconds (None: before every checkout, SQLAlchemy's ``pre_ping``). A
    busy API reuses its connections within milliseconds, and a ping is a round trip per
    checkout; a connection left idle (a server restarted meanwhile) is still checked, and a dead
    one replaced, before anything uses it.

    ``autocommit`` (MySQL): the connections commit every statement by themselves, for reads
    that need no transaction (``Store.connection``). Returning one sends nothing: no ROLLBACK
    round trip after each read, no transaction left open to hold metadata locks."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if is_sqlite_file(parsed):
            Path(str(parsed.database)).parent.mkdir(parents=True, exist_ok=True)
            # a file database: a connection per thread at once, kept open (each new one runs
            # the pragmas below); an in-memory database keeps SQLAlchemy's own pool
            engine = create_engine(
                url,
                connect_args={"timeout": 10},
                pool_size=pool_size,
                max_overflow=max(10, pool_size),
            )
        else:
            engine = create_engine(url, connect_args={"timeout": 10})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if is_mysql(parsed):
        query = dict(parsed.query)
        query.setdefault("charset", "utf8mb4")
        parsed = parsed.set(query=query)
        if autocommit:
            transactions: dict[str, Any] = {
                "isolation_level": "AUTOCOMMIT",
                "skip_autocommit_rollback": True,  # nothing to roll back
            }
        else:
            transactions = {"isolation_level": "READ COMMITTED"}
        engine = create_engine(
            parsed,
            pool_pre_ping=ping_after_idle is None,
            pool_recycle=3600,
            pool_size=pool_size,
            max_overflow=max(10, pool_size),
            pool_reset_on_return=None,  # _rollback_if_open instead (autocommit: none needed)
            **transactions,
        )
        if not autocommit:
            _track_open_transactions(engine)
        if ping_after_idle is not None:
            _ping_when_idle(engine, ping_after_idle)
        return engine
    return create_engine(url, pool_pre_ping=True)


#: ``connection_record.info`` key: when the connection was last returned to the pool
_RETURNED_AT = "drover_returned_at"


def _ping_when_idle(engine: Engine, idle_s: float) -> None:
    """``pre_ping`` for connections idle at least ``idle_s`` only (see ``make_engine``)."""

    def returned(_dbapi_connection: Any, record: Any) -> None:
        if record is not None:
            record.info[_RETURNED_AT] = time.monotonic()

    def handing_out(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        returned_at = record.info.get(_RETURNED_AT)
        if returned_at is None or time.monotonic() - returned_at < idle_s:
            return  # just connected, or in use a moment ago
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:
            # the pool discards this connection and hands out a new one (up to three times)
            raise sa_exc.DisconnectionError(f"idle connection failed its ping: {exc}") from exc

    event.listen(engine.pool, "checkin", returned)
    event.listen(engine.pool, "checkout", handing_out)


#: ``connection_record.info`` key: the DBAPI connection may hold an open transaction
_OPEN = "drover_open_transaction"


def _track_open_transactions(engine: Engine) -> None:
    """Reset a pooled connection on return only when it may hold a transaction.

    SQLAlchemy's default reset sends a ROLLBACK for every connection returned to the pool, also
    right after a COMMIT (a round trip per transaction for nothing). Here a statement marks the
    connection as possibly in a transaction, a commit or rollback clears the mark, and the pool
    rolls back on return only while the mark is set (an error, a read-only session closed
    without either).
    """

    def opened(conn: Any, *_args: Any) -> None:
        conn.info[_OPEN] = True

    # (an invalidated connection -- the server dropped it -- is left alone: reading its
    # ``info`` would try to reconnect inside its failed transaction; the pool discards it)
    def failed(context: Any) -> None:
        if context.connection is not None and not context.connection.invalidated:
            context.connection.info[_OPEN] = True

    def ended(conn: Any, *_args: Any) -> None:
        if not conn.invalidated:
            conn.info[_OPEN] = False

    def reset(dbapi_connection: Any, record: Any, state: Any) -> None:
        if state.terminate_only or record is None:
            return
        if record.info.get(_OPEN, True) and not state.transaction_was_reset:
            dbapi_connection.rollback()
        record.info[_OPEN] = False

    event.listen(engine, "before_cursor_execute", opened)
    event.listen(engine, "handle_error", failed)
    event.listen(engine, "commit", ended)
    event.listen(engine, "rollback", ended)
    event.listen(engine.pool, "reset", reset)


def alembic_config(url: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


class Store:
    """The metadata store of one node: an engine, a session factory, migrations."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
        ping_after_idle: float | None = None,
    ) -> None:
        self.url = url
        self._pool_size = pool_size
        self._ping_after_idle = ping_after_idle
        #: on a SQLite file, this process's write transactions take turns (``_writer``)
        self._write_turns = threading.RLock() if is_sqlite_file(make_url(url)) else None

    @cached_property
    def engine(self) -> Engine:
        return make_engine(
            self.url, pool_size=self._pool_size, ping_after_idle=self._ping_after_idle
        )

    @cached_property
    def _read_engine(self) -> Engine:
        """What :meth:`connection` reads through: on MySQL an engine of its own whose
        connections commit every statement by themselves (``make_engine``'s ``autocommit``);
        elsewhere :attr:`engine`."""
        if not is_mysql(make_url(self.url)):
            return self.engine
        return make_engine(
            self.url,
            pool_size=self._pool_size,
            ping_after_idle=self._ping_after_idle,
            autocommit=True,
        )

    @cached_property
    def _sessions(self) -> sessionmaker[Session]:
        sessions = sessionmaker(self.engine, expire_on_commit=False)
        event.listen(sessions, "before_commit", _before_commit)
        return sessions

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session; translate driver errors into StoreError (domain errors pass through)."""
        try:
            with self._sessions() as session:
                yield session
        except SQLAlchemyError as exc:
            raise store_error(exc) from exc

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A plain connection for reads of ``scheduler.store.reads`` (no ORM session to set up
        and tear down: what a hot read route needs); driver errors become StoreErrors. On MySQL
        its statements commit by themselves (each reads what is committed when it runs, as in
        READ COMMITTED), so returning it costs no round trip; elsewhere what it read is rolled
        back when it is returned. Inside :meth:`reading`, the reading's one connection."""
        shared = _READING.get()
        if shared is not None and shared[0] is self:
            try:
                yield shared[1]
            except SQLAlchemyError as exc:
                raise store_error(exc) from exc
            return
        try:
            with self._read_engine.connect() as connection:
                yield connection
        except SQLAlchemyError as exc:
            raise store_error(exc) from exc

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Every :meth:`connection` of this store opened in this context (and this thread) is
        one connection, taken once: reads that follow one another (an authorization check, then
        the route's own reads) pay for one checkout and one rollback."""
        if _READING.get() is not None:
            yield
            return
        with self.connection() as connection:
            token = _READING.set((self, connection))
            try:
                yield
            finally:
                _READING.reset(token)

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        with self._writer(), self.session() as session, session.begin():
            yield session

    @contextmanager
    def _writer(self) -> Iterator[None]:
        """On a SQLite file, this store's transactions take turns in this process.

        SQLite lets one writer in at a time; a connection that finds the file locked sleeps in
        its busy handler (1, 2, 5, ... 100 ms) and tries again, and under a burst of API writes
        a transaction lost that race again and again (creates' p99 650-850 ms at 16 at once).
        Here they queue on a lock instead and the next one starts the moment the last commits.
        Other processes (the actors) still meet this one in the busy handler."""
        if self._write_turns is None:
            yield
            return
        with self._write_turns:
            yield

    # -- migrations ---------------------------------------------------------------------------

    def head_revision(self) -> str | None:
        """The code's head revision (read without Alembic unless the scripts branch)."""
        try:
            return schema.head_revision(MIGRATIONS_DIR / "versions")
        except schema.Unusual:
            from alembic.script import ScriptDirectory

            return ScriptDirectory.from_config(alembic_config(self.url)).get_current_head()

    def current_revision(self) -> str | None:
        """The database's revision (read without Alembic unless it holds several)."""
        try:
            with self.engine.connect() as conn:
                try:
                    return schema.current_revision(conn)
                except schema.Unusual:
                    from alembic.runtime.migration import MigrationContext

                    return MigrationContext.configure(conn).get_current_revision()
        except SQLAlchemyError as exc:
            raise store_error(exc, "cannot read the schema version") from exc

    def upgrade(self, revision: str = "head") -> None:
        from alembic import command

        with self.engine.begin() as conn:
            config = alembic_config(self.url)
            config.attributes["connection"] = conn
            command.upgrade(config, revision)

    def downgrade(self, revision: str = "base") -> None:
        from alembic import command

        with self.engine.begin() as conn:
            config = alembic_config(self.url)
            config.attributes["connection"] = conn
            command.downgrade(config, revision)

    def check_schema(self) -> None:
        """Refuse to run on a schema that is not at the code's head revision."""
        current, head = self.current_revision(), self.head_revision()
        if current != head:
            raise SchemaOutOfDate(
                f"database schema is at {current or 'nothing'}, this Drover needs {head}: "
                "run `drover db upgrade`"
            )

    def dispose(self) -> None:
        for engine in ("_read_engine", "engine"):
            if engine in self.__dict__:
                self.__dict__[engine].dispose()
