"""The failover's pure parts: the plan (order, selection, what and why, the digest), the item step
machine (every decision legal, cancel, fence rules), steering of a job's owner by its directive,
and automatic failover's timing."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.backend import AppState, AppStatus, app_name_for
from scheduler.core.directive import Directive, Phase
from scheduler.core.errors import IllegalTransition, InvalidInput
from scheduler.core.ownership import owner_index
from scheduler.core.records import ClusterRecord, Failures, GroupRecord, JobRecord, RunRecord
from scheduler.core.states import DesiredState, JobState, Priority, RunState
from scheduler.decisions import steering
from scheduler.decisions.actions import CloseRun, FenceRun, Hold, Kill, Noop, SetState, Submit
from scheduler.decisions.operations import auto
from scheduler.decisions.operations import failover as fo
from scheduler.decisions.operations.model import (
    OPERATION_TRANSITIONS,
    ItemRecord,
    OperationState,
    StepEntry,
    executor_index,
    final_state,
    transition_operation,
)
from scheduler.decisions.planning import RestartPolicy as Policy
from scheduler.decisions.planning import plan

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


def cluster(name: str, health: str = "NORMAL") -> ClusterRecord:
    return ClusterRecord(
        name, "standalone", f"spark://{name}:7077", f"http://{name}:6066", f"http://{name}:8080",
        "az", "cloud", f"file:///ck/{name}", health, 0,
    )  # fmt: skip


CLUSTERS = {"A": cluster("A"), "B": cluster("B"), "C": cluster("C")}
GROUPS = {
    "g": GroupRecord("g", "A", "B"),
    "h": GroupRecord("h", "A", None),
    "k": GroupRecord("k", "B", "A"),
}


def run(job: str, run_id: int = 7, **changes: Any) -> RunRecord:
    fields: dict[str, Any] = {
        "id": run_id,
        "job_name": job,
        "attempt": 1,
        "generation": 0,
        "cluster": "A",
        "node_id": "n1",
        "owner_epoch": 1,
        "fencing_token": f"tok-{run_id}",
        "app_name": app_name_for(job, run_id),
        "checkpoint_location": f"file:///ck/A/{job}/checkpoint",
        "submission_id": f"driver-{run_id}",
        "app_id": f"app-{run_id}",
        "state": RunState.RUNNING,
        "reason": "",
        "exit_code": None,
        "created_at": NOW - timedelta(minutes=10),
        "submitted_at": NOW - timedelta(minutes=10),
        "started_at": NOW - timedelta(minutes=9),
        "ended_at": None,
        "fence_checked_at": NOW - timedelta(minutes=9),
    }
    fields.update(changes)
    return RunRecord(**fields)


def job(name: str, **changes: Any) -> JobRecord:
    fields: dict[str, Any] = {
        "id": abs(hash(name)) % 100000,
        "name": name,
        "group": "g",
        "team": "t",
        "business": "b",
        "priority": Priority.HIGH,
        "entrypoint": "/p.py",
        "args": (),
        "conf": {},
        "checkpoint_location": "",
        "desired_state": DesiredState.RUNNING,
        "state": JobState.RUNNING,
        "state_reason": "",
        "cluster": "A",
        "current_run_id": 7,
        "generation": 0,
        "attempts_reset_at": NOW - timedelta(hours=1),
        "not_before": None,
        "owner": "n1",
        "owner_epoch": 1,
        "version": 3,
        "spec_version": 1,
        "created_at": NOW - timedelta(hours=1),
        "updated_at": NOW - timedelta(minutes=1),
        "current_run": run(name),
    }
    fields.update(changes)
    return JobRecord(**fields)


def request(**selector: Any) -> fo.Request:
    return fo.Request("A", None, fo.Selector(**selector) if selector else fo.Selector(all=True))


# -- the plan ------------------------------------------------------------------------------------


def test_order_actions_and_reasons() -> None:
    jobs = [
        job("b-high"),
        job("a-normal", priority=Priority.NORMAL),
        job("a-high"),
        job("low", priority=Priority.LOW),
        job("no-target", group="h"),
        job("stopped", desired_state=DesiredState.STOPPED, state=JobState.STOPPED,
            current_run=None, current_run_id=None),
        job("queued", state=JobState.QUEUED, current_run=None, current_run_id=None),
        job("elsewhere", cluster="C", current_run=run("elsewhere", cluster="C")),
    ]  # fmt: skip
    plan_ = fo.plan_failover(
        request(all=True), jobs, GROUPS, CLUSTERS, source_reachable=True, now=NOW
    )
    assert [(i.job_name, i.action) for i in plan_.items] == [
        ("a-high", fo.Action.KILL),
        ("b-high", fo.Action.KILL),
        ("no-target", fo.Action.SKIP),
        ("queued", fo.Action.MOVE),
        ("stopped", fo.Action.MOVE),
        ("a-normal", fo.Action.KILL),
        ("low", fo.Action.KILL),
    ]
    why = {i.job_name: i.why for i in plan_.items}
    assert why["a-high"].startswith("source A reachable: kill run 7 and confirm it gone")
    assert why["no-target"] == "no failover cluster for group h: skipped"
    assert why["queued"] == "no application on A: start on B from its checkpoint"
    assert why["stopped"].startswith("stopped: switch to B")
    assert plan_.home_group("default") == "g"


def test_unreachable_source_fence_refuse_and_force() -> None:
    abnormal = {**CLUSTERS, "A": cluster("A", "VOTE_ABNORMAL")}
    jobs = [
        job("fencing"),
        job("plain", current_run=run("plain", fence_checked_at=None)),
        job("young", current_run=run("young", fence_checked_at=None, started_at=NOW)),
    ]
    normal = fo.plan_failover(request(), jobs, GROUPS, CLUSTERS, source_reachable=False, now=NOW)
    assert {i.action for i in normal.items} == {fo.Action.REFUSE}
    assert "unreachable but NORMAL: refused (mark it abnormal" in normal.items[0].why

    plan_ = fo.plan_failover(request(), jobs, GROUPS, abnormal, source_reachable=False, now=NOW)
    by = {i.job_name: i for i in plan_.items}
    assert by["fencing"].action == fo.Action.FENCE
    assert by["fencing"].why.startswith("source A unreachable and VOTE_ABNORMAL: will fence run")
    assert by["plain"].action == fo.Action.REFUSE
    assert by["plain"].why.startswith(
        "not self-fencing and source A unreachable: refused unless forced"
    )
    assert by["young"].why.startswith("not known to be self-fencing yet")

    forced = replace(
        request(), force=fo.Force(frozenset({"plain"}), "AZ a is powered off", "user:oncall")
    )
    plan_ = fo.plan_failover(forced, jobs, GROUPS, abnormal, source_reachable=False, now=NOW)
    by = {i.job_name: i for i in plan_.items}
    assert by["plain"].action == fo.Action.FENCE and by["plain"].forced
    assert "fence forced by user:oncall (acknowledged: AZ a is powered off)" in by["plain"].why
    assert by["young"].action == fo.Action.REFUSE
    assert (
        plan_.digest
        != fo.plan_failover(
            request(), jobs, GROUPS, abnormal, source_reachable=False, now=NOW
        ).digest
    )


def test_target_abnormal_or_busy_and_explicit_target() -> None:
    jobs = [job("j1"), job("j2", directive=Directive(4, 9, Phase.DRAIN, "A", "B"))]
    sick = {**CLUSTERS, "B": cluster("B", "MANUAL_ABNORMAL")}
    plan_ = fo.plan_failover(request(), jobs, GROUPS, sick, source_reachable=True, now=NOW)
    assert [(i.action, i.why) for i in plan_.items] == [
        (fo.Action.REFUSE, "target B is MANUAL_ABNORMAL: refused"),
        (fo.Action.SKIP, "already in failover 4: skipped"),
    ]
    explicit = fo.Request("A", "C", fo.Selector(all=True))
    plan_ = fo.plan_failover(explicit, jobs[:1], GROUPS, CLUSTERS, source_reachable=True, now=NOW)
    assert plan_.items[0].target == "C"


def test_fail_back_targets_the_primary() -> None:
    moved = job("j", cluster="B", current_run=run("j", cluster="B"))
    plan_ = fo.plan_failover(
        fo.Request("B", None, fo.Selector(all=True)),
        [moved],
        GROUPS,
        CLUSTERS,
        source_reachable=True,
        now=NOW,
    )
    assert [(i.source, i.target) for i in plan_.items] == [("B", "A")]


def test_request_checks() -> None:
    with pytest.raises(InvalidInput, match="select the jobs"):
        fo.Request("A").check()
    with pytest.raises(InvalidInput, match="differ"):
        fo.Request("A", "A", fo.Selector(all=True)).check()
    with pytest.raises(InvalidInput, match="acknowledgement"):
        fo.Request("A", None, fo.Selector(all=True), fo.Force(frozenset({"*"}), " ")).check()
    with pytest.raises(InvalidInput, match="no cluster"):
        fo.plan_failover(fo.Request("Z"), [], GROUPS, CLUSTERS, source_reachable=True, now=NOW)


NAMES = st.text(alphabet="abcxyz-", min_size=1, max_size=6)
JOB_SPECS = st.lists(
    st.tuples(
        NAMES,
        st.sampled_from(list(Priority)),
        st.sampled_from(["g", "h", "k"]),
        st.sampled_from(["A", "B", "C", None]),
        st.booleans(),
        st.sampled_from(["t1", "t2"]),
    ),
    max_size=25,
    unique_by=lambda spec: spec[0],
)
SELECTORS = st.builds(
    fo.Selector,
    priorities=st.frozensets(st.sampled_from(list(Priority))),
    teams=st.frozensets(st.sampled_from(["t1", "t2"])),
    groups=st.frozensets(st.sampled_from(["g", "h", "k"])),
    all=st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(specs=JOB_SPECS, selector=SELECTORS, reachable=st.booleans(), health=st.sampled_from(
    ["NORMAL", "VOTE_ABNORMAL", "MANUAL_ABNORMAL"]))  # fmt: skip
def test_plan_properties(
    specs: list[tuple[str, Priority, str, str | None, bool, str]],
    selector: fo.Selector,
    reachable: bool,
    health: str,
) -> None:
    """Exactly the selected jobs on the source, each once, ordered by priority then name; the
    same inputs give the same plan (the dry run is what runs); a job is never planned to move
    to its source, and a kill is only planned when the source answered."""
    jobs = []
    for n, (name, priority, group, where, live, team) in enumerate(specs):
        current = run(name, n + 1, cluster=where or "A") if live else None
        jobs.append(
            job(name, id=n + 1, priority=priority, group=group, cluster=where, team=team,
                current_run=current, current_run_id=current.id if current else None)
        )  # fmt: skip
    clusters = {**CLUSTERS, "A": cluster("A", health)}
    req = fo.Request("A", None, selector)
    plan_ = fo.plan_failover(req, jobs, GROUPS, clusters, source_reachable=reachable, now=NOW)
    expected = sorted(
        (j for j in jobs if fo.current_cluster(j, GROUPS) == "A" and selector.matches(j)),
        key=fo.sort_key,
    )
    assert [i.job_name for i in plan_.items] == [j.name for j in expected]
    again = fo.plan_failover(
        req, list(reversed(jobs)), GROUPS, clusters, source_reachable=reachable, now=NOW
    )
    assert again == plan_ and again.digest == plan_.digest
    for item in plan_.items:
        assert item.target != "A"
        if item.action == fo.Action.KILL:
            assert reachable and item.source_run_id is not None
        if item.action == fo.Action.FENCE:
            assert not reachable and health != "NORMAL"
        if item.action == fo.Action.MOVE:
            assert item.source_run_id is None


# -- the step machine ----------------------------------------------------------------------------


def item(step: fo.Step, action: fo.Action = fo.Action.KILL, **changes: Any) -> ItemRecord:
    moved = {"target_cluster": "B", "source_run_id": 7}
    return item_record(step.value, action.value, **{**moved, **changes})


def item_record(step: str, action: str, **changes: Any) -> ItemRecord:
    """An operation's item at ``step`` since ``entered`` (5 s before NOW), job ``j`` on cluster A
    with no target; ``changes`` set any other field."""
    entered = changes.pop("entered", NOW - timedelta(seconds=5))
    fields: dict[str, Any] = {
        "id": 9,
        "operation_id": 4,
        "position": 0,
        "job_id": 1,
        "job_name": "j",
        "action": action,
        "why": "planned",
        "step": step,
        "history": (StepEntry(step, entered, ""),),
        "attempts": 0,
        "last_error": "",
        "source_cluster": "A",
        "target_cluster": None,
        "source_run_id": None,
        "target_run_id": None,
        "detail": {},
        "not_before": None,
        "version": 1,
        "updated_at": entered,
    }
    fields.update(changes)
    return ItemRecord(**fields)


DRAIN = Directive(4, 9, Phase.DRAIN, "A", "B")
TIMING = fo.Timing(fence_exit_grace=10, drain_timeout=60, start_timeout=60)


def facts(j: JobRecord | None, source_run: RunRecord | None = None, **kw: Any) -> fo.Facts:
    return fo.Facts(j, source_run, CLUSTERS, kw.get("cancelling", False), kw.get("now", NOW))


def test_pending_starts_draining_with_the_directive() -> None:
    decision = fo.decide(item(fo.Step.PENDING), facts(job("j")), TIMING)
    assert isinstance(decision, fo.Advance) and decision.step == fo.Step.DRAINING
    assert isinstance(decision.job_write, fo.SetDirective)
    assert decision.job_write.directive == DRAIN
    skipped = fo.decide(item(fo.Step.PENDING, fo.Action.SKIP), facts(None), TIMING)
    assert isinstance(skipped, fo.Advance) and skipped.step == fo.Step.SKIPPED
    moved = fo.decide(item(fo.Step.PENDING), facts(job("j", cluster="C", current_run=None)), TIMING)
    assert isinstance(moved, fo.Advance) and moved.step == fo.Step.SKIPPED
    cancel = fo.decide(item(fo.Step.PENDING), facts(job("j"), cancelling=True), TIMING)
    assert isinstance(cancel, fo.Advance) and cancel.step == fo.Step.CANCELLED
    gone = fo.decide(item(fo.Step.PENDING), facts(None), TIMING)
    assert isinstance(gone, fo.Advance) and gone.step == fo.Step.FAILED


def test_draining_waits_then_fences_or_checkpoints() -> None:
    live = job("j", directive=DRAIN)
    assert isinstance(fo.decide(item(fo.Step.DRAINING), facts(live), TIMING), fo.Wait)
    late = fo.decide(item(fo.Step.DRAINING), facts(live, now=NOW + timedelta(seconds=120)), TIMING)
    assert isinstance(late, fo.Advance) and late.step == fo.Step.FAILED
    assert isinstance(late.job_write, fo.SetDirective) and late.job_write.directive is None
    killed = run("j", state=RunState.KILLED, ended_at=NOW)
    closed = job("j", directive=DRAIN, state=JobState.QUEUED, current_run=killed)
    go = fo.decide(item(fo.Step.DRAINING), facts(closed, killed), TIMING)
    assert isinstance(go, fo.Advance) and go.step == fo.Step.CHECKPOINT
    fenced = replace(killed, state=RunState.LOST, fenced_at=NOW)
    go = fo.decide(item(fo.Step.DRAINING), facts(closed, fenced), TIMING)
    assert isinstance(go, fo.Advance) and go.step == fo.Step.FENCING
    cancel = fo.decide(item(fo.Step.DRAINING), facts(closed, killed, cancelling=True), TIMING)
    assert isinstance(cancel, fo.Advance) and cancel.step == fo.Step.CANCELLED
    assert isinstance(cancel.job_write, fo.SetDirective) and cancel.job_write.directive is None
    stolen = fo.decide(item(fo.Step.DRAINING), facts(job("j")), TIMING)  # no directive: FAIL
    assert isinstance(stolen, fo.Advance) and stolen.step == fo.Step.FAILED


def test_fencing_waits_for_the_superseded_answer_and_the_grace() -> None:
    fenced = run("j", state=RunState.LOST, ended_at=NOW, fenced_at=NOW)
    j = job("j", directive=DRAIN, state=JobState.QUEUED, current_run=fenced)
    waiting = fo.decide(item(fo.Step.FENCING), facts(j, fenced), TIMING)
    assert isinstance(waiting, fo.Wait) and "no blind limit is set" in waiting.why
    told = replace(fenced, fence_superseded_at=NOW + timedelta(seconds=3))
    early = fo.decide(
        item(fo.Step.FENCING), facts(j, told, now=NOW + timedelta(seconds=12)), TIMING
    )
    assert isinstance(early, fo.Wait)
    later = fo.decide(
        item(fo.Step.FENCING), facts(j, told, now=NOW + timedelta(seconds=13)), TIMING
    )
    assert isinstance(later, fo.Advance) and later.step == fo.Step.CHECKPOINT
    assert "answered 'superseded'" in later.note
    # the blind limit: surely expired after limit + idle check + grace since the fence
    blind = replace(j, conf={fo.MAX_BLIND_PROPERTY: "60", fo.IDLE_CHECK_PROPERTY: "5"})
    at = NOW + timedelta(seconds=74)
    assert isinstance(fo.decide(item(fo.Step.FENCING), facts(blind, fenced, now=at), TIMING),
                      fo.Wait)  # fmt: skip
    at = NOW + timedelta(seconds=75)
    done = fo.decide(item(fo.Step.FENCING), facts(blind, fenced, now=at), TIMING)
    assert isinstance(done, fo.Advance) and "blind limit of 60 s surely expired" in done.note
    # forced, and the run is not self-fencing: not waited for
    plain = replace(fenced, fence_checked_at=None)
    forced = replace(j, directive=replace(DRAIN, force_unfenced=True))
    done = fo.decide(item(fo.Step.FENCING), facts(forced, plain), TIMING)
    assert isinstance(done, fo.Advance) and "forced by the operator" in done.note
    # a self-fencing run is waited for even when forced
    assert isinstance(fo.decide(item(fo.Step.FENCING), facts(forced, fenced), TIMING), fo.Wait)


def test_checkpoint_switch_and_start() -> None:
    killed = run("j", state=RunState.KILLED, ended_at=NOW)
    j = job("j", directive=DRAIN, state=JobState.QUEUED, current_run=killed)
    want = fo.decide(item(fo.Step.CHECKPOINT), facts(j, killed), TIMING)
    assert want == fo.MakeAvailable(
        "j", "file:///ck/A/j/checkpoint", "file:///ck/B/j/checkpoint", "file:///ck/B"
    )
    switch = fo.decide(item(fo.Step.SWITCHING, detail={"checkpoint_to": "x"}), facts(j), TIMING)
    assert isinstance(switch, fo.Advance) and switch.step == fo.Step.STARTING
    assert isinstance(switch.job_write, fo.SwitchCluster) and switch.job_write.target == "B"
    assert switch.job_write.directive == replace(DRAIN, phase=Phase.RUN)
    assert switch.fields == {"last_run_before_switch": 7}
    stopped = replace(j, desired_state=DesiredState.STOPPED)
    only = fo.decide(item(fo.Step.SWITCHING), facts(stopped), TIMING)
    assert isinstance(only, fo.Advance) and only.step == fo.Step.DONE
    assert isinstance(only.job_write, fo.SwitchCluster) and only.job_write.directive is None

    on_b = run("j", 8, cluster="B", state=RunState.RUNNING)
    started = item(fo.Step.STARTING, detail={"last_run_before_switch": 7})
    run_d = replace(DRAIN, phase=Phase.RUN)
    starting = job("j", cluster="B", directive=run_d, state=JobState.STARTING,
                   current_run=replace(on_b, state=RunState.STARTING))  # fmt: skip
    noted = fo.decide(started, facts(starting), TIMING)
    assert isinstance(noted, fo.Record) and noted.fields == {"target_run_id": 8}
    running = replace(starting, state=JobState.RUNNING, current_run=on_b)
    done = fo.decide(started, facts(running), TIMING)
    assert isinstance(done, fo.Advance) and done.step == fo.Step.DONE
    assert isinstance(done.job_write, fo.SetDirective) and done.job_write.directive is None
    # the old run on the source is not taken for the new one
    old = replace(running, current_run=replace(killed, cluster="B"))
    assert not isinstance(fo.decide(started, facts(old), TIMING), fo.Advance)
    slow = fo.decide(started, facts(starting, now=NOW + timedelta(seconds=120)), TIMING)
    assert isinstance(slow, fo.Advance) and slow.step == fo.Step.FAILED


JOB_STATES = st.sampled_from(list(JobState))
RUN_STATES = st.sampled_from(list(RunState))


@settings(max_examples=300, deadline=None)
@given(
    step=st.sampled_from(list(fo.Step)),
    action=st.sampled_from(list(fo.Action)),
    job_state=JOB_STATES,
    run_state=RUN_STATES,
    run_cluster=st.sampled_from(["A", "B"]),
    directive=st.sampled_from(
        [None, DRAIN, replace(DRAIN, phase=Phase.RUN), replace(DRAIN, operation_id=5)]
    ),  # fmt: skip
    fenced=st.booleans(),
    told=st.booleans(),
    cancelling=st.booleans(),
    desired=st.sampled_from(list(DesiredState)),
    later=st.integers(0, 2000),
)
def test_every_decision_is_a_legal_step(
    step: fo.Step,
    action: fo.Action,
    job_state: JobState,
    run_state: RunState,
    run_cluster: str,
    directive: Directive | None,
    fenced: bool,
    told: bool,
    cancelling: bool,
    desired: DesiredState,
    later: int,
) -> None:
    """Whatever the store says, a decision is a legal transition; no job write happens outside
    the item's own directive; a switch only when the source run is closed."""
    current = run(
        "j",
        cluster=run_cluster,
        state=run_state,
        ended_at=NOW if run_state.is_final else None,
        fenced_at=NOW if fenced and run_state.is_final else None,
        fence_superseded_at=NOW if told else None,
    )
    j = job("j", state=job_state, desired_state=desired, current_run=current, directive=directive)
    it = item(step, action)
    decision = fo.decide(it, facts(j, current, cancelling=cancelling,
                                   now=NOW + timedelta(seconds=later)), TIMING)  # fmt: skip
    if step.is_final:
        assert isinstance(decision, fo.Wait)
        return
    if isinstance(decision, fo.Advance):
        fo.transition(step, decision.step)
        if isinstance(decision.job_write, fo.SwitchCluster):
            assert step == fo.Step.SWITCHING and current.state.is_final is not False
        if decision.job_write is not None and step != fo.Step.PENDING:
            assert directive is not None and directive.item_id == it.id
            assert directive.operation_id == it.operation_id
        if cancelling and step == fo.Step.PENDING:
            assert decision.step in (fo.Step.CANCELLED, fo.Step.SKIPPED, fo.Step.REFUSED)
    with pytest.raises(IllegalTransition):
        fo.transition(fo.Step.DONE, fo.Step.PENDING)


