"""The schema check reads revisions without Alembic (store/schema.py) and agrees with it."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from scheduler.core.errors import SchemaOutOfDate
from scheduler.store import schema
from scheduler.store.db import MIGRATIONS_DIR, Store, alembic_config


def test_the_head_is_alembics(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'd.db'}")
    expected = ScriptDirectory.from_config(alembic_config(store.url)).get_current_head()
    assert schema.head_revision(MIGRATIONS_DIR / "versions") == expected
    assert store.head_revision() == expected


def test_the_database_revision_is_alembics_before_and_after_migrating(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 'd.db'}")
    try:
        assert store.current_revision() is None
        with pytest.raises(SchemaOutOfDate):
            store.check_schema()
        store.upgrade()
        with store.engine.connect() as conn:
            assert (
                store.current_revision() == MigrationContext.configure(conn).get_current_revision()
            )
        assert store.current_revision() == store.head_revision()
        store.check_schema()
    finally:
        store.dispose()


def test_branches_and_non_literal_revisions_are_left_to_alembic(tmp_path: Path) -> None:
    versions = tmp_path / "versions"
    versions.mkdir()
    (versions / "a.py").write_text('revision = "a"\ndown_revision = None\n')
    (versions / "b.py").write_text('revision: str = "b"\ndown_revision = "a"\n')
    assert schema.head_revision(versions) == "b"
    (versions / "c.py").write_text('revision = "c"\ndown_revision = "a"\n')
    schema.head_revision.cache_clear()
    with pytest.raises(schema.Unusual):  # two heads
        schema.head_revision(versions)
    (versions / "c.py").write_text('revision = make()\ndown_revision = "b"\n')
    schema.head_revision.cache_clear()
    with pytest.raises(schema.Unusual):
        schema.head_revision(versions)
    schema.head_revision.cache_clear()
