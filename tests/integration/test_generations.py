"""Membership generations in the metadata store (SQLite and the real MariaDB): one record per
members znode incarnation, agreed on by racing nodes, and epochs that let jobs be claimed again
after ZooKeeper lost its data."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from scheduler.core.errors import AlreadyExists
from scheduler.core.ownership import Claim, Fence
from scheduler.core.records import JobSpec
from scheduler.decisions.epochs import Incarnation, compose_epoch
from scheduler.store import generations, ledger
from scheduler.store.db import Store
from scheduler.store.jobs import create_job
from scheduler.store.models import MembershipGeneration

pytestmark = pytest.mark.integration

FIRST = Incarnation(czxid=0x100000004, ctime=1_763_000_000_000)
WIPED = Incarnation(czxid=0x4, ctime=1_763_000_600_000)  # recreated: low czxid, later ctime


def resolve(store: Store, incarnation: Incarnation, cversion: int = 1, node: str = "n1") -> int:
    choice = generations.resolve_generation(
        store, "default", incarnation, cversion=cversion, node_id=node
    )
    return choice.generation


def rows(store: Store) -> list[tuple[str, int, int, int, str]]:
    with store.session() as session:
        result = session.execute(
            sa.select(
                MembershipGeneration.group_name,
                MembershipGeneration.generation,
                MembershipGeneration.czxid,
                MembershipGeneration.ctime,
                MembershipGeneration.recorded_by,
            ).order_by(MembershipGeneration.group_name, MembershipGeneration.generation)
        )
        return [tuple(r) for r in result]  # type: ignore[misc]


def test_one_record_per_incarnation_and_a_new_one_outranks_it(store: Store) -> None:
    first = generations.resolve_generation(store, "default", FIRST, cversion=3, node_id="n1")
    assert (first.generation, first.record) == (0, True)
    again = generations.resolve_generation(store, "default", FIRST, cversion=9, node_id="n2")
    assert (again.generation, again.record) == (0, False)  # read, not written

    assert resolve(store, WIPED, node="n2") == 1
    assert resolve(store, FIRST) == 0  # a stale view keeps its old, lower generation
    assert resolve(store, WIPED) == 1
    assert rows(store) == [
        ("default", 0, FIRST.czxid, FIRST.ctime, "n1"),
        ("default", 1, WIPED.czxid, WIPED.ctime, "n2"),
    ]
    # groups are independent; huge zxids fit (BigInteger)
    big = Incarnation(czxid=2**62 + 5, ctime=2**41)
    other = generations.resolve_generation(store, "other", big, cversion=1, node_id="n1")
    assert other.generation == 0
    with store.session() as session:
        assert generations.recorded_generations(session, "other") == {big: 0}


def test_a_record_is_never_overwritten(store: Store) -> None:
    resolve(store, FIRST)
    with pytest.raises(AlreadyExists), store.transaction() as session:
        generations.record_generation(session, "default", WIPED, 0, "n9")  # generation taken
    with pytest.raises(AlreadyExists), store.transaction() as session:
        generations.record_generation(session, "default", FIRST, 5, "n9")  # incarnation taken
    assert [r[1:4] for r in rows(store)] == [(0, FIRST.czxid, FIRST.ctime)]


def test_racing_nodes_agree_on_one_generation(store: Store) -> None:
    """Eight nodes see the same new members znode at once: one records it, all read the same."""
    resolve(store, FIRST)
    barrier = threading.Barrier(8)
    answers: dict[str, generations.GenerationChoice] = {}
    errors: list[BaseException] = []

    def node(name: str) -> None:
        try:
            barrier.wait(timeout=10)
            answers[name] = generations.resolve_generation(
                store, "default", WIPED, cversion=1, node_id=name
            )
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=node, args=(f"n{i}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert {choice.generation for choice in answers.values()} == {1}
    recorders = [name for name, choice in answers.items() if choice.record]
    assert len(recorders) == 1
    assert rows(store)[-1] == ("default", 1, WIPED.czxid, WIPED.ctime, recorders[0])


def test_racing_incarnations_each_get_their_own_generation(store: Store) -> None:
    """Different incarnations recorded at once never share a generation."""
    resolve(store, FIRST)
    seen = [Incarnation(czxid=i, ctime=1_763_001_000_000 + i) for i in range(1, 7)]
    barrier = threading.Barrier(len(seen))
    answers: dict[Incarnation, int] = {}
    errors: list[BaseException] = []

    def node(incarnation: Incarnation) -> None:
        try:
            barrier.wait(timeout=10)
            answers[incarnation] = resolve(store, incarnation, node=f"n{incarnation.czxid}")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=node, args=(i,)) for i in seen]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors, errors
    assert sorted(answers.values()) == list(range(1, len(seen) + 1))
    assert all(resolve(store, i) == g for i, g in answers.items())  # and they stay so


def create_jobs(store: Store, names: list[str]) -> None:
    with store.transaction() as session:
        for name in names:
            create_job(session, JobSpec(name=name, entrypoint="/p.py"), cause="t", node_id="t")


def test_jobs_claimed_before_a_wipe_are_claimed_again_under_the_new_generation(
    store: Store,
) -> None:
    names = [f"wiped-{i}" for i in range(10)]
    create_jobs(store, names)
    old_epoch = compose_epoch(resolve(store, FIRST, cversion=40), 40)
    with store.transaction() as session:
        assert ledger.claim_jobs(session, Claim("default", Fence("a", old_epoch), 0, 1)) == 10

    # ZooKeeper wiped: the recreated members znode's child version starts again near zero
    assert ledger_claim(store, "b", compose_epoch(0, 2)) == 0  # the bare cversion: stuck
    generation = resolve(store, WIPED, cversion=2, node="b")
    new_epoch = compose_epoch(generation, 2)
    assert generation == 1 and new_epoch > old_epoch
    assert ledger_claim(store, "b", new_epoch) == 10
    # a node still holding the old view can take nothing back
    assert ledger_claim(store, "a", old_epoch) == 0
    with store.session() as session:
        assert ledger.jobs_per_owner(session, "default") == {"b": 10}
        assert generations.highest_job_epoch(session, "default") == new_epoch


def ledger_claim(store: Store, node: str, epoch: int) -> int:
    with store.transaction() as session:
        return ledger.claim_jobs(session, Claim("default", Fence(node, epoch), 0, 1))


def test_first_record_of_an_upgraded_deployment(store: Store) -> None:
    """Jobs claimed by a version without generations (epoch = cversion): with ZooKeeper intact
    the epochs stay what they were; after an earlier wipe they rise above the stored ones."""
    create_jobs(store, ["up-1"])
    assert ledger_claim(store, "a", 9) == 1
    with store.session() as session:
        assert generations.highest_job_epoch(session, "default") == 9
    assert (
        generations.resolve_generation(store, "default", FIRST, cversion=12, node_id="a").generation
        == 0
    )
    # had ZooKeeper been wiped before the upgrade: no record yet, the child version back at 3
    with store.transaction() as session:
        session.execute(sa.delete(MembershipGeneration))
    assert resolve(store, WIPED, cversion=3) == 1 and compose_epoch(1, 3) > 9
