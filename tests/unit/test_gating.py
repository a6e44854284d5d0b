"""The submission gate in a tick (scheduler/loops/gate.py) against an in-memory gate store, and the
reconciler holding back what the gate does not admit (the fake ledger of tests/support)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from scheduler.core.ownership import Claim, Fence
from scheduler.core.states import JobState
from scheduler.decisions.gate import Bucket, Loads, QueueRow
from scheduler.decisions.planning import RestartPolicy
from scheduler.loops.gate import SubmissionGate
from scheduler.loops.reconciler import Reconciler
from tests.support.fakes import Clock, FakeBackend, FakeBackends, FakeLedger, cluster

ME = Fence("node-a", 4)


@dataclass
class FakeGateStore:
    buckets: dict[str, Bucket] = field(default_factory=dict)
    loads: Loads = field(default_factory=Loads)
    #: tokens other nodes take between this node's read and its take
    stolen: dict[str, int] = field(default_factory=dict)
    rows: dict[int, QueueRow] = field(default_factory=dict)
    reads: int = 0
    publishes: int = 0
    events: list[str] = field(default_factory=list)

    def read(
        self, businesses: Iterable[str], clusters: Iterable[str]
    ) -> tuple[dict[str, Bucket], Loads]:
        self.reads += 1
        return {b: v for b, v in self.buckets.items() if b in set(businesses)}, self.loads

    def take(self, wanted: Mapping[str, int], now: datetime) -> dict[str, int]:
        granted = {}
        for business, n in wanted.items():
            bucket = self.buckets[business].refilled(now.timestamp())
            bucket = bucket.take(self.stolen.pop(business, 0))
            got = max(0, min(n, bucket.available))
            self.buckets[business] = bucket.take(got)
            granted[business] = got
        return granted

    def publish(
        self,
        rows: Mapping[int, QueueRow],
        cleared: Iterable[int],
        events: Mapping[int, str] | None = None,
    ) -> None:
        self.publishes += 1
        self.events += list((events or {}).values())
        for job_id in cleared:
            self.rows.pop(job_id, None)
        self.rows.update(rows)


CLOCK = Clock()


def world(gate_store: FakeGateStore, jobs: int) -> tuple[Reconciler, FakeLedger, FakeBackend]:
    clock = CLOCK
    ledger = FakeLedger(clock, node_id=ME.node_id)
    backend = FakeBackend(calls=ledger.calls)
    for i in range(jobs):
        ledger.add_job(f"job-{i}-{id(gate_store)}")
    rec = Reconciler(
        ledger,
        FakeBackends(c1=backend),
        node_id=ME.node_id,
        group="default",
        claim=lambda: Claim("default", ME, 0, 1),
        policy=RestartPolicy(),
        clock=clock.now,
        monotonic=clock.monotonic,
        gate=SubmissionGate(gate_store),
    )
    return rec, ledger, backend


def gate_events(store: FakeGateStore) -> list[str]:
    return [m for m in store.events if m.startswith("waiting at the submission gate: ")]


def test_the_jobs_the_gate_holds_back_stay_queued_with_a_place_and_a_reason() -> None:
    store = FakeGateStore(buckets={"b": Bucket(rate=0.001, burst=2, tokens=2, at=0)})
    rec, ledger, backend = world(store, 5)
    stats = rec.tick()
    assert stats.submissions == 2 and stats.gated == 3
    states = sorted(j.state for j in ledger.jobs.values())
    assert states.count(JobState.QUEUED) == 3
    assert sorted(r.position for r in store.rows.values()) == [1, 2, 3]
    assert {r.kind for r in store.rows.values()} == {"rate"}
    assert all("business b is at its rate" in r.reason for r in store.rows.values())
    assert len(gate_events(store)) == 3  # one per job held back
    again = rec.tick()
    assert again.submissions == 0 and again.gated == 3
    assert len(gate_events(store)) == 3  # the same wait: no new event
    assert len([c for c in ledger.calls if c.startswith("backend.submit")]) == 2


def test_a_cluster_cap_changes_the_reason_and_an_event_says_so() -> None:
    store = FakeGateStore(buckets={"b": Bucket(rate=0.001, burst=1, tokens=1, at=0)})
    rec, ledger, _ = world(store, 3)
    rec.tick()
    assert len(gate_events(store)) == 2
    # the bucket refills, but the cluster is full now
    store.buckets["b"] = replace(store.buckets["b"], rate=1000.0)
    CLOCK.advance(1.0)
    ledger.clusters["c1"] = replace(cluster("c1"), max_concurrent_submissions=1)
    store.loads = Loads(in_flight={"c1": 1})
    stats = rec.tick()
    assert stats.submissions == 0
    assert {r.kind for r in store.rows.values()} == {"cluster"}
    assert len(gate_events(store)) == 4  # rate -> cluster: one more each
    store.loads = Loads(in_flight={"c1": 0})
    CLOCK.advance(1.0)
    assert rec.tick().submissions == 1  # the cap leaves room for one
    store.loads = Loads(in_flight={"c1": 1})
    CLOCK.advance(1.0)
    rec.tick()
    assert len(store.rows) == 1 and next(iter(store.rows.values())).position == 1


def test_tokens_other_nodes_took_meanwhile_hold_back_the_last_admitted() -> None:
    store = FakeGateStore(
        buckets={"b": Bucket(rate=0.001, burst=3, tokens=3, at=0)}, stolen={"b": 2}
    )
    rec, ledger, _ = world(store, 4)
    stats = rec.tick()
    assert stats.submissions == 1 and stats.gated == 3
    assert sorted(r.position for r in store.rows.values()) == [1, 2, 3]


def test_admitted_jobs_lose_their_queue_rows_and_without_quotas_nothing_waits() -> None:
    store = FakeGateStore(buckets={"b": Bucket(rate=0.001, burst=1, tokens=1, at=0)})
    rec, ledger, _ = world(store, 2)
    rec.tick()
    assert len(store.rows) == 1
    store.buckets["b"] = replace(store.buckets["b"], rate=1000.0)
    CLOCK.advance(1.0)
    rec.tick()
    assert store.rows == {}
    # a business without a quota, a cluster without caps: one read a tick, nobody waits
    bare = FakeGateStore()
    rec, _, _ = world(bare, 3)
    assert rec.tick().submissions == 3 and bare.reads == 1 and bare.rows == {}
    assert rec.tick().submissions == 0 and bare.reads == 1  # nothing to submit: no read
