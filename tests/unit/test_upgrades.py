"""Graceful stops, revisions and upgrades: the pure decisions (``scheduler.decisions.planning``,
``scheduler.decisions.revisions``) and the runtime's side (``pipelines/drover_runtime.py``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines import drover_runtime as rt
from scheduler.core.backend import AppState, AppStatus
from scheduler.core.states import DesiredState, JobState, RunState
from scheduler.decisions import revisions
from scheduler.decisions.actions import (
    CloseRun,
    Drain,
    Kill,
    Noop,
    Observed,
    RollBack,
    Submit,
    UpgradeDone,
)
from scheduler.decisions.planning import RestartPolicy, timed
from tests.unit.test_planning import NOW, POLICY, do_plan, make_job, make_run

GRACEFUL = replace(POLICY, stop_grace=30.0)
CHECKED = NOW - timedelta(minutes=3)
ALIVE = AppStatus(AppState.RUNNING, app_id="app-7")


def self_fencing_run(**changes: Any) -> Any:
    return make_run(fence_checked_at=CHECKED, **changes)


# -- graceful stop: the plan ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes", [{"desired_state": DesiredState.STOPPED}, {"generation": 2}], ids=["stop", "restart"]
)
def test_a_self_fencing_run_no_longer_wanted_is_asked_to_stop(changes: dict[str, Any]) -> None:
    job = make_job(run=self_fencing_run(), **changes)
    action = do_plan(job, ALIVE, policy=GRACEFUL)
    assert isinstance(action, Drain)
    assert action.deadline == NOW + timedelta(seconds=30)


def test_the_request_grace_wins_over_the_node_default() -> None:
    job = make_job(run=self_fencing_run(), generation=2, grace_seconds=5.0)
    action = do_plan(job, ALIVE, policy=GRACEFUL)
    assert isinstance(action, Drain) and action.deadline == NOW + timedelta(seconds=5)


@pytest.mark.parametrize(
    ("run", "grace", "policy"),
    [
        (make_run(), None, GRACEFUL),  # a plain pipeline: it never asks the fence
        (self_fencing_run(), 0.0, GRACEFUL),  # the request said: kill at once
        (self_fencing_run(), None, POLICY),  # the node's default is 0
        (self_fencing_run(state=RunState.STARTING), None, GRACEFUL),  # not running yet
    ],
    ids=["plain", "grace-0", "no-default", "starting"],
)
def test_kill_directly(run: Any, grace: float | None, policy: RestartPolicy) -> None:
    job = make_job(run=run, generation=2, grace_seconds=grace)
    assert isinstance(do_plan(job, ALIVE, policy=policy), Kill)


def test_a_draining_run_waits_until_its_deadline_then_is_killed() -> None:
    run = self_fencing_run(drain_deadline=NOW + timedelta(seconds=1))
    job = make_job(run=run, generation=2, state=JobState.STOPPING)
    assert isinstance(do_plan(job, ALIVE, policy=GRACEFUL), Noop)
    assert timed(job)  # never quiet: time alone moves its plan
    late = replace(job, current_run=replace(run, drain_deadline=NOW))
    assert isinstance(do_plan(late, ALIVE, policy=GRACEFUL), Kill)


def test_a_stop_without_grace_kills_a_draining_run_at_once() -> None:
    run = self_fencing_run(drain_deadline=NOW + timedelta(seconds=60))
    job = make_job(run=run, generation=2, state=JobState.STOPPING, grace_seconds=0.0)
    assert isinstance(do_plan(job, ALIVE, policy=GRACEFUL), Kill)


def test_a_draining_run_stays_draining_when_the_job_is_wanted_again() -> None:
    run = self_fencing_run(drain_deadline=NOW + timedelta(seconds=10))
    job = make_job(run=run, state=JobState.STOPPING)  # same generation, desired RUNNING
    action = do_plan(job, ALIVE, policy=GRACEFUL)
    assert isinstance(action, Noop) and not isinstance(action, Observed)


@pytest.mark.parametrize("desired", [DesiredState.RUNNING, DesiredState.STOPPED])
def test_a_gracefully_stopped_run_closes_without_a_failure(desired: DesiredState) -> None:
    run = self_fencing_run(drain_deadline=NOW + timedelta(seconds=10), stop_batch=41)
    job = make_job(run=run, generation=2, state=JobState.STOPPING, desired_state=desired)
    action = do_plan(job, AppStatus(AppState.FINISHED, exit_code=0), policy=GRACEFUL)
    assert isinstance(action, CloseRun)
    assert action.run_state == RunState.FINISHED
    assert not action.counts_as_failure
    assert "after batch 41" in action.reason
    expected = JobState.QUEUED if desired == DesiredState.RUNNING else JobState.STOPPED
    assert action.job_state == expected


def test_after_the_graceful_stop_the_new_run_is_submitted() -> None:
    closed = self_fencing_run(state=RunState.FINISHED, ended_at=NOW, drain_deadline=NOW)
    job = make_job(run=closed, generation=2, state=JobState.QUEUED)
    assert isinstance(do_plan(job, None, policy=GRACEFUL), Submit)


# -- revisions -----------------------------------------------------------------------------------


def spec(**changes: Any) -> dict[str, Any]:
    return {**revisions.spec_of(make_job()), **changes}


def test_diff_lists_fields_and_map_keys() -> None:
    before = spec(args=["--rate", "2"], conf={"a": "1", "b": "2"}, labels={"env": "prod"})
    after = spec(args=["--rate", "3"], conf={"a": "1", "b": "3", "c": "4"}, labels={})
    changes = revisions.diff(before, after)
    assert [(c.path, c.kind) for c in changes] == [
        ("args", "changed"),
        ("conf.b", "changed"),
        ("conf.c", "added"),
        ("labels.env", "removed"),
    ]
    assert changes[0].before == ["--rate", "2"] and changes[0].after == ["--rate", "3"]


def test_a_field_missing_from_an_old_revision_counts_as_null() -> None:
    old = {k: v for k, v in spec().items() if k != "stall_after"}
    assert revisions.diff(old, spec()) == []
    assert [c.path for c in revisions.diff(old, spec(stall_after=60.0))] == ["stall_after"]


specs = st.fixed_dictionaries(
    {
        "entrypoint": st.sampled_from(["file:///a.py", "file:///b.py"]),
        "args": st.lists(st.sampled_from(["-x", "1", "2"]), max_size=3),
        "conf": st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["1", "2"])),
        "priority": st.sampled_from(["high", "normal"]),
        "labels": st.dictionaries(st.sampled_from(["env"]), st.sampled_from(["x", "y"])),
        "stall_after": st.none() | st.sampled_from([30.0, 60.0]),
    }
)


@given(specs, specs)
def test_rollback_changes_turn_one_spec_into_the_other(a: dict, b: dict) -> None:
    current, target = spec(**a), spec(**b)
    changes = revisions.rollback_changes(current, target)
    assert {**current, **changes} == target
    assert (changes == {}) == (revisions.diff(current, target) == [])
    assert set(changes) == revisions.changed_fields(current, target)


def test_only_fields_the_application_was_started_with_make_an_upgrade() -> None:
    running = make_job(run=make_run())
    assert revisions.is_upgrade(running, {"args"})
    assert revisions.is_upgrade(running, {"conf", "labels"})
    assert not revisions.is_upgrade(running, {"labels", "priority", "stall_after"})
    stopped = make_job(desired_state=DesiredState.STOPPED, state=JobState.STOPPED)
    assert not revisions.is_upgrade(stopped, {"args"})


# -- upgrades with a deadline --------------------------------------------------------------------


def pending(**changes: Any) -> Any:
    fields: dict[str, Any] = {
        "upgrade_deadline": NOW + timedelta(seconds=60),
        "upgrade_from": 1,
        "generation": 2,
        "spec_version": 2,
    }
    fields.update(changes)
    return make_job(**fields)


def test_an_upgrade_whose_run_is_running_is_done() -> None:
    job = pending(run=make_run(generation=2), state=JobState.RUNNING)
    assert revisions.upgrade_step(job, NOW, given_up=False) == revisions.UpgradeStep.DONE
    assert isinstance(do_plan(job, ALIVE), UpgradeDone)


def test_an_upgrade_still_draining_the_old_run_waits() -> None:
    job = pending(run=self_fencing_run(generation=1), state=JobState.STOPPING)
    assert revisions.upgrade_step(job, NOW, given_up=False) == revisions.UpgradeStep.WAIT
    assert timed(job)


def test_an_upgrade_past_its_deadline_rolls_back() -> None:
    job = pending(run=make_run(generation=2, state=RunState.STARTING), state=JobState.STARTING)
    late = NOW + timedelta(seconds=61)
    assert revisions.upgrade_step(job, late, given_up=False) == revisions.UpgradeStep.ROLL_BACK
    action = do_plan(job, AppStatus(AppState.STARTING), policy=POLICY)
    assert not isinstance(action, RollBack)  # not yet
    from scheduler.core.records import Failures
    from scheduler.decisions.planning import plan

    action = plan(job, AppStatus(AppState.STARTING), failures=Failures(), policy=POLICY, now=late)
    assert isinstance(action, RollBack) and action.revision == 1
    assert "rolled back to revision 1" in action.reason


def test_an_upgrade_that_gave_up_rolls_back_at_once() -> None:
    job = pending(state=JobState.FAILED, state_reason="gave up after 3 failures within 600 s: x")
    assert revisions.upgrade_step(job, NOW, given_up=True) == revisions.UpgradeStep.ROLL_BACK
    assert isinstance(do_plan(job), RollBack)


def test_a_stop_ends_a_pending_upgrade() -> None:
    job = pending(desired_state=DesiredState.STOPPED, state=JobState.STOPPED)
    assert isinstance(do_plan(job), UpgradeDone)


# -- the runtime's side --------------------------------------------------------------------------


def test_the_fence_answer_asks_the_run_to_stop() -> None:
    body = {"job": "j", "fencing_token": "t", "current_run_id": 1, "stop": True}
    assert rt.fence_verdict("j", "t", 200, body)[0] is rt.Verdict.STOP
    assert rt.fence_verdict("j", "t", 200, {**body, "stop": False})[0] is rt.Verdict.CURRENT
    # a stop meant for the current run never keeps a superseded one going
    assert rt.fence_verdict("j", "old", 200, body)[0] is rt.Verdict.SUPERSEDED


class _Stopper:
    """A fence check that asks for a stop at ``at`` (a batch id)."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.asked: list[int] = []
        self.reported: list[int] = []

    def __call__(self, ctx: rt.RunContext, batch_id: int) -> bool:
        self.asked.append(batch_id)
        if batch_id >= self.at:
            ctx.request_stop(batch_id)
        return True

    def report_stopped(self, ctx: rt.RunContext, batch_id: int) -> None:
        self.reported.append(batch_id)


