"""``planning.plan()`` and ``RestartPolicy``: the reconciler's pure decisions."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.backend import AppState, AppStatus, app_name_for
from scheduler.core.records import Failures, JobRecord, RunRecord
from scheduler.core.states import DesiredState, JobState, Priority, RunState, can_transition
from scheduler.decisions.actions import (
    Action,
    CloseRun,
    GiveUp,
    Hold,
    Kill,
    Noop,
    Observed,
    Resubmit,
    SetState,
    Submit,
)
from scheduler.decisions.health import abnormal_job_reason
from scheduler.decisions.planning import CLUSTER_ABNORMAL, RestartPolicy, plan

NOW = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
POLICY = RestartPolicy(
    max_attempts=3, validity_interval=600.0, backoff_initial=2.0, backoff_max=60.0
)

RUNNING = DesiredState.RUNNING
STOPPED = DesiredState.STOPPED


# -- factories ----------------------------------------------------------------------------------


def make_run(**changes: Any) -> RunRecord:
    """A run of job ``orders-enrich``, running on cluster ``c1`` unless told otherwise."""
    run_id = changes.get("id", 7)
    fields: dict[str, Any] = {
        "id": run_id,
        "job_name": "orders-enrich",
        "attempt": 1,
        "generation": 1,
        "cluster": "c1",
        "node_id": "node-a",
        "owner_epoch": 1,
        "fencing_token": "token-7",
        "app_name": app_name_for("orders-enrich", run_id),
        "checkpoint_location": "/ck/orders-enrich",
        "submission_id": "driver-7",
        "app_id": "app-7",
        "state": RunState.RUNNING,
        "reason": "",
        "exit_code": None,
        "created_at": NOW - timedelta(minutes=5),
        "submitted_at": NOW - timedelta(minutes=5),
        "started_at": NOW - timedelta(minutes=4),
        "ended_at": None,
    }
    fields.update(changes)
    return RunRecord(**fields)


def make_job(*, run: RunRecord | None = None, **changes: Any) -> JobRecord:
    """Job ``orders-enrich`` (generation 1), with ``run`` as its current run."""
    fields: dict[str, Any] = {
        "id": 1,
        "name": "orders-enrich",
        "group": "default",
        "team": "t",
        "business": "b",
        "priority": Priority.NORMAL,
        "entrypoint": "file:///pipelines/orders.py",
        "args": (),
        "conf": {},
        "checkpoint_location": "",
        "desired_state": RUNNING,
        "state": JobState.RUNNING if run is not None else JobState.QUEUED,
        "state_reason": "",
        "cluster": "c1" if run is not None else None,
        "current_run_id": run.id if run is not None else None,
        "generation": 1,
        "attempts_reset_at": NOW - timedelta(hours=1),
        "not_before": None,
        "owner": "node-a",
        "owner_epoch": 1,
        "version": 3,
        "spec_version": 2,
        "created_at": NOW - timedelta(hours=2),
        "updated_at": NOW - timedelta(minutes=1),
        "current_run": run,
    }
    fields.update(changes)
    return JobRecord(**fields)


def do_plan(
    job: JobRecord,
    observed: AppStatus | None = None,
    *,
    failures: int = 0,
    policy: RestartPolicy = POLICY,
) -> Action:
    return plan(job, observed, failures=Failures(failures), policy=policy, now=NOW)


def asked_job_state(action: Action) -> JobState | None:
    """The job state the reconciler records for ``action`` (None: no state, or Submit)."""
    if isinstance(action, SetState):
        return action.state
    if isinstance(action, GiveUp):
        return JobState.FAILED
    if isinstance(action, Observed | CloseRun):
        return action.job_state
    if isinstance(action, Kill):
        return JobState.STOPPING
    if isinstance(action, Resubmit):
        return JobState.STARTING  # once the cluster accepts the submission
    return None


# -- no live run --------------------------------------------------------------------------------


def test_desired_running_without_run_submits() -> None:
    action = do_plan(make_job(state=JobState.QUEUED))
    assert action == Submit("desired state is RUNNING")


def test_after_a_failure_the_next_attempt_is_submitted_with_its_number() -> None:
    previous = make_run(state=RunState.FAILED, ended_at=NOW - timedelta(minutes=1))
    job = make_job(run=previous, state=JobState.FAILED, state_reason="exit code 1")
    action = do_plan(job, failures=1)
    assert isinstance(action, Submit)
    assert action.reason == "restart attempt 2 after: exit code 1"


def test_backoff_in_the_future_waits() -> None:
    job = make_job(state=JobState.FAILED, not_before=NOW + timedelta(seconds=10))
    action = do_plan(job, failures=1)
    assert isinstance(action, Noop)
    assert "backing off" in action.why


def test_backoff_in_the_past_submits() -> None:
    job = make_job(state=JobState.FAILED, not_before=NOW - timedelta(seconds=1))
    assert isinstance(do_plan(job, failures=1), Submit)


@pytest.mark.parametrize("failures", [3, 4, 10])
def test_gave_up_and_failed_waits_for_an_operator(failures: int) -> None:
    action = do_plan(make_job(state=JobState.FAILED), failures=failures)
    assert isinstance(action, Noop)
    assert "gave up" in action.why


@pytest.mark.parametrize("abnormal", [False, True])
def test_gave_up_stays_failed_after_the_failures_left_the_window(abnormal: bool) -> None:
    # regression: once the validity interval had passed, a given-up job was submitted again
    reason = "gave up after 3 failures within 600 s: driver exited with an error"
    job = make_job(state=JobState.FAILED, state_reason=reason)
    action = plan(
        job, None, failures=Failures(0), policy=POLICY, now=NOW, cluster_abnormal=abnormal
    )
    assert isinstance(action, Noop) and "gave up" in action.why


def test_budget_spent_but_not_failed_gives_up() -> None:
    job = make_job(state=JobState.FINISHED, state_reason="application finished")
    action = do_plan(job, failures=3)
    assert isinstance(action, GiveUp)
    assert action.reason.startswith("gave up after 3 failures")
    assert action.reason.endswith("application finished")


@pytest.mark.parametrize("state", [JobState.STOPPED, JobState.FINISHED, JobState.FAILED])
def test_desired_stopped_at_rest_does_nothing(state: JobState) -> None:
    assert isinstance(do_plan(make_job(desired_state=STOPPED, state=state)), Noop)


def test_desired_stopped_while_queued_stops_without_touching_a_cluster() -> None:
    action = do_plan(make_job(desired_state=STOPPED, state=JobState.QUEUED))
    assert action == SetState(JobState.STOPPED, "desired state is STOPPED")


# -- a live run, application alive --------------------------------------------------------------


def test_live_run_not_observed_does_nothing() -> None:
    job = make_job(run=make_run(state=RunState.RUNNING))
    assert isinstance(do_plan(job, None), Noop)


def test_observed_running_is_recorded_then_nothing() -> None:
    run = make_run(state=RunState.STARTING)
    status = AppStatus(AppState.RUNNING, app_id="app-7")
    action = do_plan(make_job(run=run, state=JobState.STARTING), status)
    assert action == Observed(run, status, JobState.RUNNING, RunState.RUNNING)

    settled = make_run(state=RunState.RUNNING)
    action = do_plan(make_job(run=settled, state=JobState.RUNNING), status)
    assert action == Noop("running")


def test_job_unknown_and_app_running_is_recorded_running() -> None:
    run = make_run(state=RunState.RUNNING)
    status = AppStatus(AppState.RUNNING)
    action = do_plan(make_job(run=run, state=JobState.UNKNOWN), status)
    assert action == Observed(run, status, JobState.RUNNING, RunState.RUNNING)


def test_observed_starting_for_a_submitting_run() -> None:
    run = make_run(state=RunState.SUBMITTING, started_at=None)
    status = AppStatus(AppState.STARTING)
    action = do_plan(make_job(run=run, state=JobState.SUBMITTING), status)
    assert action == Observed(run, status, JobState.STARTING, RunState.STARTING)


def test_still_starting_does_nothing() -> None:
    run = make_run(state=RunState.STARTING, started_at=None)
    action = do_plan(make_job(run=run, state=JobState.STARTING), AppStatus(AppState.STARTING))
    assert action == Noop("starting")


@pytest.mark.parametrize("app", [AppState.STARTING, AppState.RUNNING])
def test_desired_stopped_with_live_app_kills(app: AppState) -> None:
    run = make_run(state=RunState.RUNNING)
    action = do_plan(make_job(run=run, desired_state=STOPPED), AppStatus(app))
    assert action == Kill(run, "desired state is STOPPED")


@pytest.mark.parametrize("app", [AppState.STARTING, AppState.RUNNING])
def test_restart_generation_bump_with_live_app_kills(app: AppState) -> None:
    run = make_run(state=RunState.RUNNING, generation=1)
    action = do_plan(make_job(run=run, generation=2), AppStatus(app))
    assert action == Kill(run, "restart")


def test_kill_is_repeated_until_the_cluster_confirms() -> None:
    run = make_run(state=RunState.STOPPING)
    job = make_job(run=run, state=JobState.STOPPING, desired_state=STOPPED)
    assert isinstance(do_plan(job, AppStatus(AppState.RUNNING)), Kill)


# -- a live run, application gone ---------------------------------------------------------------


@pytest.mark.parametrize("app", [AppState.NOT_FOUND, AppState.KILLED])
@pytest.mark.parametrize(
    ("desired", "job_state"), [(RUNNING, JobState.QUEUED), (STOPPED, JobState.STOPPED)]
)
def test_stopping_run_whose_app_is_gone_is_closed_as_killed(
    app: AppState, desired: DesiredState, job_state: JobState
) -> None:
    run = make_run(state=RunState.STOPPING)
    job = make_job(run=run, state=JobState.STOPPING, desired_state=desired)
    action = do_plan(job, AppStatus(app, exit_code=143), failures=2)
    assert isinstance(action, CloseRun)
    assert action.run == run
    assert action.run_state == RunState.KILLED
    assert action.job_state == job_state
    assert action.counts_as_failure is False
    assert action.exit_code == 143


def test_app_failing_on_its_own_counts_as_a_failure() -> None:
    run = make_run(state=RunState.RUNNING)
    status = AppStatus(AppState.FAILED, reason="exit code 1", exit_code=1)
    action = do_plan(make_job(run=run), status, failures=0)
    assert action == CloseRun(
        run, RunState.FAILED, JobState.FAILED, "exit code 1", 1, counts_as_failure=True
    )


@pytest.mark.parametrize(
    ("app", "run_state", "reason"),
    [
        (AppState.FAILED, RunState.FAILED, "application failed"),
        (AppState.KILLED, RunState.KILLED, "application killed outside Drover"),
        (AppState.NOT_FOUND, RunState.LOST, "the cluster no longer knows the application"),
    ],
)
def test_app_gone_without_a_reason_gets_a_default_one(
    app: AppState, run_state: RunState, reason: str
) -> None:
    run = make_run(state=RunState.RUNNING)
    action = do_plan(make_job(run=run), AppStatus(app))
    assert isinstance(action, CloseRun)
    assert (action.run_state, action.job_state, action.reason) == (
        run_state,
        JobState.FAILED,
        reason,
    )
    assert action.counts_as_failure is True


@pytest.mark.parametrize("app", [AppState.FAILED, AppState.FINISHED, AppState.NOT_FOUND])
def test_the_failure_that_spends_the_budget_gives_up(app: AppState) -> None:
    run = make_run(state=RunState.RUNNING)
    action = do_plan(make_job(run=run), AppStatus(app, reason="boom"), failures=2)
    assert isinstance(action, CloseRun)
    assert action.job_state == JobState.FAILED
    assert action.reason.startswith("gave up")
    assert action.reason.endswith("boom")
    assert action.counts_as_failure is True


def test_app_finished_with_budget_left_finishes_the_job() -> None:
    run = make_run(state=RunState.RUNNING)
    action = do_plan(make_job(run=run), AppStatus(AppState.FINISHED, exit_code=0), failures=1)
    assert isinstance(action, CloseRun)
    assert action.run_state == RunState.FINISHED
    assert action.job_state == JobState.FINISHED
    assert action.reason == "application finished"
    assert action.exit_code == 0


def test_desired_stopped_never_gives_up() -> None:
    run = make_run(state=RunState.RUNNING)
    job = make_job(run=run, desired_state=STOPPED)
    action = do_plan(job, AppStatus(AppState.FINISHED), failures=5)
    assert isinstance(action, CloseRun)
    assert action.job_state == JobState.FINISHED
    assert not action.reason.startswith("gave up")


def test_submitting_run_never_submitted_is_resubmitted_when_still_wanted() -> None:
    run = make_run(state=RunState.SUBMITTING, submission_id=None, app_id=None)
    job = make_job(run=run, state=JobState.SUBMITTING)
    assert do_plan(job, AppStatus(AppState.NOT_FOUND)) == Resubmit(run)


@pytest.mark.parametrize(
    ("changes", "job_state"),
    [
        ({"desired_state": STOPPED, "state": JobState.UNKNOWN}, JobState.STOPPED),
        ({"generation": 2, "state": JobState.SUBMITTING}, JobState.QUEUED),
    ],
    ids=["stopped", "restarted"],
)
def test_submitting_run_never_submitted_is_closed_lost_when_not_wanted(
    changes: dict[str, Any], job_state: JobState
) -> None:
    run = make_run(state=RunState.SUBMITTING, submission_id=None, app_id=None)
    action = do_plan(make_job(run=run, **changes), AppStatus(AppState.NOT_FOUND), failures=1)
    assert isinstance(action, CloseRun)
    assert action.run_state == RunState.LOST
    assert action.job_state == job_state
    assert action.counts_as_failure is False


# -- RestartPolicy ------------------------------------------------------------------------------


def test_backoff_defaults() -> None:
    policy = RestartPolicy()
    assert [policy.backoff(n) for n in range(-1, 8)] == [0, 0, 2, 4, 8, 16, 32, 60, 60]


@given(
    st.floats(min_value=0.0, max_value=100.0),
    st.floats(min_value=0.0, max_value=10_000.0),
    st.integers(min_value=1, max_value=60),
)
def test_backoff_doubles_and_is_capped(initial: float, cap: float, failures: int) -> None:
    policy = RestartPolicy(backoff_initial=initial, backoff_max=cap)
    assert policy.backoff(0) == 0.0
    assert policy.backoff(1) == min(initial, cap)
    now, after = policy.backoff(failures), policy.backoff(failures + 1)
    assert 0.0 <= now <= cap
    assert after == min(2 * now, cap)


utc_datetimes = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


@given(utc_datetimes, utc_datetimes, st.floats(min_value=1.0, max_value=1e8))
def test_window_start_is_the_later_of_validity_and_reset(
    now: datetime, reset_at: datetime, validity: float
) -> None:
    policy = RestartPolicy(validity_interval=validity)
    start = policy.window_start(now, reset_at)
    by_validity = now - timedelta(seconds=validity)
    assert start == max(by_validity, reset_at)
    assert start >= by_validity and start >= reset_at


# -- properties of plan() -----------------------------------------------------------------------

app_statuses = st.builds(
    AppStatus,
    st.sampled_from(AppState),
    app_id=st.none() | st.just("app-7"),
    reason=st.none() | st.just("exit code 1"),
    exit_code=st.none() | st.integers(min_value=0, max_value=255),
)
policies = st.builds(
    RestartPolicy,
    max_attempts=st.integers(min_value=0, max_value=5),
    validity_interval=st.floats(min_value=1.0, max_value=1e6),
    backoff_initial=st.floats(min_value=0.0, max_value=100.0),
    backoff_max=st.floats(min_value=0.0, max_value=1000.0),
)


@st.composite
def any_case(draw: st.DrawFn) -> tuple[JobRecord, AppStatus | None, int, RestartPolicy]:
    """Any combination of the enums, consistent or not."""
    run = None
    if draw(st.booleans()):
        run = make_run(
            state=draw(st.sampled_from(RunState)),
            generation=draw(st.integers(min_value=0, max_value=3)),
            submission_id=draw(st.none() | st.just("driver-7")),
        )
    job = make_job(
        run=run,
        desired_state=draw(st.sampled_from(DesiredState)),
        state=draw(st.sampled_from(JobState)),
        generation=draw(st.integers(min_value=0, max_value=3)),
        not_before=draw(st.none() | st.sampled_from([NOW - timedelta(1), NOW + timedelta(1)])),
    )
    observed = draw(st.none() | app_statuses)
    return job, observed, draw(st.integers(min_value=0, max_value=10)), draw(policies)


@given(any_case())
def test_plan_always_returns_an_action(
    case: tuple[JobRecord, AppStatus | None, int, RestartPolicy],
) -> None:
    job, observed, failures, policy = case
    action = do_plan(job, observed, failures=failures, policy=policy)
    assert isinstance(action, Action)


#: the job state the reconciler keeps next to a current run that is not final
_JOB_STATE_OF_LIVE_RUN = {
    RunState.SUBMITTING: JobState.SUBMITTING,
    RunState.STARTING: JobState.STARTING,
    RunState.RUNNING: JobState.RUNNING,
    RunState.STOPPING: JobState.STOPPING,
}


@st.composite
def consistent_case(draw: st.DrawFn) -> tuple[JobRecord, AppStatus | None, int, RestartPolicy]:
    """Inputs the reconciler can actually produce.

    - a live (not final) run sits next to its own job state, or UNKNOWN when the cluster could
      not be reached; a run past SUBMITTING has a submission id;
    - a run without a submission id is looked up by name, so it is observed NOT_FOUND (when an
      application is found it is adopted, i.e. gets a submission id);
    - without a live run the job is STOPPED, QUEUED, FINISHED or FAILED, and a job that is to run
      with its restart budget spent is FAILED (the closing CloseRun put it there);
    - ``max_attempts`` is at least 1 (see test_zero_max_attempts_gives_up_from_queued).
    """
    desired = draw(st.sampled_from(DesiredState))
    generation = draw(st.integers(min_value=1, max_value=3))
    policy = replace(draw(policies), max_attempts=draw(st.integers(min_value=1, max_value=5)))
    failures = draw(st.integers(min_value=0, max_value=6))
    run: RunRecord | None
    if draw(st.booleans()):
        run_state = draw(st.sampled_from(list(_JOB_STATE_OF_LIVE_RUN)))
        has_id = run_state != RunState.SUBMITTING or draw(st.booleans())
        run = make_run(
            state=run_state,
            generation=draw(st.sampled_from([generation, generation - 1])),
            submission_id="driver-7" if has_id else None,
        )
        job_state = draw(st.sampled_from([_JOB_STATE_OF_LIVE_RUN[run_state], JobState.UNKNOWN]))
        if has_id:
            observed = draw(st.none() | app_statuses)
        else:
            observed = AppStatus(AppState.NOT_FOUND)
    else:
        run = draw(
            st.none()
            | st.sampled_from(
                [RunState.FINISHED, RunState.FAILED, RunState.KILLED, RunState.LOST]
            ).map(lambda s: make_run(state=s, ended_at=NOW - timedelta(minutes=1)))
        )
        job_state = draw(
            st.sampled_from([JobState.STOPPED, JobState.QUEUED, JobState.FINISHED, JobState.FAILED])
        )
        if desired == RUNNING and failures >= policy.max_attempts:
            job_state = JobState.FAILED
        observed = None
    job = make_job(
        run=run,
        desired_state=desired,
        state=job_state,
        generation=generation,
        not_before=draw(st.none() | st.sampled_from([NOW - timedelta(1), NOW + timedelta(1)])),
    )
    return job, observed, failures, policy


@given(consistent_case())
def test_plan_only_asks_for_legal_job_transitions(
    case: tuple[JobRecord, AppStatus | None, int, RestartPolicy],
) -> None:
    job, observed, failures, policy = case
    action = do_plan(job, observed, failures=failures, policy=policy)
    asked = asked_job_state(action)
    if asked is None:
        assert isinstance(action, Action)
        return
    assert can_transition(job.state, asked), f"{job.state} -> {asked} for {action}"


# -- regressions: inputs for which plan() once asked for a transition the table forbids ---------


def test_start_while_stopping_keeps_killing_until_confirmed() -> None:
    # stop (run and job STOPPING, kill sent), then start before the cluster confirmed the kill
    run = make_run(state=RunState.STOPPING)
    job = make_job(run=run, state=JobState.STOPPING, desired_state=RUNNING)
    action = do_plan(job, AppStatus(AppState.RUNNING))
    assert can_transition(job.state, asked_job_state(action) or job.state), action


def test_stop_while_submission_outcome_unknown() -> None:
    # submit raised ClusterUnreachable (job and run stay SUBMITTING, no submission id), then stop
    run = make_run(state=RunState.SUBMITTING, submission_id=None, app_id=None)
    job = make_job(run=run, state=JobState.SUBMITTING, desired_state=STOPPED)
    action = do_plan(job, AppStatus(AppState.NOT_FOUND))
    assert can_transition(job.state, asked_job_state(action) or job.state), action


def test_adopted_app_that_already_finished() -> None:
    run = make_run(state=RunState.SUBMITTING, submission_id="driver-7")
    job = make_job(run=run, state=JobState.SUBMITTING)
    action = do_plan(job, AppStatus(AppState.FINISHED, exit_code=0))
    assert can_transition(job.state, asked_job_state(action) or job.state), action


def test_running_app_reported_starting_again() -> None:
    run = make_run(state=RunState.RUNNING)
    job = make_job(run=run, state=JobState.RUNNING)
    action = do_plan(job, AppStatus(AppState.STARTING))
    assert can_transition(job.state, asked_job_state(action) or job.state), action


@pytest.mark.parametrize("state", [JobState.QUEUED, JobState.FINISHED])
def test_give_up_from_a_state_that_cannot_become_failed(state: JobState) -> None:
    action = do_plan(make_job(state=state), failures=3)
    assert isinstance(action, GiveUp)
    assert can_transition(state, JobState.FAILED)


def test_zero_max_attempts_gives_up_from_queued() -> None:
    # Settings.restart_max_attempts accepts 0 (ge=0): a freshly started job is given up at once
    job = make_job(state=JobState.QUEUED)
    action = do_plan(job, failures=0, policy=replace(POLICY, max_attempts=0))
    assert can_transition(job.state, asked_job_state(action) or job.state), action


# -- abnormal cluster: no restart there, observe and kill as usual --------------------------------


def plan_abnormal(job: JobRecord, observed: AppStatus | None = None, failures: int = 0) -> Action:
    return plan(
        job, observed, failures=Failures(failures), policy=POLICY, now=NOW, cluster_abnormal=True
    )


@pytest.mark.parametrize(
    "state", [JobState.FAILED, JobState.FINISHED, JobState.STOPPED, JobState.UNKNOWN]
)
def test_abnormal_cluster_queues_the_job_with_the_reason(state: JobState) -> None:
    previous = make_run(state=RunState.FAILED, ended_at=NOW - timedelta(minutes=1))
    action = plan_abnormal(make_job(run=previous, state=state), failures=1)
    assert action == SetState(JobState.QUEUED, CLUSTER_ABNORMAL)


def test_abnormal_cluster_holds_a_queued_job_once_then_waits_quietly() -> None:
    assert plan_abnormal(make_job(state=JobState.QUEUED)) == Hold(CLUSTER_ABNORMAL)
    waiting = make_job(state=JobState.QUEUED, state_reason=CLUSTER_ABNORMAL)
    assert plan_abnormal(waiting) == Noop(CLUSTER_ABNORMAL)


def test_abnormal_cluster_never_gives_up_on_the_job() -> None:
    action = plan_abnormal(make_job(state=JobState.QUEUED), failures=POLICY.max_attempts + 2)
    assert not isinstance(action, GiveUp | Submit)


def test_abnormal_cluster_does_not_resubmit_an_unsubmitted_run() -> None:
    run = make_run(state=RunState.SUBMITTING, submission_id=None, app_id=None)
    job = make_job(run=run, state=JobState.SUBMITTING)
    assert do_plan(job, AppStatus(AppState.NOT_FOUND)) == Resubmit(run)
    action = plan_abnormal(job, AppStatus(AppState.NOT_FOUND))
    assert isinstance(action, CloseRun)
    assert (action.run_state, action.job_state) == (RunState.LOST, JobState.QUEUED)
    assert not action.counts_as_failure and CLUSTER_ABNORMAL in action.reason


@pytest.mark.parametrize("app", [AppState.FAILED, AppState.NOT_FOUND, AppState.FINISHED])
def test_abnormal_cluster_run_ending_is_not_a_failure(app: AppState) -> None:
    job = make_job(run=make_run(state=RunState.RUNNING), state=JobState.RUNNING)
    action = plan_abnormal(job, AppStatus(app), failures=POLICY.max_attempts - 1)
    assert isinstance(action, CloseRun)
    assert not action.counts_as_failure
    assert "gave up" not in action.reason and "abnormal cluster" in action.reason
    assert can_transition(job.state, action.job_state)
    normal = do_plan(job, AppStatus(app), failures=POLICY.max_attempts - 1)
    assert isinstance(normal, CloseRun) and normal.counts_as_failure


def test_abnormal_cluster_still_observes_kills_and_stops() -> None:
    run = make_run(state=RunState.STARTING)
    status = AppStatus(AppState.RUNNING, app_id="app-7")
    job = make_job(run=run, state=JobState.STARTING)
    assert plan_abnormal(job, status) == do_plan(job, status)
    stopping = make_job(run=make_run(), desired_state=STOPPED, state=JobState.RUNNING)
    assert plan_abnormal(stopping, status) == Kill(stopping.current_run, "desired state is STOPPED")
    gone = make_run(state=RunState.STOPPING)
    closing = make_job(run=gone, desired_state=STOPPED, state=JobState.STOPPING)
    action = plan_abnormal(closing, AppStatus(AppState.KILLED))
    assert isinstance(action, CloseRun) and action.job_state == JobState.STOPPED
    queued = make_job(desired_state=STOPPED, state=JobState.QUEUED)
    assert plan_abnormal(queued) == SetState(JobState.STOPPED, "desired state is STOPPED")


@given(
    st.sampled_from(list(JobState)),
    st.sampled_from([RUNNING, STOPPED]),
    st.sampled_from([None, *RunState]),
    st.sampled_from([None, *AppState]),
    st.integers(min_value=0, max_value=5),
)
def test_abnormal_cluster_never_submits_and_only_legal_transitions(
    state: JobState,
    desired: DesiredState,
    run_state: RunState | None,
    app: AppState | None,
    failures: int,
) -> None:
    run = make_run(state=run_state) if run_state is not None else None
    job = make_job(run=run, state=state, desired_state=desired)
    action = plan_abnormal(job, AppStatus(app) if app is not None else None, failures)
    assert not isinstance(action, Submit | Resubmit | GiveUp)
    if isinstance(action, CloseRun):
        assert not action.counts_as_failure
    # wherever the normal plan asks for a legal state change, so does this one
    normal = do_plan(job, AppStatus(app) if app is not None else None, failures=failures)
    if can_transition(state, asked_job_state(normal) or state):
        assert can_transition(state, asked_job_state(action) or state), (state, action)


def test_a_held_job_shows_its_clusters_health_and_why() -> None:
    reason = abnormal_job_reason("spark-a", "VOTE_ABNORMAL", "3 of 3 live nodes see it failing")
    assert reason.startswith("waiting: cluster spark-a is VOTE_ABNORMAL (3 of 3 live nodes")

    def held(job: JobRecord) -> Action:
        return plan(
            job,
            None,
            failures=Failures(),
            policy=POLICY,
            now=NOW,
            cluster_abnormal=True,
            abnormal_reason=reason,
        )

    assert held(make_job(state=JobState.FAILED)) == SetState(JobState.QUEUED, reason)
    # the generic reason of an earlier hold is replaced by the cluster's own, once
    assert held(make_job(state=JobState.QUEUED, state_reason=CLUSTER_ABNORMAL)) == Hold(reason)
    assert held(make_job(state=JobState.QUEUED, state_reason=reason)) == Noop(reason)
