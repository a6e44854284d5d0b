"""Alembic environment: the URL comes from the caller (Store.upgrade) or DROVER_* settings."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from scheduler.store.models import Base

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    from scheduler.config import load_settings
    from scheduler.store.db import make_engine

    url = config.get_main_option("sqlalchemy.url") or load_settings().resolved_database_url
    engine = make_engine(url)
    with engine.begin() as conn:
        _run(conn)
    engine.dispose()


if context.is_offline_mode():
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()
else:
    run_migrations_online()
