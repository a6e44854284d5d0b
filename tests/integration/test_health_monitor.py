"""The cluster monitor's rounds without Ray, on a real store (SQLite and MariaDB): two nodes'
monitors share the store, their clusters' probes are scripted and the clock is theirs."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.core.backend import ProbeResult
from scheduler.core.clock import iso
from scheduler.core.records import ClusterRecord
from scheduler.decisions import catalog
from scheduler.decisions.health import ClusterHealth, HealthPolicy
from scheduler.loops.monitor import HealthMonitor
from scheduler.store import catalog as catalog_store
from scheduler.store import health as health_store
from scheduler.store.db import Store

pytestmark = pytest.mark.integration

POLICY = HealthPolicy(vote_freshness=10, threshold_count=1000, threshold_window=60, quiet_period=30)
START = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
LIVE = frozenset({"n1", "n2"})


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class FakeCluster:
    """A cluster's probe as one node sees it: ok, failing, or hanging until released."""

    def __init__(self) -> None:
        self.ok = True
        self.hangs = False
        self.release = threading.Event()
        self.probes = 0

    def probe(self) -> ProbeResult:
        self.probes += 1
        if self.hangs:
            self.release.wait(5)
        return ProbeResult(self.ok, "ok" if self.ok else "REST: connection refused", 0.01)


@pytest.fixture
def world(
    store: Store,
) -> Iterator[tuple[Store, Clock, dict[str, FakeCluster], dict[str, HealthMonitor]]]:
    with store.transaction() as s:
        for name in ("c1", "c2", "elsewhere"):
            catalog_store.create_cluster(
                s,
                name,
                catalog.ClusterSpec(kind="local", storage_root=f"/data/{name}"),
            )
        catalog_store.create_group(s, "g", primary_cluster="c1", failover_cluster="c2")
    clock = Clock()
    fakes = {name: FakeCluster() for name in ("c1", "c2", "elsewhere")}

    def backend_for(cluster: ClusterRecord) -> FakeCluster:
        return fakes[cluster.name]

    monitors = {
        node: HealthMonitor(
            store,
            backend_for,  # type: ignore[arg-type]
            node_id=node,
            policy=POLICY,
            probe_timeout=0.5,
            clock=clock,
        )
        for node in sorted(LIVE)
    }
    try:
        yield store, clock, fakes, monitors
    finally:
        for fake in fakes.values():
            fake.release.set()
        for monitor in monitors.values():
            monitor.close()


def health(store: Store, cluster: str = "c1") -> ClusterHealth:
    with store.session() as s:
        return health_store.health_of(s, cluster)[0]


def test_down_by_majority_then_normal_after_the_quiet_period(
    world: tuple[Store, Clock, dict[str, FakeCluster], dict[str, HealthMonitor]],
) -> None:
    store, clock, fakes, monitors = world
    n1, n2 = monitors["n1"], monitors["n2"]
    rounds = n1.round(["g"], LIVE)
    assert set(rounds) == {"c1", "c2"}  # the group's primary and failover, nothing else
    assert fakes["elsewhere"].probes == 0
    assert rounds["c1"].health == "NORMAL" and rounds["c1"].changed is None
    assert n2.round(["g"], LIVE)["c1"].health == "NORMAL"

    fakes["c1"].ok = False
    clock.advance(1)
    assert n1.round(["g"], LIVE)["c1"].health == "NORMAL"  # n2's fresh vote says ok: 1 of 2
    clock.advance(2)
    down = n2.round(["g"], LIVE)["c1"]
    assert down.changed == "NORMAL -> VOTE_ABNORMAL" and not down.ok
    assert health(store, "c2") == ClusterHealth.NORMAL

    fakes["c1"].ok = True
    for _ in range(3):  # recovering: both see it ok, but a probe failed less than 30 s ago
        clock.advance(5)
        assert n1.round(["g"], LIVE)["c1"].health == "VOTE_ABNORMAL"
        assert n2.round(["g"], LIVE)["c1"].health == "VOTE_ABNORMAL"
    clock.advance(16)  # 31 s after the last failure
    back = n1.round(["g"], LIVE)["c1"]
    assert back.changed == "VOTE_ABNORMAL -> NORMAL"
    with store.session() as s:
        events = health_store.list_health_events(s, "c1")
    assert [(e.from_state, e.to_state, e.actor) for e in events] == [
        (ClusterHealth.VOTE_ABNORMAL, ClusterHealth.NORMAL, "n1"),
        (ClusterHealth.NORMAL, ClusterHealth.VOTE_ABNORMAL, "n2"),
    ]
    assert events[0].evidence["last_failure"] == iso(START + timedelta(seconds=3))


def test_without_a_membership_view_it_votes_but_never_decides(
    world: tuple[Store, Clock, dict[str, FakeCluster], dict[str, HealthMonitor]],
) -> None:
    store, clock, fakes, monitors = world
    fakes["c1"].ok = False
    for monitor in monitors.values():
        assert monitor.round(["g"], None)["c1"].changed is None
    assert health(store) == ClusterHealth.NORMAL
    with store.session() as s:
        votes = health_store.votes_since(s, "c1", START - timedelta(seconds=1))
    assert sorted((v.node_id, v.ok) for v in votes) == [("n1", False), ("n2", False)]


def test_a_probe_that_hangs_is_a_failed_vote_and_holds_up_no_other_cluster(
    world: tuple[Store, Clock, dict[str, FakeCluster], dict[str, HealthMonitor]],
) -> None:
    store, clock, fakes, monitors = world
    fakes["c1"].hangs = True
    rounds = monitors["n1"].round(["g"], frozenset({"n1"}))
    assert not rounds["c1"].ok and rounds["c1"].detail == "no answer within 0.5s"
    assert rounds["c1"].changed == "NORMAL -> VOTE_ABNORMAL"
    assert rounds["c2"].ok and rounds["c2"].health == "NORMAL"


def test_prune_keeps_the_votes_decisions_look_at(
    world: tuple[Store, Clock, dict[str, FakeCluster], dict[str, HealthMonitor]],
) -> None:
    store, clock, fakes, monitors = world
    monitors["n1"].round(["g"], LIVE)
    clock.advance(601)
    monitors["n1"].round(["g"], LIVE)
    assert monitors["n1"].prune() == 2  # the first round's votes on c1 and c2
    with store.session() as s:
        assert len(health_store.votes_since(s, "c1", START)) == 1
