"""The operations ledger contract (tests/support/operations_contract.py) on the in-memory fake
and on the SQL ledger over SQLite: the fake the executor's unit tests trust behaves as the real
one does."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scheduler.config import Settings
from tests.support.operations_contract import CONTRACT, FakeHarness, Harness, SqlHarness
from tests.support.schema import sqlite_head_store


@pytest.fixture(params=["fake", "sqlite"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    if request.param == "fake":
        yield FakeHarness()
        return
    store = sqlite_head_store(
        tmp_path / "drover.db", Settings(data_dir=tmp_path / "data", node_id="test-node")
    )
    yield SqlHarness(store, (tmp_path / "storage").as_uri())
    store.dispose()


@pytest.mark.parametrize("rule", CONTRACT, ids=lambda rule: rule.__name__)
def test_operations_ledger_contract(harness: Harness, rule: Callable[[Harness], None]) -> None:
    rule(harness)