def test_operation_states_and_executor_slot() -> None:
    for state, nexts in OPERATION_TRANSITIONS.items():
        for new in OperationState:
            if new == state or new in nexts:
                assert transition_operation(state, new) == new
            else:
                with pytest.raises(IllegalTransition):
                    transition_operation(state, new)
    assert executor_index(12, 3) == owner_index("12", 3)
    assert final_state(["DONE", "SKIPPED"], failed_steps=fo.FAILED_STEPS, cancelled=False) == (
        "SUCCEEDED"
    )
    assert final_state(["DONE", "REFUSED"], failed_steps=fo.FAILED_STEPS, cancelled=False) == (
        "FAILED"
    )
    assert final_state(["CANCELLED"], failed_steps=fo.FAILED_STEPS, cancelled=True) == "CANCELLED"


# -- steering: the owner's side ------------------------------------------------------------------


def test_steer_drain_kills_holds_and_never_resubmits() -> None:
    draining = job("j", directive=DRAIN)
    alive = AppStatus(AppState.RUNNING, "app-7")
    assert isinstance(steering.steer(draining, alive), Kill)
    action = plan(draining, alive, failures=Failures(), policy=Policy(), now=NOW)
    assert isinstance(action, Kill) and "draining" in action.reason
    gone = AppStatus(AppState.KILLED)
    stopping = replace(draining, state=JobState.STOPPING,
                       current_run=replace(draining.current_run, state=RunState.STOPPING))  # type: ignore[arg-type]  # fmt: skip
    closed = plan(stopping, gone, failures=Failures(), policy=Policy(), now=NOW)
    assert isinstance(closed, CloseRun) and closed.job_state == JobState.QUEUED
    never = replace(draining, state=JobState.SUBMITTING, current_run=run(
        "j", state=RunState.SUBMITTING, submission_id=None))  # fmt: skip
    lost = plan(never, AppStatus(AppState.NOT_FOUND), failures=Failures(), policy=Policy(),
                now=NOW)  # fmt: skip
    assert isinstance(lost, CloseRun) and lost.run_state == RunState.LOST
    queued = replace(draining, state=JobState.QUEUED, current_run=replace(
        draining.current_run, state=RunState.KILLED, ended_at=NOW))  # type: ignore[arg-type]  # fmt: skip
    held = plan(queued, None, failures=Failures(), policy=Policy(), now=NOW)
    assert isinstance(held, Hold) and "held until it is switched" in held.reason
    assert isinstance(plan(replace(queued, state_reason=held.reason), None, failures=Failures(),
                           policy=Policy(), now=NOW), Noop)  # fmt: skip
    failed = replace(queued, state=JobState.FAILED)
    assert isinstance(plan(failed, None, failures=Failures(), policy=Policy(), now=NOW),
                      SetState)  # fmt: skip
    # RUN: the usual plan, which submits on the job's (switched) cluster
    switched = replace(queued, cluster="B", directive=replace(DRAIN, phase=Phase.RUN))
    assert isinstance(plan(switched, None, failures=Failures(), policy=Policy(), now=NOW),
                      Submit)  # fmt: skip


