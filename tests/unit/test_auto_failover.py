"""Automatic failover's decisions (scheduler/decisions/operations/auto.py) and how the executor
records them: created or held, and why -- paused platform-wide, no target, the target abnormal,
the target cooling down after an abnormal period of its own (unless an operator cleared it);
each decision recorded once per change."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from scheduler.core.operations_ledger import AutoPause, FailoverPolicy, Recovery
from scheduler.core.ownership import Claim, Fence
from scheduler.core.states import Priority
from scheduler.decisions.operations import auto
from scheduler.loops.operations import Executor
from tests.support.fakes import Clock
from tests.support.operations_fakes import FakeCheckpoints, FakeOperationsLedger
from tests.unit.test_failover import CLUSTERS, GROUPS, NOW, TIMING, cluster

POLICY = auto.Policy("g", True, 60.0, Priority.HIGH)
SICK = {**CLUSTERS, "A": cluster("A", "VOTE_ABNORMAL")}
INCIDENT = {"A": (17, NOW - timedelta(seconds=120))}
HOUR = 3600.0


def decide(**kw: object) -> list[tuple[str, str, str]]:
    clusters = kw.pop("clusters", SICK)
    found = auto.decide([POLICY], GROUPS, clusters, INCIDENT, NOW, **kw)  # type: ignore[arg-type]
    return [(d.verdict, d.code, d.why) for d, _ in found]


def test_a_due_failover_is_created_unless_held_and_says_why() -> None:
    (created,) = auto.decide([POLICY], GROUPS, SICK, INCIDENT, NOW, cooldown_s=HOUR)
    decision, failover = created
    assert decision.verdict == auto.CREATED and failover is not None
    assert decision.incident == failover.incident == "auto:g:A:17"
    assert (decision.group, decision.cluster, decision.target) == ("g", "A", "B")

    pause = AutoPause("alice", "maintenance window INC-9", NOW - timedelta(minutes=5))
    ((verdict, code, why),) = decide(paused=pause)
    assert (verdict, code) == (auto.HELD, auto.PAUSED)
    assert "paused by alice" in why and "INC-9" in why and "cluster A VOTE_ABNORMAL" in why

    ((verdict, code, why),) = decide(clusters={**SICK, "B": cluster("B", "MANUAL_ABNORMAL")})
    assert (verdict, code) == (auto.HELD, auto.TARGET_ABNORMAL) and "B is MANUAL_ABNORMAL" in why

    ((lone, failover),) = auto.decide([replace(POLICY, group="h")], GROUPS, SICK, INCIDENT, NOW)
    assert (lone.verdict, lone.code, failover) == (auto.HELD, auto.NO_TARGET, None)


def test_never_back_onto_a_cluster_abnormal_within_the_cool_down_unless_cleared() -> None:
    """B failed an hour ago minus a minute and recovered: A failing now does not move its jobs
    onto B automatically; an operator's clear (or the cool-down's end) lets it."""
    back = Recovery(NOW - timedelta(seconds=HOUR - 60))
    ((verdict, code, why),) = decide(cooldown_s=HOUR, recoveries={"B": back})
    assert (verdict, code) == (auto.HELD, auto.TARGET_COOLING_DOWN)
    assert "its target B was abnormal itself until" in why
    assert "drover failover auto clear B" in why
    cleared = replace(back, cleared=True, by="bob")
    assert decide(cooldown_s=HOUR, recoveries={"B": cleared})[0][0] == auto.CREATED
    assert decide(cooldown_s=60.0, recoveries={"B": back})[0][0] == auto.CREATED  # over
    assert decide(cooldown_s=0.0, recoveries={"B": back})[0][0] == auto.CREATED  # no cool-down
    # a manual mark is an operator's: the automatic failover waits for nobody then
    manual = {**CLUSTERS, "A": cluster("A", "MANUAL_ABNORMAL")}
    assert decide(clusters=manual) == []


def test_the_executor_records_each_decision_once_and_creates_once_per_incident() -> None:
    clock = Clock()
    ledger = FakeOperationsLedger(clock, node_id="n1")
    ledger.add_job("orders")
    ledger.policies["g"] = FailoverPolicy("g", True, 0.0, Priority.HIGH)
    ledger.clusters["A"] = replace(ledger.clusters["A"], health="VOTE_ABNORMAL")
    ledger.incidents["A"] = (7, clock.now())
    ledger.paused = AutoPause("alice", "drill", clock.now())
    executor = Executor(
        ledger, node_id="n1", timing=TIMING, checkpoints=FakeCheckpoints(),
        clock=clock.now, monotonic=clock.monotonic, threads=1,
    )  # fmt: skip
    claim = {"g": Claim("g", Fence("n1", 1), 0, 1)}
    for _ in range(3):
        executor.round(claim)
    assert [(d.verdict, d.code) for d in ledger.decisions] == [(auto.HELD, auto.PAUSED)]
    assert ledger.operations == {}
    ledger.paused = None  # resumed
    for _ in range(3):
        executor.round(claim)
    (op,) = ledger.operations.values()
    assert [(d.verdict, d.operation_id) for d in ledger.decisions] == [
        (auto.HELD, None),
        (auto.CREATED, op.id),
    ]
    # unreachable (the executor's probe says so), not self-fencing: refused, never forced
    assert "(1 items: 1 refuse)" in ledger.decisions[-1].why
    # planned once: the rounds after it leave the incident's failover to its executor
    assert ledger.calls.count("candidates") == 1 and ledger.calls.count("create") == 1
    executor.close()
