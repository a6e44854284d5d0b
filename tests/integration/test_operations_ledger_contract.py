"""The operations ledger contract (tests/support/operations_contract.py) on SQLite and the real
MariaDB."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from scheduler.store.db import Store
from tests.support.operations_contract import CONTRACT, Harness, SqlHarness


@pytest.mark.parametrize("rule", CONTRACT, ids=lambda rule: rule.__name__)
def test_sql_operations_ledger_contract(
    store: Store, tmp_path: Path, rule: Callable[[Harness], None]
) -> None:
    rule(SqlHarness(store, (tmp_path / "storage").as_uri()))