def test_when_unreachable_fences_only_abnormal_self_fencing_or_forced() -> None:
    draining = job("j", directive=DRAIN, state=JobState.UNKNOWN)
    normal = steering.when_unreachable(draining, abnormal=False, health="NORMAL", now=NOW)
    assert isinstance(normal, Hold) and "which is NORMAL" in normal.reason
    fence = steering.when_unreachable(draining, abnormal=True, health="VOTE_ABNORMAL", now=NOW)
    assert isinstance(fence, FenceRun) and "self-fencing" in fence.reason
    plain = replace(draining, current_run=run("j", fence_checked_at=None))
    refused = steering.when_unreachable(plain, abnormal=True, health="VOTE_ABNORMAL", now=NOW)
    assert isinstance(refused, Hold) and "not fenced unless forced" in refused.reason
    forced = replace(plain, directive=replace(DRAIN, force_unfenced=True))
    assert isinstance(
        steering.when_unreachable(forced, abnormal=True, health="VOTE_ABNORMAL", now=NOW),
        FenceRun,
    )
    assert steering.when_unreachable(job("j"), abnormal=True, health="X", now=NOW) is None
    assert steering.fence_path(draining) == [JobState.QUEUED]
    assert steering.fence_path(job("j")) == [JobState.STOPPING, JobState.QUEUED]


