"""The API store's pool on MariaDB pings a connection only after it sat idle
(``make_engine(ping_after_idle=...)``): a connection the server dropped while it was idle is
replaced before anything uses it; one used a moment ago is handed out without a round trip."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import sqlalchemy as sa

from scheduler.core.errors import StoreUnavailable
from scheduler.store.db import Store

pytestmark = pytest.mark.integration


def _connection_id(store: Store) -> int:
    with store.connection() as connection:
        return int(connection.execute(sa.text("SELECT CONNECTION_ID()")).scalar_one())


def _kill(url: str, connection_id: int) -> None:
    engine = sa.create_engine(url, poolclass=sa.NullPool)
    try:
        with engine.connect() as connection:
            connection.execute(sa.text(f"KILL CONNECTION {connection_id}"))
    finally:
        engine.dispose()


def test_an_idle_connection_dropped_by_the_server_is_replaced(
    fresh_mysql_url: Callable[[], str],
) -> None:
    url = fresh_mysql_url()
    store = Store(url, pool_size=1, ping_after_idle=0.0)  # every reuse counts as idle
    try:
        first = _connection_id(store)
        _kill(url, first)
        second = _connection_id(store)  # pinged, found dead, replaced: no error
        assert second != first
    finally:
        store.dispose()


def test_a_connection_used_a_moment_ago_is_not_pinged(
    fresh_mysql_url: Callable[[], str],
) -> None:
    url = fresh_mysql_url()
    store = Store(url, pool_size=1, ping_after_idle=3600.0)
    try:
        first = _connection_id(store)
        _kill(url, first)
        # not pinged: the dropped connection is used and the read fails (the pool replaces it)
        with pytest.raises(StoreUnavailable):
            _connection_id(store)
        assert _connection_id(store) != first
    finally:
        store.dispose()


def _rollbacks(store: Store) -> tuple[int, int]:
    """(the read connection's id, how many ROLLBACKs it has run), read on it."""
    with store.connection() as connection:
        found = connection.execute(sa.text("SHOW SESSION STATUS LIKE 'Com_rollback'")).one()
        return int(connection.execute(sa.text("SELECT CONNECTION_ID()")).scalar_one()), int(
            found[1]
        )


def test_reads_commit_by_themselves_and_are_returned_without_a_rollback(
    fresh_mysql_url: Callable[[], str],
) -> None:
    """The reads' connections (``Store.connection``) are in autocommit: no transaction stays
    open after a read, and returning one to the pool sends no ROLLBACK."""
    store = Store(fresh_mysql_url(), pool_size=1, ping_after_idle=3600.0)
    try:
        first, before = _rollbacks(store)
        for _ in range(3):
            with store.connection() as connection:
                connection.execute(sa.text("SELECT 1")).one()
        again, after = _rollbacks(store)
        assert again == first and after == before
        with store.connection() as connection:
            open_transactions = connection.execute(
                sa.text(
                    "SELECT COUNT(*) FROM information_schema.innodb_trx "
                    "WHERE trx_mysql_thread_id = CONNECTION_ID()"
                )
            ).scalar_one()
            assert open_transactions == 0
    finally:
        store.dispose()
