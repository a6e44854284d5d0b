"""The ledger contract (tests/support/ledger_contract.py) on the in-memory fake and on the SQL
ledger over SQLite: the fake the reconciler's tests trust behaves as the real one does."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from scheduler.core.ledger import KillIntent
from scheduler.store.db import Store
from tests.support.ledger_contract import CONTRACT, FakeHarness, Harness, SqlHarness


@pytest.fixture(params=["fake", "sqlite"])
def harness(request: pytest.FixtureRequest) -> Harness:
    if request.param == "fake":
        return FakeHarness()
    store = request.getfixturevalue("sqlite_store")
    return SqlHarness(store)


@pytest.mark.parametrize("rule", CONTRACT, ids=lambda rule: rule.__name__)
def test_ledger_contract(harness: Harness, rule: Callable[[Harness], None]) -> None:
    rule(harness)


def test_fenced_events_name_the_epoch_they_were_written_under(sqlite_store: Store) -> None:
    """Every event a fenced write adds names its claim's epoch (the chaos checker tells a kill
    under a current claim from one under a stale claim by it); API events name none."""
    from sqlalchemy import select

    from scheduler.store.models import JobEvent
    from tests.support import ledger_contract as contract

    h = SqlHarness(sqlite_store)
    job = contract._submitted(h)
    h.ledger.apply(contract.ME, [KillIntent(job, "desired STOPPED")])
    h.api_write(job.id)
    with sqlite_store.session() as session:
        events = session.execute(
            select(JobEvent.cause, JobEvent.to_state, JobEvent.owner_epoch).order_by(JobEvent.id)
        ).all()
    fenced = [(to, epoch) for cause, to, epoch in events if cause == "reconciler"]
    assert ("STOPPING", contract.ME.epoch) in fenced
    assert fenced and all(epoch == contract.ME.epoch for _, epoch in fenced)
    assert all(epoch is None for cause, _, epoch in events if cause != "reconciler")
    assert any(cause != "reconciler" for cause, _, _ in events)