class _Query:
    """A query whose batch ``last`` is committed and whose trigger is over."""

    def __init__(self) -> None:
        self.last = -1
        self.stopped = False
        self.isActive = True
        self.status = {"isTriggerActive": False}

    @property
    def lastProgress(self) -> dict[str, Any] | None:
        return {"batchId": self.last} if self.last >= 0 else None

    def awaitTermination(self, timeout: float) -> bool:
        return self.stopped

    def stop(self) -> None:
        self.stopped, self.isActive = True, False


def test_the_run_commits_the_checked_batch_refuses_the_next_and_stops(
    capsys: pytest.CaptureFixture[str],
) -> None:
    fence = _Stopper(at=5)
    ctx = rt.RunContext(job="j", run_id="7", fencing_token="t", fence_check=fence)
    written: list[int] = []
    batch = ctx.fenced(lambda _df, batch_id: written.append(batch_id))
    query = _Query()
    for batch_id in (4, 5):
        batch(None, batch_id)  # type: ignore[arg-type]
        query.last = batch_id
    assert ctx.stop_requested
    with pytest.raises(rt.StopRequested):
        batch(None, 6)  # type: ignore[arg-type]
    assert written == [4, 5] and fence.asked == [4, 5]
    assert ctx.await_termination(query) == 0  # type: ignore[arg-type]
    assert query.stopped and fence.reported == [5]
    assert "stopped gracefully after batch 5" in capsys.readouterr().err


def test_the_run_waits_for_its_batch_to_commit_before_it_stops() -> None:
    ctx = rt.RunContext(job="j", run_id="7", fencing_token="t", fence_check=_Stopper(at=5))
    query = _Query()
    query.last = 4
    ctx.watch(query)  # type: ignore[arg-type]
    ctx.on_batch(5)  # the stop is asked; batch 5 is being written
    assert not ctx._stop_due(query)  # type: ignore[arg-type]
    query.last = 5
    query.status = {"isTriggerActive": True}
    assert not ctx._stop_due(query)  # type: ignore[arg-type]
    query.status = {"isTriggerActive": False}
    assert ctx._stop_due(query)  # type: ignore[arg-type]
