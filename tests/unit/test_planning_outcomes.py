"""The decisions around an action's outcome, moved out of the reconciler into planning."""

from __future__ import annotations

from datetime import timedelta

from scheduler.core.backend import AppState, AppStatus
from scheduler.core.records import Failures
from scheduler.core.states import DesiredState, JobState, RunState
from scheduler.decisions.actions import CloseRun, GiveUp
from scheduler.decisions.planning import (
    needs_failures,
    on_rejected,
    on_unreachable,
    retry_not_before,
)
from tests.unit.test_planning import NOW, POLICY, do_plan, make_job, make_run


def test_failure_counts_are_needed_only_without_a_live_application() -> None:
    running = make_job(run=make_run())
    assert not needs_failures(running, AppStatus(AppState.RUNNING))
    assert needs_failures(running, AppStatus(AppState.FAILED))
    assert needs_failures(make_job(), None)
    assert not needs_failures(make_job(desired_state=DesiredState.STOPPED), None)


def test_a_counted_failure_backs_off_by_the_policy() -> None:
    job = make_job(run=make_run())
    close = CloseRun(job.current_run, RunState.FAILED, JobState.FAILED, "x", 1, True)  # type: ignore[arg-type]
    assert retry_not_before(job, close, Failures(1), policy=POLICY, now=NOW) == NOW + timedelta(
        seconds=POLICY.backoff(2)
    )
    not_counted = CloseRun(job.current_run, RunState.KILLED, JobState.QUEUED, "x", None, False)  # type: ignore[arg-type]
    assert retry_not_before(job, not_counted, Failures(1), policy=POLICY, now=NOW) is None
    stopped = make_job(run=make_run(), desired_state=DesiredState.STOPPED)
    assert retry_not_before(stopped, close, Failures(1), policy=POLICY, now=NOW) is None


def test_a_rejected_submission_fails_the_run_and_counts() -> None:
    run = make_run(state=RunState.SUBMITTING, submission_id=None)
    close = on_rejected(make_job(run=run, state=JobState.SUBMITTING), run, "bad conf")
    assert (close.run_state, close.job_state, close.counts_as_failure) == (
        RunState.FAILED,
        JobState.FAILED,
        True,
    )
    assert close.reason == "submission rejected: bad conf"


def test_unknown_only_after_the_threshold_and_once() -> None:
    run = make_run()
    job = make_job(run=run)
    assert on_unreachable(job, run, polls=2, threshold=3, error="e") is None
    unknown = on_unreachable(job, run, polls=3, threshold=3, error="e")
    assert unknown is not None and unknown.state == JobState.UNKNOWN
    assert "unreachable for 3 polls" in unknown.reason
    already = make_job(run=run, state=JobState.UNKNOWN)
    assert on_unreachable(already, run, polls=9, threshold=3, error="e") is None


def test_giving_up_passes_through_queued_when_failed_is_not_reachable() -> None:
    stopped = make_job(state=JobState.STOPPED)
    action = do_plan(stopped, failures=POLICY.max_attempts)
    assert isinstance(action, GiveUp) and action.path == (JobState.QUEUED, JobState.FAILED)
    queued = do_plan(make_job(state=JobState.QUEUED), failures=POLICY.max_attempts)
    assert isinstance(queued, GiveUp) and queued.path == (JobState.FAILED,)
