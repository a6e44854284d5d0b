"""Submissions in doubt: a run without a submission id that its cluster does not list yet is
neither submitted again nor closed before the in-doubt grace (``scheduler.decisions.planning``),
and a driver the cluster creates late is adopted, so exactly one driver ends up live.

The late cluster: :class:`LateBackend` answers a submission with a timeout (the outcome is
unknown to the node) but creates the driver anyway, visible to ``find`` only some seconds later
(a standalone master whose inbox is backed up).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.backend import AppInfo, AppState, AppStatus, Submission, SubmitRequest
from scheduler.core.directive import Directive, Phase
from scheduler.core.errors import ClusterUnreachable
from scheduler.core.ledger import Reissue, effect_of
from scheduler.core.records import SUPERSEDED_KEPT, Failures, JobRecord, RunRecord
from scheduler.core.states import DesiredState, JobState, RunState
from scheduler.decisions.actions import Action, CloseRun, Hold, Noop, Resubmit
from scheduler.decisions.planning import RestartPolicy, in_doubt_until, plan, timed
from scheduler.loops.reconciler import Reconciler
from tests.support.fakes import Clock, FakeApp, FakeBackend
from tests.unit.test_planning import NOW, POLICY, make_job, make_run
from tests.unit.test_reconciler import World

GRACE = POLICY.in_doubt_grace

# -- planning -----------------------------------------------------------------------------------


def in_doubt_job(age: float, **changes: object) -> tuple[RunRecord, JobRecord]:
    """A job whose run was decided ``age`` seconds ago and has no submission id."""
    run = make_run(
        state=RunState.SUBMITTING,
        submission_id=None,
        app_id=None,
        started_at=None,
        submitted_at=None,
        submit_intent_at=NOW - timedelta(seconds=age),
    )
    return run, make_job(run=run, state=JobState.SUBMITTING, **changes)


def not_found(job: JobRecord, policy: RestartPolicy = POLICY) -> Action:
    """What the planner does with ``job`` when its cluster does not know its current run."""
    return plan(job, AppStatus(AppState.NOT_FOUND), failures=Failures(), policy=policy, now=NOW)


def test_a_run_not_found_is_held_in_doubt_instead_of_resubmitted_at_once() -> None:
    run, job = in_doubt_job(age=5)
    action = not_found(job)
    assert isinstance(action, Hold), action  # was Resubmit(run) before the grace existed
    until = (NOW + timedelta(seconds=GRACE - 5)).isoformat(timespec="seconds")
    assert action.reason == (
        f"submission of run {run.id} is in doubt until {until}: looking it up on cluster c1 "
        "before submitting again"
    )
    held = replace(job, state_reason=action.reason)
    again = not_found(held)
    assert again == Noop(action.reason)  # the reason is written once
    assert timed(job)  # never quiet: time alone ends the doubt


def test_the_grace_counts_from_the_latest_reissue_and_ends() -> None:
    run, job = in_doubt_job(age=GRACE + 1)
    assert not_found(job) == Resubmit(run)
    reissued = replace(run, submit_intent_at=NOW - timedelta(seconds=1))
    action = not_found(replace(job, current_run=reissued))
    assert isinstance(action, Hold)
    assert in_doubt_until(reissued, POLICY) == NOW + timedelta(seconds=GRACE - 1)


def test_an_old_run_without_the_timestamp_counts_from_its_creation() -> None:
    run = make_run(state=RunState.SUBMITTING, submission_id=None, app_id=None)
    assert run.submit_intent_at is None
    assert in_doubt_until(run, POLICY) == run.created_at + timedelta(seconds=GRACE)


def test_no_grace_resubmits_at_once() -> None:
    run, job = in_doubt_job(age=0)
    policy = RestartPolicy(in_doubt_grace=0)
    assert not_found(job, policy=policy) == Resubmit(run)


def test_a_run_in_doubt_is_not_closed_as_never_submitted_by_a_stop() -> None:
    _, job = in_doubt_job(age=5, desired_state=DesiredState.STOPPED)
    action = not_found(job)
    assert isinstance(action, Hold)
    _, late = in_doubt_job(age=GRACE, desired_state=DesiredState.STOPPED)
    closed = not_found(late)
    assert isinstance(closed, CloseRun) and closed.run_state == RunState.LOST


def test_a_driver_holding_a_lease_is_never_resubmitted_in_or_after_the_doubt() -> None:
    for age in (5, GRACE + 5):
        run, job = in_doubt_job(age=age)
        leased = replace(run, lease_until=NOW + timedelta(seconds=30))
        action = not_found(replace(job, current_run=leased))
        assert isinstance(action, Noop) and "fence lease" in action.why


def test_a_failover_drain_does_not_close_a_run_in_doubt() -> None:
    """A drain closes a run never submitted as LOST and submits on the target: not while the
    source cluster may still create its driver."""
    directive = Directive(3, 1, Phase.DRAIN, "c1", "c2")
    _, job = in_doubt_job(age=5, directive=directive)
    action = not_found(job)
    assert isinstance(action, Hold)
    _, late = in_doubt_job(age=GRACE, directive=directive)
    closed = not_found(late)
    assert isinstance(closed, CloseRun) and closed.reason.startswith("never submitted")


@given(
    age=st.floats(min_value=0, max_value=GRACE - 0.001),  # timedelta keeps microseconds
    desired=st.sampled_from(DesiredState),
    abnormal=st.booleans(),
)
def test_nothing_is_submitted_again_or_closed_inside_the_grace(
    age: float, desired: DesiredState, abnormal: bool
) -> None:
    _, job = in_doubt_job(age=age, desired_state=desired)
    action = plan(
        job,
        AppStatus(AppState.NOT_FOUND),
        failures=Failures(),
        policy=POLICY,
        now=NOW,
        cluster_abnormal=abnormal,
    )
    assert isinstance(action, Hold | Noop), action


# -- the reconciler on a cluster that creates the driver late ---------------------------------


class LateBackend(FakeBackend):
    """Every submission times out for the caller, but the cluster creates its driver anyway,
    visible ``delay`` seconds later (``None``: the submission is truly lost)."""

    def __init__(self, clock: Clock, calls: list[str], delay: float | None) -> None:
        super().__init__(calls=calls)
        self._clock = clock
        self._delay = delay
        self._late: list[tuple[datetime, FakeApp]] = []
        self._late_lock = threading.Lock()
        self._n = 0

    def submit(self, request: SubmitRequest) -> Submission:
        self.calls.append(f"backend.submit {request.app_name}")
        if self._delay is not None:
            with self._late_lock:
                self._n += 1
                app = FakeApp(f"late-{self._n}", request.app_name, AppState.STARTING, "")
                at = self._clock.at + timedelta(seconds=self._delay)
                self._late.append((at, app))
        raise ClusterUnreachable(f"submitting {request.app_name}: timed out after 3 s")

    def _arrived(self) -> None:
        with self._late_lock:
            due = [app for at, app in self._late if at <= self._clock.at]
            self._late = [(at, app) for at, app in self._late if at > self._clock.at]
        for app in due:
            self.apps[app.submission_id] = app

    def find(self, app_name: str) -> Submission | None:
        self._arrived()
        return super().find(app_name)

    def status(
        self, submission_id: str, app_name: str | None = None, app_id: str | None = None
    ) -> AppStatus:
        self._arrived()
        return super().status(submission_id, app_name, app_id)

    def list_applications(self) -> list[AppInfo]:
        self._arrived()
        return super().list_applications()


def late_world(delay: float | None) -> tuple[World, LateBackend, Reconciler]:
    world = World()
    backend = LateBackend(world.clock, world.ledger.calls, delay)
    world.backend = backend  # the world's reconcilers drive this cluster
    return world, backend, world.reconciler()


def test_a_driver_created_late_is_adopted_and_never_submitted_twice() -> None:
    world, backend, rec = late_world(delay=20.0)
    job = world.ledger.add_job("orders")
    rec.tick()  # intent, then the submission's outcome is unknown
    run = world.job(job).current_run
    assert run is not None and run.submission_id is None
    for _ in range(3):  # inside the grace, the cluster does not list the driver yet
        world.clock.advance(5)
        rec.tick()
        stored = world.job(job)
        assert stored.state == JobState.SUBMITTING
        assert stored.state_reason.startswith(f"submission of run {run.id} is in doubt until")
    world.clock.advance(10)  # the master created it at last
    rec.tick()
    calls = world.ledger.calls
    assert calls.count(f"backend.submit {run.app_name}") == 1
    assert world.ledger.calls.count("ledger.apply Adopted") == 1
    assert not world.ledger.applies("Reissue")
    stored = world.job(job)
    assert stored.current_run is not None and stored.current_run.submission_id == "late-1"
    backend.start_all()
    world.clock.advance(GRACE * 2)
    rec.tick()
    rec.tick()
    assert [a.submission_id for a in backend.live()] == ["late-1"]
    assert world.job(job).state == JobState.RUNNING
    assert len(world.ledger.runs_of(job.id)) == 1


def test_a_lost_submission_is_sent_again_once_after_the_grace() -> None:
    world, backend, rec = late_world(delay=None)
    job = world.ledger.add_job("orders")
    rec.tick()
    run = world.job(job).current_run
    assert run is not None
    ticks_in_grace = int(GRACE // 5) - 1
    for _ in range(ticks_in_grace):
        world.clock.advance(5)
        rec.tick()
    assert world.ledger.calls.count(f"backend.submit {run.app_name}") == 1  # no resubmission
    assert not world.ledger.applies("Reissue")
    world.clock.advance(10)
    rec.tick()
    assert world.ledger.applies("Reissue") == [1]
    assert world.ledger.calls.count(f"backend.submit {run.app_name}") == 2
    reissued = world.job(job).current_run
    assert reissued is not None and reissued.submit_intent_at is not None
    assert reissued.submit_intent_at > run.created_at + timedelta(seconds=GRACE)
    world.clock.advance(5)
    rec.tick()  # in doubt again, counted from the reissue
    assert world.ledger.calls.count(f"backend.submit {run.app_name}") == 2


def test_a_run_keeps_the_digests_of_its_last_superseded_tokens() -> None:
    run = make_run(state=RunState.SUBMITTING, submission_id=None, fencing_token="d0")
    for n in range(1, SUPERSEDED_KEPT + 3):
        effect = effect_of(Reissue(make_job(run=run)))
        assert effect.run_fields is not None
        run = replace(run, **{k: v for k, v in effect.run_fields.items() if k != "fencing_secret"})
        run = replace(run, fencing_token=f"d{n}")
    kept = run.superseded_tokens.split(",")
    assert len(kept) == SUPERSEDED_KEPT and kept[-1] == f"d{SUPERSEDED_KEPT + 1}"
