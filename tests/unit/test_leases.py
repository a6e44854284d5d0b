"""Fence leases (scheduler/decisions/leases.py) and every decision that respects them: the
coarse recording (no answer's lease ends after the recorded end), the failover's FENCING step
(done once the lease surely lapsed, reached or not; a move waits for it too), the owner's plan
(no new run while the last one may hold a lease; no resubmission of a run whose driver holds
one; a lapsed lease's exit is not the job's failure)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines import drover_runtime
from scheduler.core.backend import AppState, AppStatus
from scheduler.core.records import Failures, RunRecord
from scheduler.core.states import DesiredState, JobState, RunState
from scheduler.decisions import leases
from scheduler.decisions.actions import CloseRun, Hold, Noop, Resubmit, SetState, Submit
from scheduler.decisions.operations import failover as fo
from scheduler.decisions.planning import RestartPolicy, plan, timed
from tests.unit.test_failover import CLUSTERS, DRAIN, GROUPS, NOW, TIMING, facts, item, job, run

LEASE = 90.0
MARGIN = 5.0
TIMING_L = replace(TIMING, lease_margin=MARGIN)


# -- the coarse recording --------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    lease_s=st.floats(5.0, 600.0),
    gaps=st.lists(st.floats(0.0, 400.0), min_size=1, max_size=60),
    latency=st.lists(st.floats(0.0, 3.0), min_size=1, max_size=60),
)
def test_no_answer_grants_a_lease_ending_after_the_recorded_end(
    lease_s: float, gaps: list[float], latency: list[float]
) -> None:
    """For any sequence of checks: every answer's lease ends no later than the run's recorded
    end (also as the driver measures it, from before it sent the request); the recorded end
    never goes back; an answer grants at least half a lease; and the run is written at most
    once per half lease."""
    recorded = None
    sent = NOW
    last_write = None
    for i, gap in enumerate(gaps):
        sent += timedelta(seconds=gap)
        now = sent + timedelta(seconds=latency[i % len(latency)])  # the node answers later
        granted = leases.grant(recorded, now, lease_s)
        if granted.record is not None:
            assert recorded is None or granted.record >= recorded
            if last_write is not None:
                assert (now - last_write).total_seconds() >= lease_s / 2 - 1e-6
            recorded, last_write = granted.record, now
        assert recorded is not None
        assert granted.ends <= recorded
        assert granted.seconds(now) >= lease_s / 2 - 1e-6
        # the driver counts the lease from its send time: it ends even earlier
        assert sent + timedelta(seconds=granted.seconds(now)) <= recorded


def test_the_first_check_and_a_half_spent_lease_are_written_the_others_not() -> None:
    first = leases.grant(None, NOW, LEASE)
    assert first.record == first.ends == NOW + timedelta(seconds=LEASE)
    assert first.seconds(NOW) == LEASE
    recorded = first.record
    later = leases.grant(recorded, NOW + timedelta(seconds=40), LEASE)
    assert later.record is None and later.seconds(NOW + timedelta(seconds=40)) == 50
    renewed = leases.grant(recorded, NOW + timedelta(seconds=46), LEASE)
    assert renewed.record == NOW + timedelta(seconds=46 + LEASE)
    # a recorded end further out than one lease (another node's clock ahead, a shorter setting)
    # is never exceeded, and never handed out beyond one lease either
    far = leases.grant(NOW + timedelta(seconds=500), NOW, LEASE)
    assert far.record is None and far.seconds(NOW) == LEASE


def test_a_closed_run_may_hold_its_lease_only_when_it_ended_unconfirmed() -> None:
    until = NOW + timedelta(seconds=30)
    lost = run("j", state=RunState.LOST, ended_at=NOW, lease_until=until)
    assert leases.holds(lost, NOW, MARGIN) == until + timedelta(seconds=MARGIN)
    assert leases.holds(lost, until + timedelta(seconds=MARGIN), MARGIN) is None
    for confirmed in (RunState.KILLED, RunState.FINISHED, RunState.FAILED):
        assert leases.holds(replace(lost, state=confirmed), NOW, MARGIN) is None
    assert leases.holds(replace(lost, lease_until=None), NOW, MARGIN) is None
    assert leases.holds(replace(lost, state=RunState.RUNNING, ended_at=None), NOW, MARGIN) is None
    assert leases.holds(None, NOW, MARGIN) is None


def test_the_runtime_and_drover_agree_on_the_header_and_the_exit_code() -> None:
    assert drover_runtime.LEASE_HEADER == leases.LEASE_HEADER
    assert drover_runtime.LEASE_LAPSED_EXIT == leases.LEASE_LAPSED_EXIT


# -- the failover's fence ----------------------------------------------------------------------


def fenced_run(**changes: Any) -> RunRecord:
    fields: dict[str, Any] = {
        "state": RunState.LOST,
        "ended_at": NOW,
        "fenced_at": NOW,
        "lease_until": NOW + timedelta(seconds=60),
    }
    fields.update(changes)
    return run("j", **fields)


def test_fencing_is_done_once_the_lease_surely_lapsed_reached_or_not() -> None:
    """A dead cluster: the driver is never reached (no superseded answer), and no blind limit
    is set -- the lease alone ends the wait: recorded end + clock margin + exit grace."""
    stale = fenced_run()
    j = job("j", directive=DRAIN, state=JobState.QUEUED, current_run=stale)
    at = NOW + timedelta(seconds=60 + MARGIN + TIMING.fence_exit_grace)
    waiting = fo.decide(item(fo.Step.FENCING), facts(j, stale, now=at - timedelta(seconds=1)),
                        TIMING_L)  # fmt: skip
    assert isinstance(waiting, fo.Wait) and "its fence lease surely lapsed at" in waiting.why
    done = fo.decide(item(fo.Step.FENCING), facts(j, stale, now=at), TIMING_L)
    assert isinstance(done, fo.Advance) and done.step == fo.Step.CHECKPOINT
    assert "fence lease surely lapsed" in done.note
    # the superseded answer still ends it earlier: that driver commits nothing more
    told = replace(stale, fence_superseded_at=NOW)
    early = NOW + timedelta(seconds=TIMING.fence_exit_grace)
    done = fo.decide(item(fo.Step.FENCING), facts(j, told, now=early), TIMING_L)
    assert isinstance(done, fo.Advance) and "answered 'superseded'" in done.note
    # a forced fence never cuts a lease short; nor does a blind limit
    forced = replace(j, directive=replace(DRAIN, force_unfenced=True), conf={
        fo.MAX_BLIND_PROPERTY: "1", fo.IDLE_CHECK_PROPERTY: "1"})  # fmt: skip
    wait = fo.decide(item(fo.Step.FENCING), facts(forced, stale, now=at - timedelta(seconds=1)),
                     TIMING_L)  # fmt: skip
    assert isinstance(wait, fo.Wait)


def test_a_move_waits_for_the_lease_of_the_last_run_that_ended_unconfirmed() -> None:
    """The double-run path: a failed fence cleared the hold and closed the run LOST; a second
    failover moves the job ("no application on A") -- DRAINING goes to FENCING for that run's
    lease, then on to CHECKPOINT once it surely lapsed."""
    stale = fenced_run(lease_until=NOW + timedelta(seconds=30))
    j = job("j", directive=DRAIN, state=JobState.QUEUED, current_run=stale)
    move = item(fo.Step.DRAINING, fo.Action.MOVE, source_run_id=None)
    step = fo.decide(move, facts(j, None), TIMING_L)
    assert isinstance(step, fo.Advance) and step.step == fo.Step.FENCING
    assert step.fields == {"source_run_id": stale.id}
    assert "may hold a fence lease until" in step.note
    # the same round goes on with the run it recorded (the round's read did not have it)
    fencing = item(fo.Step.FENCING, fo.Action.MOVE, source_run_id=stale.id)
    assert isinstance(fo.decide(fencing, facts(j, None), TIMING_L), fo.Wait)
    at = NOW + timedelta(seconds=30 + MARGIN + TIMING.fence_exit_grace)
    done = fo.decide(fencing, facts(j, None, now=at), TIMING_L)
    assert isinstance(done, fo.Advance) and done.step == fo.Step.CHECKPOINT
    # once lapsed, a move goes straight on
    later = fo.decide(move, facts(j, None, now=at), TIMING_L)
    assert isinstance(later, fo.Advance) and later.step == fo.Step.CHECKPOINT
    # a run its cluster confirmed gone is not waited for, nor one that never checked its fence
    for gone in (replace(stale, state=RunState.KILLED, fenced_at=None),
                 replace(stale, lease_until=None, fence_checked_at=None)):  # fmt: skip
        free = replace(j, current_run=gone)
        go = fo.decide(move, facts(free, None), TIMING_L)
        assert isinstance(go, fo.Advance) and go.step == fo.Step.CHECKPOINT, gone
    # nor a run of the job on another cluster than the source
    elsewhere = replace(j, current_run=replace(stale, cluster="C"))
    go = fo.decide(move, facts(elsewhere, None), TIMING_L)
    assert isinstance(go, fo.Advance) and go.step == fo.Step.CHECKPOINT


def test_a_move_waits_for_an_older_runtime_that_checked_without_a_lease() -> None:
    """A driver of a runtime that grants itself no lease fails open: after a failed fence the
    move waits for its superseded answer (or its blind limit), as the fence did."""
    stale = fenced_run(lease_until=None)
    j = job("j", directive=DRAIN, state=JobState.QUEUED, current_run=stale)
    move = item(fo.Step.DRAINING, fo.Action.MOVE, source_run_id=None)
    step = fo.decide(move, facts(j, None, now=NOW + timedelta(days=30)), TIMING_L)
    assert isinstance(step, fo.Advance) and step.step == fo.Step.FENCING
    assert "without a lease (an older runtime)" in step.note
    told = replace(j, current_run=replace(stale, fence_superseded_at=NOW))
    go = fo.decide(move, facts(told, None, now=NOW + timedelta(seconds=30)), TIMING_L)
    assert isinstance(go, fo.Advance) and go.step == fo.Step.CHECKPOINT


def test_the_plan_of_a_move_says_it_waits_for_the_lease() -> None:
    stale = fenced_run()
    j = job("j", state=JobState.QUEUED, current_run=stale)
    clusters = {**CLUSTERS, "A": replace(CLUSTERS["A"], health="VOTE_ABNORMAL")}
    planned = fo.plan_failover(
        fo.Request("A", selector=fo.Selector(jobs=frozenset({"j"}))),
        [j],
        GROUPS,
        clusters,
        source_reachable=False,
        now=NOW,
    )
    (it,) = planned.items
    assert it.action == fo.Action.MOVE
    assert "once the fence lease of run 7" in it.why and "has lapsed" in it.why


# -- the owner's plan --------------------------------------------------------------------------

POLICY = RestartPolicy(lease_margin=MARGIN)


def test_no_new_run_anywhere_while_the_last_one_may_hold_a_lease() -> None:
    stale = fenced_run(fenced_at=None, reason="the cluster no longer knows the application")
    j = job("j", state=JobState.FAILED, state_reason="x", current_run=stale)
    waiting = plan(j, None, failures=Failures(1), policy=POLICY, now=NOW)
    assert isinstance(waiting, SetState) and waiting.state == JobState.QUEUED
    assert "may hold a fence lease until" in waiting.reason
    queued = replace(j, state=JobState.QUEUED, state_reason=waiting.reason)
    assert isinstance(plan(queued, None, failures=Failures(1), policy=POLICY, now=NOW), Noop)
    other = replace(queued, state_reason="older reason")
    assert isinstance(plan(other, None, failures=Failures(1), policy=POLICY, now=NOW), Hold)
    at = NOW + timedelta(seconds=60 + MARGIN)
    assert isinstance(plan(queued, None, failures=Failures(1), policy=POLICY, now=at), Submit)
    # a run whose cluster confirmed its end is not waited for
    killed = replace(queued, current_run=replace(stale, state=RunState.KILLED))
    assert isinstance(plan(killed, None, failures=Failures(), policy=POLICY, now=NOW), Submit)
    # a stopped job stays stopped
    stopped = replace(queued, desired_state=DesiredState.STOPPED, state=JobState.STOPPED)
    assert isinstance(plan(stopped, None, failures=Failures(), policy=POLICY, now=NOW), Noop)


def test_a_run_whose_driver_holds_a_lease_is_not_submitted_again() -> None:
    """Recorded before its submission, never recorded as submitted, not found on its cluster --
    but its driver checked in: it runs somewhere; resubmitting it would run it twice."""
    unsent = run("j", state=RunState.SUBMITTING, submission_id=None, app_id=None,
                 started_at=None, lease_until=NOW + timedelta(seconds=60))  # fmt: skip
    j = job("j", state=JobState.SUBMITTING, current_run=unsent)
    missing = AppStatus(AppState.NOT_FOUND)
    action = plan(j, missing, failures=Failures(), policy=POLICY, now=NOW)
    assert isinstance(action, Noop) and "holds a fence lease" in action.why
    assert timed(j)  # never quiet: the lease's end alone changes the plan
    at = NOW + timedelta(seconds=60 + MARGIN)
    assert isinstance(plan(j, missing, failures=Failures(), policy=POLICY, now=at), Resubmit)
    never = replace(j, current_run=replace(unsent, lease_until=None))
    assert isinstance(plan(never, missing, failures=Failures(), policy=POLICY, now=NOW), Resubmit)


def test_a_lapsed_lease_exit_is_not_the_jobs_failure() -> None:
    j = job("j")
    lapsed = AppStatus(AppState.FAILED, "app-7", "driver exited with code 75", 75)
    action = plan(j, lapsed, failures=Failures(2), policy=POLICY, now=NOW)
    assert isinstance(action, CloseRun) and not action.counts_as_failure
    assert action.job_state == JobState.QUEUED and "fence lease lapsed" in action.reason
    other = AppStatus(AppState.FAILED, "app-7", "driver exited with code 1", 1)
    failed = plan(j, other, failures=Failures(2), policy=POLICY, now=NOW)
    assert isinstance(failed, CloseRun) and failed.counts_as_failure