def test_directive_round_trip() -> None:
    d = Directive(1, 2, Phase.RUN, "A", "B", True)
    assert Directive.from_json(d.to_json()) == d
    assert Directive.from_json(None) is None
    with pytest.raises(InvalidInput):
        Directive.from_json({"phase": "drain"})


# -- automatic failover --------------------------------------------------------------------------


def test_auto_failover_after_the_delay_of_an_automatic_state_only() -> None:
    began = NOW - timedelta(seconds=100)
    policy = auto.Policy("g", True, 120.0, Priority.NORMAL)
    sick = {**CLUSTERS, "A": cluster("A", "VOTE_ABNORMAL")}
    assert auto.due([policy], GROUPS, sick, {"A": (17, began)}, NOW) == []
    later = NOW + timedelta(seconds=21)
    (due,) = auto.due([policy], GROUPS, sick, {"A": (17, began)}, later)
    assert due.incident == "auto:g:A:17" and due.request.target == "B"
    assert due.request.selector.priorities == {Priority.HIGH, Priority.NORMAL}
    assert due.request.selector.groups == {"g"}
    manual = {**CLUSTERS, "A": cluster("A", "MANUAL_ABNORMAL")}
    assert auto.due([policy], GROUPS, manual, {"A": (17, began)}, later) == []
    off = replace(policy, enabled=False)
    assert auto.due([off], GROUPS, sick, {"A": (17, began)}, later) == []
    both = {**sick, "B": cluster("B", "THRESHOLD_ABNORMAL")}
    assert auto.due([policy], GROUPS, both, {"A": (17, began)}, later) == []
