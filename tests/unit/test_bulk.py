"""Bulk operations' pure parts: the selector (every field, labels, clusters), the plan (order,
skip and refuse with their reasons, the digest, the item cap), and the item step machine (every
decision legal, cancel, completion per command, timeouts)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.directive import Directive, Phase
from scheduler.core.errors import IllegalTransition, InvalidInput
from scheduler.core.states import DesiredState, JobState, Priority
from scheduler.decisions.operations import bulk
from scheduler.decisions.operations.model import ItemRecord, OperationKind
from tests.unit.test_failover import CLUSTERS, GROUPS, NOW, cluster, item_record, job, run

K = OperationKind


def stopped(name: str, **changes: Any) -> Any:
    return job(
        name,
        desired_state=DesiredState.STOPPED,
        state=JobState.STOPPED,
        current_run=None,
        current_run_id=None,
        **changes,
    )


# -- the selector --------------------------------------------------------------------------------


def test_every_field_of_the_selector_must_match() -> None:
    j = job("orders-eu", team="ads", business="web", labels={"env": "prod", "tier": "gold"})
    match = bulk.Selector(
        teams=frozenset({"ads"}),
        businesses=frozenset({"web"}),
        groups=frozenset({"g"}),
        clusters=frozenset({"A"}),
        states=frozenset({JobState.RUNNING}),
        priorities=frozenset({Priority.HIGH}),
        name_prefix="orders-",
        labels=("env=prod", "tier", "!canary", "zone!=eu"),
        jobs=frozenset({"orders-eu"}),
    )
    assert match.matches(j, GROUPS)
    for change in (
        {"teams": frozenset({"pay"})},
        {"businesses": frozenset({"money"})},
        {"groups": frozenset({"k"})},
        {"clusters": frozenset({"B"})},
        {"states": frozenset({JobState.FAILED})},
        {"priorities": frozenset({Priority.LOW})},
        {"name_prefix": "orders-us"},
        {"labels": ("env=dev",)},
        {"labels": ("!tier",)},
        {"jobs": frozenset({"other"})},
    ):
        miss = bulk.Selector(**{**match.__dict__, **change})
        assert not miss.matches(j, GROUPS), change


def test_the_cluster_is_where_the_job_is() -> None:
    on_b = job("x", cluster="A", current_run=run("x", cluster="B"))
    unplaced = stopped("y", cluster=None)  # at rest, no cluster: its group's primary
    b = bulk.Selector(clusters=frozenset({"B"}))
    a = bulk.Selector(clusters=frozenset({"A"}))
    assert b.matches(on_b, GROUPS) and not a.matches(on_b, GROUPS)
    assert a.matches(unplaced, GROUPS)


def test_an_empty_selector_or_a_bad_label_requirement_is_refused() -> None:
    with pytest.raises(InvalidInput, match="select the jobs"):
        bulk.Selector().check()
    with pytest.raises(InvalidInput):
        bulk.Selector(labels=("=x",)).check()
    assert bulk.Selector(all=True).check().describe() == "every job"
    assert bulk.Selector(name_prefix="a-", teams=frozenset({"t"})).describe() == "team t, name a-*"


@given(
    teams=st.frozensets(st.sampled_from(["a", "b", "c"])),
    states=st.frozensets(st.sampled_from(list(JobState))),
    prefix=st.sampled_from(["", "j", "j1", "x"]),
    labels=st.lists(st.sampled_from(["env=prod", "env", "!env", "env!=dev"]), max_size=2),
    all_=st.booleans(),
)
def test_selector_round_trips_through_json(
    teams: frozenset[str], states: frozenset[JobState], prefix: str, labels: list[str], all_: bool
) -> None:
    selector = bulk.Selector(
        teams=teams, states=states, name_prefix=prefix, labels=tuple(labels), all=all_
    )
    assert bulk.Selector.from_json(selector.to_json()) == selector


# -- the plan ------------------------------------------------------------------------------------


def test_plan_order_actions_and_reasons() -> None:
    jobs = [
        job("b-high"),
        job("a-normal", priority=Priority.NORMAL),
        job("a-high"),
        job("low", priority=Priority.LOW),
        stopped("stopped"),
        job("failed", state=JobState.FAILED, current_run=None, current_run_id=None),
        job("moving", directive=Directive(3, 1, Phase.DRAIN, "A", "B")),
    ]
    every = bulk.Selector(all=True)
    restart = bulk.plan_bulk(K.RESTART, every, jobs, GROUPS, CLUSTERS)
    assert [(i.job_name, i.action.value) for i in restart.items] == [
        ("a-high", "restart"),
        ("b-high", "restart"),
        ("failed", "restart"),
        ("moving", "skip"),
        ("stopped", "skip"),
        ("a-normal", "restart"),
        ("low", "restart"),
    ]
    why = {i.job_name: i.why for i in restart.items}
    assert why["a-high"] == "RUNNING: will replace run 7 on A by a new run"
    assert why["stopped"] == "stopped (STOPPED): start it instead: skipped"
    assert why["moving"] == "in failover 3: skipped"
    start = bulk.plan_bulk(K.START, every, jobs, GROUPS, CLUSTERS)
    actions = {i.job_name: i.action.value for i in start.items}
    assert actions["stopped"] == "start" and actions["failed"] == "start"  # at rest: started
    assert actions["a-high"] == "skip"
    assert start.counts() == {"skip": 5, "start": 2}
    stop = bulk.plan_bulk(K.STOP, every, jobs, GROUPS, CLUSTERS)
    assert {i.job_name for i in stop.items if i.action == bulk.Action.SKIP} == {
        "stopped",
        "moving",
    }


def test_no_start_or_restart_on_an_abnormal_cluster_but_a_stop_goes() -> None:
    clusters = {**CLUSTERS, "A": cluster("A", "VOTE_ABNORMAL")}
    jobs = [job("x"), stopped("y")]
    every = bulk.Selector(all=True)
    restart = bulk.plan_bulk(K.RESTART, every, jobs, GROUPS, clusters)
    assert restart.items[0].action == bulk.Action.REFUSE
    assert restart.items[0].why == (
        "cluster A is VOTE_ABNORMAL: refused (fail the job over instead)"
    )
    start = bulk.plan_bulk(K.START, every, jobs, GROUPS, clusters)
    assert [i.action for i in start.items] == [bulk.Action.SKIP, bulk.Action.REFUSE]
    stop = bulk.plan_bulk(K.STOP, every, jobs, GROUPS, clusters)
    assert [i.action for i in stop.items] == [bulk.Action.STOP, bulk.Action.SKIP]


def test_digest_home_group_and_teams() -> None:
    jobs = [job("x", team="a"), job("y", team="b", group="k")]
    every = bulk.Selector(all=True)
    one = bulk.plan_bulk(K.STOP, every, jobs, GROUPS, CLUSTERS)
    assert (
        one.digest == bulk.plan_bulk(K.STOP, every, list(reversed(jobs)), GROUPS, CLUSTERS).digest
    )
    assert one.digest != bulk.plan_bulk(K.RESTART, every, jobs, GROUPS, CLUSTERS).digest
    assert one.teams == {"a", "b"} and one.home_group("default") == "g"
    empty = bulk.plan_bulk(K.STOP, bulk.Selector(jobs=frozenset({"none"})), jobs, GROUPS, CLUSTERS)
    assert empty.items == () and empty.home_group("default") == "default"


def test_too_many_jobs_in_one_operation_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk, "MAX_ITEMS", 2)
    with pytest.raises(InvalidInput, match="narrow it"):
        bulk.plan_bulk(K.STOP, bulk.Selector(all=True), [job(f"j{n}") for n in range(3)],
                       GROUPS, CLUSTERS)  # fmt: skip


# -- the item step machine -----------------------------------------------------------------------


def item(step: bulk.Step, action: bulk.Action, **changes: Any) -> ItemRecord:
    return item_record(step.value, action.value, **changes)


TIMING = bulk.Timing(start_timeout=60, stop_timeout=30)


def decide(
    i: ItemRecord, j: Any, kind: OperationKind = K.RESTART, cancelling: bool = False
) -> bulk.Decision:
    return bulk.decide(i, bulk.Facts(j, cancelling, NOW), TIMING, kind)


def test_pending_items() -> None:
    P, A = bulk.Step.PENDING, bulk.Action  # noqa: N806
    assert decide(item(P, A.SKIP, why="x"), job("j")) == bulk.Advance(bulk.Step.SKIPPED, "x")
    assert decide(item(P, A.REFUSE, why="y"), job("j")) == bulk.Advance(bulk.Step.REFUSED, "y")
    assert isinstance(decide(item(P, A.RESTART), job("j"), cancelling=True), bulk.Advance)
    assert decide(item(P, A.RESTART), None).step == bulk.Step.FAILED  # type: ignore[union-attr]
    moving = job("j", directive=Directive(3, 1, Phase.DRAIN, "A", "B"))
    assert decide(item(P, A.RESTART), moving).step == bulk.Step.SKIPPED  # type: ignore[union-attr]
    # someone stopped it since the plan: nothing to restart
    gone = decide(item(P, A.RESTART), stopped("j"))
    assert gone == bulk.Advance(
        bulk.Step.SKIPPED, "stopped (STOPPED): start it instead meanwhile: nothing to do"
    )
    apply = decide(item(P, A.RESTART), job("j"))
    assert isinstance(apply, bulk.Apply) and apply.command.value == "restart"


def test_waiting_items_end_when_the_job_got_there() -> None:
    W, A = bulk.Step.WAITING, bulk.Action  # noqa: N806
    replaced = item(W, A.RESTART, detail={"run_before": 7})
    assert isinstance(decide(replaced, job("j")), bulk.Wait)  # still run 7
    new = job("j", current_run=run("j", run_id=8), current_run_id=8)
    assert decide(replaced, new) == bulk.Advance(
        bulk.Step.DONE, "RUNNING with run 8 (replaced run 7)"
    )
    starting = job("j", state=JobState.SUBMITTING, state_reason="queued by the gate")
    assert decide(item(W, A.START), starting, K.START) == bulk.Wait(
        "the job is SUBMITTING: queued by the gate"
    )
    assert decide(item(W, A.START), job("j"), K.START).step == bulk.Step.DONE  # type: ignore[union-attr]
    gave_up = job("j", state=JobState.FAILED, state_reason="gave up after 3 attempts")
    assert decide(item(W, A.START), gave_up, K.START) == bulk.Advance(
        bulk.Step.FAILED, "the job FAILED: gave up after 3 attempts"
    )
    stopping = job("j", desired_state=DesiredState.STOPPED, state=JobState.STOPPING)
    assert isinstance(decide(item(W, A.STOP), stopping, K.STOP), bulk.Wait)
    assert decide(item(W, A.STOP), stopped("j"), K.STOP) == bulk.Advance(
        bulk.Step.DONE, "stopped (STOPPED)"
    )
    assert decide(item(W, A.STOP), job("j"), K.STOP) == bulk.Advance(
        bulk.Step.DONE, "started again by an operator meanwhile"
    )


def test_waiting_items_time_out() -> None:
    W, A = bulk.Step.WAITING, bulk.Action  # noqa: N806
    long_ago = NOW - timedelta(seconds=61)
    late = decide(item(W, A.START, entered=long_ago), job("j", state=JobState.QUEUED), K.START)
    assert late == bulk.Advance(bulk.Step.FAILED, "not RUNNING within 60 s (the job is QUEUED)")
    stopping = job("j", desired_state=DesiredState.STOPPED, state=JobState.STOPPING)
    late = decide(item(W, A.STOP, entered=NOW - timedelta(seconds=31)), stopping, K.STOP)
    assert late == bulk.Advance(bulk.Step.FAILED, "not stopped within 30 s (the job is STOPPING)")


@given(
    step=st.sampled_from(list(bulk.Step)),
    action=st.sampled_from(list(bulk.Action)),
    kind=st.sampled_from(sorted(bulk.KINDS)),
    cancelling=st.booleans(),
    state=st.sampled_from(list(JobState)),
    desired=st.sampled_from(list(DesiredState)),
    deleted=st.booleans(),
    age=st.integers(0, 120),
)
def test_every_decision_is_a_legal_transition(
    step: bulk.Step,
    action: bulk.Action,
    kind: OperationKind,
    cancelling: bool,
    state: JobState,
    desired: DesiredState,
    deleted: bool,
    age: int,
) -> None:
    j = None if deleted else job("j", state=state, desired_state=desired)
    i = item(step, action, entered=NOW - timedelta(seconds=age), detail={"run_before": 7})
    decision = decide(i, j, kind, cancelling)
    if isinstance(decision, bulk.Advance):
        bulk.transition(step, decision.step)
    elif isinstance(decision, bulk.Apply):
        assert step == bulk.Step.PENDING and not cancelling
        bulk.transition(step, bulk.Step.WAITING)
    if step.is_final:
        assert decision == bulk.Wait("")


def test_illegal_step_changes_raise() -> None:
    with pytest.raises(IllegalTransition):
        bulk.transition(bulk.Step.WAITING, bulk.Step.CANCELLED)
    with pytest.raises(IllegalTransition):
        bulk.transition(bulk.Step.DONE, bulk.Step.WAITING)
