"""The ledger contract (tests/support/ledger_contract.py) on SQLite and the real MariaDB."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from scheduler.store.db import Store
from tests.support.ledger_contract import CONTRACT, Harness, SqlHarness


@pytest.mark.parametrize("rule", CONTRACT, ids=lambda rule: rule.__name__)
def test_sql_ledger_contract(store: Store, rule: Callable[[Harness], None]) -> None:
    rule(SqlHarness(store))
