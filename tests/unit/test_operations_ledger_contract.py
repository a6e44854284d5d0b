"""The operations ledger contract (tests/support/operations_contract.py) on the in-memory fake
and on the SQL ledger over SQLite: the fake the executor's unit tests trust behaves as the real
one does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.operations_contract import CONTRACT, FakeHarness, Harness, SqlHarness


@pytest.fixture(params=["fake", "sqlite"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    if request.param == "fake":
        return FakeHarness()
    store = request.getfixturevalue("sqlite_store")
    return SqlHarness(store, (tmp_path / "storage").as_uri())


@pytest.mark.parametrize("rule", CONTRACT, ids=lambda rule: rule.__name__)
def test_operations_ledger_contract(harness: Harness, rule: Callable[[Harness], None]) -> None:
    rule(harness)
