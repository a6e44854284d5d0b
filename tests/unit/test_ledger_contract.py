"""The ledger contract (tests/support/ledger_contract.py) on the in-memory fake and on the SQL
ledger over SQLite: the fake the reconciler's tests trust behaves as the real one does."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from scheduler.config import Settings
from scheduler.core.ledger import KillIntent
from tests.support.ledger_contract import CONTRACT, FakeHarness, Harness, SqlHarness
from tests.support.schema import sqlite_head_store


@pytest.fixture(params=["fake", "sqlite"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    if request.param == "fake":
        yield FakeHarness()
        return
    store = sqlite_head_store(
        tmp_path / "drover.db", Settings(data_dir=tmp_path / "data", node_id="test-node")
    )
    yield SqlHarness(store)
    store.dispose()


@pytest.mark.parametrize("rule", CONTRACT, ids=lambda rule: rule.__name__)
def test_ledger_contract(harness: Harness, rule: Callable[[Harness], None]) -> None:
    rule(harness)


def test_fenced_events_name_the_epoch_they_were_written_under(tmp_path: Path) -> None:
    """Every event a fenced write adds names its claim's epoch (the chaos checker tells a kill
    under a current claim from one under a stale claim by it); API events name none."""
    from sqlalchemy import select

    from scheduler.store.models import JobEvent
    from tests.support import ledger_contract as contract

    store = sqlite_head_store(
        tmp_path / "drover.db", Settings(data_dir=tmp_path / "data", node_id="test-node")
    )
    try:
        h = SqlHarness(store)
        job = contract._submitted(h)
        h.ledger.apply(contract.ME, [KillIntent(job, "desired STOPPED")])
        h.api_write(job.id)
        with store.session() as session:
            events = session.execute(
                select(JobEvent.cause, JobEvent.to_state, JobEvent.owner_epoch).order_by(
                    JobEvent.id
                )
            ).all()
    finally:
        store.dispose()
    fenced = [(to, epoch) for cause, to, epoch in events if cause == "reconciler"]
    assert ("STOPPING", contract.ME.epoch) in fenced
    assert fenced and all(epoch == contract.ME.epoch for _, epoch in fenced)
    assert all(epoch is None for cause, _, epoch in events if cause != "reconciler")
    assert any(cause != "reconciler" for cause, _, _ in events)
