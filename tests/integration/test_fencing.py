"""Ownership claims and fenced writes in the store (a node with a stale view of membership can
no longer write), on SQLite and real MariaDB."""

from __future__ import annotations

from typing import Any

import pytest

from scheduler.core.errors import NotOwner, StaleWrite
from scheduler.core.ownership import Claim, Fence, owner_index
from scheduler.core.records import JobRecord, JobSpec
from scheduler.core.states import DesiredState, JobState
from scheduler.store import catalog as catalog_store
from scheduler.store import jobs as jobs_store
from scheduler.store import journal, ledger
from scheduler.store.db import Store

pytestmark = pytest.mark.integration

NAMES = ["orders", "Orders", "clicks-eu", "café_au_lait", "订单流", "x", "a.b-c_d", "payments"] + [
    f"job-{i}" for i in range(40)
]


def _create(store: Store, names: list[str]) -> None:
    with store.transaction() as session:
        for name in names:
            jobs_store.create_job(
                session,
                JobSpec(name=name, entrypoint="/p.py", desired_state=DesiredState.RUNNING),
                cause="test",
                node_id="test",
            )


def _queue(session: Any, job: JobRecord, fence: Fence, reason: str) -> int:
    """The write of the owner under ``fence`` that queues ``job`` again (a fenced write)."""
    return ledger.transition_job(
        session,
        job,
        JobState.QUEUED,
        reason=reason,
        cause="test",
        node_id=fence.node_id,
        fence=fence,
    )


def _owners(store: Store) -> dict[str, tuple[str | None, int]]:
    with store.session() as session:
        jobs, _ = jobs_store.list_jobs(session, limit=1000, offset=0)
    return {j.name: (j.owner, j.owner_epoch) for j in jobs}


def test_claims_select_exactly_the_crc32_slot_of_each_node(store: Store) -> None:
    _create(store, NAMES)
    pool = ["n1", "n2", "n3"]
    with store.transaction() as session:
        claimed = [
            ledger.claim_jobs(session, Claim("default", Fence(node, 7), i, len(pool)))
            for i, node in enumerate(pool)
        ]
    assert sum(claimed) == len(NAMES)
    owners = _owners(store)
    for name in NAMES:
        assert owners[name] == (pool[owner_index(name, len(pool))], 7)
    # the same claims again change nothing
    with store.transaction() as session:
        again = [
            ledger.claim_jobs(session, Claim("default", Fence(node, 7), i, len(pool)))
            for i, node in enumerate(pool)
        ]
    assert again == [0, 0, 0]
    with store.session() as session:
        mine = ledger.jobs_to_reconcile(session, ["default"], Fence("n2", 7))
    assert {j.name for j in mine} == {n for n in NAMES if owner_index(n, 3) == 1}


def test_a_stale_view_never_takes_a_job_back(store: Store) -> None:
    _create(store, NAMES)
    with store.transaction() as session:  # epoch 8: n2 alone owns everything
        assert ledger.claim_jobs(session, Claim("default", Fence("n2", 8), 0, 1)) == len(NAMES)
    with store.transaction() as session:  # n1 still believes epoch 7 and a pool of two
        assert ledger.claim_jobs(session, Claim("default", Fence("n1", 7), 0, 2)) == 0
    assert set(_owners(store).values()) == {("n2", 8)}
    with store.session() as session:
        assert ledger.jobs_to_reconcile(session, ["default"], Fence("n1", 7)) == []


def test_fenced_writes_fail_for_a_stale_claim_and_change_nothing(store: Store) -> None:
    _create(store, ["orders"])
    with store.transaction() as session:
        ledger.claim_jobs(session, Claim("default", Fence("n1", 3), 0, 1))
    with store.session() as session:
        seen_by_n1 = jobs_store.get_job(session, "orders")
    # n2 takes over under a newer epoch (n1 is frozen and does not know yet)
    with store.transaction() as session:
        ledger.claim_jobs(session, Claim("default", Fence("n2", 4), 0, 1))
    with pytest.raises(NotOwner):
        with store.transaction() as session:
            ledger.check_owner(session, seen_by_n1, Fence("n1", 3))
    with pytest.raises(NotOwner):
        with store.transaction() as session:
            _queue(session, seen_by_n1, Fence("n1", 3), "stale")
    with store.session() as session:
        after = jobs_store.get_job(session, "orders")
    assert (after.state, after.version, after.owner, after.owner_epoch) == (
        seen_by_n1.state,
        seen_by_n1.version,
        "n2",
        4,
    )
    with store.session() as session:
        events, _ = journal.list_events(session, "orders")
    assert all(e.node_id != "n1" for e in events)
    # the current owner's write lands; a version conflict is still a plain StaleWrite
    with store.transaction() as session:
        ledger.check_owner(session, after, Fence("n2", 4))
        _queue(session, after, Fence("n2", 4), "go")
    with pytest.raises(StaleWrite) as info:
        with store.transaction() as session:
            _queue(session, after, Fence("n2", 4), "again")
    assert not isinstance(info.value, NotOwner)


def test_claims_are_per_group(store: Store) -> None:
    with store.transaction() as session:
        catalog_store.ensure_group(session, "g2", primary_cluster="local")
        jobs_store.create_job(
            session,
            JobSpec(name="in-g2", entrypoint="/p.py", group="g2"),
            cause="test",
            node_id="test",
        )
    _create(store, ["in-default"])
    with store.transaction() as session:
        assert ledger.claim_jobs(session, Claim("g2", Fence("b1", 1), 0, 1)) == 1
    owners = _owners(store)
    assert owners["in-g2"] == ("b1", 1)
    assert owners["in-default"] == (None, 0)
