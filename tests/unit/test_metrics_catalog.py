"""The metric catalog and the actors' figures: names follow Prometheus conventions,
label sets are bounded, the families cross process boundaries."""

from __future__ import annotations

import pickle
import re

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from scheduler.core.metrics import (
    CATALOG,
    ReconcilerMetrics,
    actor_up_family,
    membership_families,
    names_in,
)
from scheduler.decisions.membership import GroupView, MemberInfo, MembershipSnapshot, Mode, NodeCard
from scheduler.loops.reconciler import TickStats

NAME = re.compile(r"^drover_[a-z0-9_]+$")
UNBOUNDED = {"job", "run", "name", "app_id", "submission_id", "token"}


def test_catalog_follows_the_conventions() -> None:
    names = [spec.name for spec in CATALOG]
    assert len(names) == len(set(names))
    for spec in CATALOG:
        assert NAME.match(spec.name), spec.name
        assert spec.kind in {"counter", "gauge", "histogram"}, spec
        assert spec.help and not spec.help[0].islower(), spec
        assert not set(spec.labels) & UNBOUNDED, f"{spec.name}: per-job labels"
        if spec.kind == "counter":
            assert spec.name.endswith("_total"), spec.name
        else:
            assert not spec.name.endswith("_total"), spec.name
        if spec.kind == "histogram":
            assert spec.name.endswith("_seconds"), spec.name


def test_reconciler_figures_from_tick_stats() -> None:
    metrics = ReconcilerMetrics()
    stats = TickStats(jobs=3, actions=2, errors=1, seconds=0.02, rows_read=3)
    stats.phases.update({"claim": 0.001, "observe": 0.01})
    stats.action_kinds.update({"Submit": 1, "Kill": 1})
    metrics.observe("g1", stats, at=1000.0)
    metrics.observe("g1", TickStats(paused=True, seconds=0.001))
    families = pickle.loads(pickle.dumps(metrics.collect()))  # they cross to the API process
    assert names_in(families) <= {spec.name for spec in CATALOG}
    registry = CollectorRegistry()
    registry.register(_Fixed(families))
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(generate_latest(registry).decode())
        for s in f.samples
    }
    assert samples[("drover_reconcile_ticks_total", (("group", "g1"), ("outcome", "error")))] == 1
    assert samples[("drover_reconcile_ticks_total", (("group", "g1"), ("outcome", "paused")))] == 1
    kill = ("drover_reconcile_actions_total", (("group", "g1"), ("kind", "Kill")))
    assert samples[kill] == 1
    assert samples[("drover_reconcile_jobs", (("group", "g1"),))] == 3  # a paused tick keeps it
    count = ("drover_reconcile_phase_duration_seconds_count", (("group", "g1"), ("phase", "claim")))
    assert samples[count] == 1
    metrics.forget("g1")
    assert "drover_reconcile_jobs" not in {
        s.name for f in metrics.collect() for s in f.samples if s.labels.get("group") == "g1"
    }


class _Fixed:
    def __init__(self, families: list) -> None:  # type: ignore[type-arg]
        self.families = families

    def collect(self):  # type: ignore[no-untyped-def]
        return iter(self.families)


def _snapshot(connection: str = "CONNECTED") -> MembershipSnapshot:
    members = (
        MemberInfo("a1", "active", "az-a", "local", "http://a1", 0.0),
        MemberInfo("a2", "active", "az-a", "local", "http://a2", 0.0),
        MemberInfo("b1", "backup", "az-b", "local", "http://b1", 0.0),
    )
    view = GroupView("g1", members, epoch=5, session_id=1)
    return MembershipSnapshot(
        Mode.ZOOKEEPER,
        connection,
        NodeCard("b1", "http://b1", "az-b", "local"),
        {"g1": view},
        2.5,
        lease_age_seconds=0.7,
    )


def _values(families: list) -> dict[tuple[str, tuple[str, ...]], float]:  # type: ignore[type-arg]
    return {(s.name, tuple(s.labels.values())): s.value for f in families for s in f.samples}


def test_membership_figures_from_a_snapshot() -> None:
    values = _values(membership_families(_snapshot(), lease_seconds=5.0))
    assert values[("drover_zookeeper_connection_state", ("CONNECTED",))] == 1
    assert values[("drover_zookeeper_connection_state", ("SUSPENDED",))] == 0
    assert values[("drover_membership_epoch", ("g1",))] == 5
    assert values[("drover_membership_members", ("g1", "active"))] == 2
    assert values[("drover_membership_members", ("g1", "backup"))] == 1
    assert values[("drover_membership_pool_size", ("g1",))] == 2
    assert values[("drover_membership_in_pool", ("g1",))] == 0  # a backup while actives live
    assert values[("drover_claim_lease_age_seconds", ())] == 0.7
    assert values[("drover_claim_lease_seconds", ())] == 5.0


def test_membership_not_answering_is_unknown() -> None:
    values = _values(membership_families(None, lease_seconds=5.0))
    assert values == {
        ("drover_zookeeper_connection_state", (s,)): 1.0 if s == "UNKNOWN" else 0.0
        for s in ("CONNECTED", "SUSPENDED", "LOST", "NONE", "UNKNOWN")
    }


def test_actor_up() -> None:
    family = actor_up_family({"membership": {"alive": True}, "reconciler": {"alive": False}})
    assert {s.labels["actor"]: s.value for s in family.samples} == {
        "membership": 1.0,
        "reconciler": 0.0,
    }
