"""The reconciler against an in-memory ledger and backend: every action, crashes, stale claims.

No services: ``tests/support/fakes.py`` provides a ledger with the real fencing rules and a
cluster backend; a "crash" is a BaseException raised between recording and acting, after which
a new Reconciler (the restarted actor, nothing in memory) runs on the same ledger and cluster.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from scheduler.core.backend import AppState
from scheduler.core.ledger import FailureQuery
from scheduler.core.ownership import Claim, Fence
from scheduler.core.records import JobRecord
from scheduler.core.states import DesiredState, JobState, RunState
from scheduler.decisions.health import abnormal_job_reason
from scheduler.decisions.planning import GAVE_UP, RestartPolicy
from scheduler.loops.reconciler import Reconciler
from tests.support.fakes import Clock, Crash, FakeBackend, FakeBackends, FakeLedger, cluster

ME = Fence("node-a", 4)
POLICY = RestartPolicy(max_attempts=3, validity_interval=600, backoff_initial=2, backoff_max=60)


@dataclass
class World:
    clock: Clock = field(default_factory=Clock)
    claim: Claim | None = None
    ledger: FakeLedger = field(init=False)
    backend: FakeBackend = field(init=False)

    def __post_init__(self) -> None:
        self.ledger = FakeLedger(self.clock, node_id=ME.node_id)
        self.backend = FakeBackend(calls=self.ledger.calls)
        self.claim = Claim("default", ME, 0, 1)

    def reconciler(self, **options: object) -> Reconciler:
        """A reconciler as a freshly started actor has it (nothing in memory)."""
        return Reconciler(
            self.ledger,
            FakeBackends(c1=self.backend),
            node_id=ME.node_id,
            group="default",
            claim=lambda: self.claim,
            policy=POLICY,
            clock=self.clock.now,
            monotonic=self.clock.monotonic,
            **options,  # type: ignore[arg-type]
        )

    def job(self, job: JobRecord) -> JobRecord:
        return self.ledger.job(job.id)


@pytest.fixture
def world() -> World:
    return World()


def running_jobs(world: World, *names: str) -> tuple[Reconciler, list[JobRecord]]:
    """Jobs submitted (a tick) and observed RUNNING (the next one) by one reconciler."""
    added = [world.ledger.add_job(name) for name in names]
    rec = world.reconciler()
    rec.tick()
    world.backend.start_all()
    rec.tick()
    jobs = [world.job(job) for job in added]
    assert all(job.state == JobState.RUNNING for job in jobs)
    return rec, jobs


def running_job(world: World, name: str = "orders") -> tuple[Reconciler, JobRecord]:
    """A job submitted and observed RUNNING by a reconciler."""
    rec, (job,) = running_jobs(world, name)
    return rec, job


def transitions(world: World, job: JobRecord) -> list[tuple[str | None, str | None]]:
    return [
        (e.from_state, e.to_state)
        for e in world.ledger.events
        if e.job_id == job.id and e.to_state is not None
    ]


# -- every action of plan -------------------------------------------------------------------------


def test_submit_records_the_intent_before_the_cluster_call(world: World) -> None:
    job = world.ledger.add_job("orders")
    stats = world.reconciler().tick()
    assert (stats.jobs, stats.actions, stats.submissions, stats.errors) == (1, 1, 1, 0)
    stored = world.job(job)
    assert stored.state == JobState.STARTING
    run = stored.current_run
    assert run is not None and run.state == RunState.STARTING and run.submission_id
    assert run.owner_epoch == ME.epoch and run.cluster == "c1"
    calls = world.ledger.calls
    assert calls.index("ledger.apply Intent") < calls.index(f"backend.submit {run.app_name}")
    assert calls.index(f"backend.submit {run.app_name}") < calls.index("ledger.apply Submitted")
    assert world.ledger.applied == [("Intent",), ("Submitted",)]  # two fenced writes per start
    assert transitions(world, job) == [("QUEUED", "SUBMITTING"), ("SUBMITTING", "STARTING")]
    assert [a.app_name for a in world.backend.live("orders")] == [run.app_name]


def test_observed_application_moves_the_job_to_running(world: World) -> None:
    job = world.ledger.add_job("orders")
    rec = world.reconciler()
    rec.tick()
    assert rec.tick().actions == 0  # still starting: nothing to record
    world.backend.start_all()
    assert rec.tick().actions == 1
    stored = world.job(job)
    assert stored.state == JobState.RUNNING
    assert stored.current_run is not None
    assert stored.current_run.state == RunState.RUNNING
    assert stored.current_run.started_at is not None


def test_observations_of_a_tick_are_recorded_in_one_transaction(world: World) -> None:
    _, jobs = running_jobs(world, *(f"job-{i}" for i in range(4)))
    assert world.ledger.applies("Observation") == [4]  # one apply of the four
    assert all(world.job(j).state == JobState.RUNNING for j in jobs)


@pytest.mark.parametrize(
    ("count", "applies"),
    [
        (3, [3, 1, 1, 1]),  # the batch, then one by one
        # the 32, the half with the moved job, its half, its half, then that 8 one by one; the
        # halves without it at once: 13 transactions, not 1 + 32
        (32, [32, 16, 8, 1, 1, 1, 1, 1, 1, 1, 1, 8, 16]),
    ],
)
def test_a_batch_that_does_not_land_is_split_then_recorded_one_by_one(
    world: World, count: int, applies: list[int]
) -> None:
    jobs = [world.ledger.add_job(f"job-{i:02d}") for i in range(count)]
    rec = world.reconciler()
    rec.tick()
    world.backend.start_all()
    world.ledger.before("Observation", lambda: world.ledger.api_write(jobs[0].id))
    stats = rec.tick()
    assert stats.errors == 0
    assert world.ledger.applies("Observation") == applies
    assert [world.job(j).state for j in jobs[1:]] == [JobState.RUNNING] * (count - 1)
    assert world.job(jobs[0]).state == JobState.STARTING  # moved: re-read, then observed
    rec.tick()
    assert world.job(jobs[0]).state == JobState.RUNNING


def test_stop_records_the_kill_intent_then_kills_until_confirmed(world: World) -> None:
    rec, job = running_job(world)
    world.backend.kills_confirm = False
    world.ledger.api_write(job.id, desired_state=DesiredState.STOPPED)
    rec.tick()
    stored = world.job(job)
    assert stored.state == JobState.STOPPING
    assert stored.current_run is not None and stored.current_run.state == RunState.STOPPING
    sid = stored.current_run.submission_id
    calls = world.ledger.calls
    assert calls.index("ledger.apply KillIntent") < calls.index(f"backend.kill {sid}")
    rec.tick()  # not confirmed: killed again, after a proof of the claim
    assert world.ledger.calls.count(f"backend.kill {sid}") == 2
    assert world.ledger.calls.count("ledger.apply KillIntent") == 2
    world.backend.confirm_kills()
    rec.tick()
    stored = world.job(job)
    assert stored.state == JobState.STOPPED
    assert stored.current_run is not None and stored.current_run.state == RunState.KILLED
    assert world.backend.live() == []


def test_a_ticks_writes_are_recorded_together_and_its_kills_sent_after(world: World) -> None:
    rec, jobs = running_jobs(world, *(f"job-{i}" for i in range(6)))
    world.backend.kills_confirm = False
    for job in jobs[:4]:
        world.ledger.api_write(job.id, desired_state=DesiredState.STOPPED)
    failing = world.job(jobs[4]).current_run
    assert failing is not None and failing.submission_id is not None
    world.backend.set_state(failing.submission_id, AppState.FAILED)
    world.ledger.applied.clear()
    stats = rec.tick()
    assert stats.errors == 0
    # four kill intents and a run's close in one transaction, then the four kills
    assert world.ledger.applied == [("KillIntent",) * 4 + ("RunClose",)]
    calls = world.ledger.calls
    intents = calls.index("ledger.apply KillIntent+RunClose*5")
    for job in jobs[:4]:
        run = world.job(job).current_run
        assert run is not None and run.state == RunState.STOPPING
        assert calls.index(f"backend.kill {run.submission_id}") > intents
    assert world.job(jobs[4]).current_run_id == failing.id
    assert world.job(jobs[4]).state != JobState.RUNNING
    world.backend.confirm_kills()
    rec.tick()
    assert [world.job(j).state for j in jobs[:4]] == [JobState.STOPPED] * 4


def test_application_failing_closes_the_run_with_a_backoff(world: World) -> None:
    rec, job = running_job(world)
    assert job.current_run is not None and job.current_run.submission_id is not None
    world.backend.set_state(job.current_run.submission_id, AppState.FAILED)
    rec.tick()
    stored = world.job(job)
    assert stored.state == JobState.FAILED
    assert stored.current_run is not None and stored.current_run.state == RunState.FAILED
    assert stored.not_before is not None and stored.not_before > world.clock.at
    # backing off: no new submission until not_before
    rec.tick()
    assert len(world.ledger.runs_of(job.id)) == 1
    world.clock.advance(POLICY.backoff_initial + 1)
    rec.tick()
    assert len(world.ledger.runs_of(job.id)) == 2
    assert world.job(job).state == JobState.STARTING


def test_restart_budget_spent_gives_up_via_queued(world: World) -> None:
    job = world.ledger.add_job("orders", state=JobState.STOPPED)
    for _ in range(POLICY.max_attempts):
        world.ledger.add_failure(job.id)
    world.reconciler().tick()
    stored = world.job(job)
    assert stored.state == JobState.FAILED and stored.state_reason.startswith(GAVE_UP)
    assert transitions(world, job) == [("STOPPED", "QUEUED"), ("QUEUED", "FAILED")]
    assert world.backend.apps == {}


def test_desired_stopped_without_a_run_is_set_stopped(world: World) -> None:
    job = world.ledger.add_job("orders", desired=DesiredState.STOPPED, state=JobState.QUEUED)
    world.reconciler().tick()
    assert world.job(job).state == JobState.STOPPED
    assert world.backend.calls == world.ledger.calls  # one shared log
    assert not any(c.startswith("backend.submit") for c in world.ledger.calls)


def test_abnormal_cluster_holds_the_job_with_a_reason(world: World) -> None:
    job = world.ledger.add_job("orders")
    world.ledger.clusters["c1"] = cluster("c1", health="MANUAL_ABNORMAL")
    rec = world.reconciler()
    rec.tick()
    stored = world.job(job)
    held = abnormal_job_reason("c1", "MANUAL_ABNORMAL", "")
    assert (stored.state, stored.state_reason) == (JobState.QUEUED, held)
    assert rec.tick().actions == 0  # the reason is recorded once
    assert world.backend.apps == {}


def test_rejected_submission_fails_the_run_and_counts(world: World) -> None:
    job = world.ledger.add_job("orders")
    world.backend.reject_next = 1
    world.reconciler().tick()
    stored = world.job(job)
    assert stored.state == JobState.FAILED
    assert stored.current_run is not None and stored.current_run.state == RunState.FAILED
    assert "submission rejected" in stored.state_reason
    assert stored.not_before is not None
    query = FailureQuery(job.id, world.clock.at - timedelta(minutes=1))
    assert world.ledger.failures([query])[job.id].count == 1


def test_unreachable_cluster_makes_the_job_unknown_after_polls(world: World) -> None:
    rec, job = running_job(world)
    world.backend.unreachable = True
    rec.tick()
    rec.tick()
    assert world.job(job).state == JobState.RUNNING  # never a guess before the threshold
    rec.tick()
    assert world.job(job).state == JobState.UNKNOWN
    world.backend.unreachable = False
    rec.tick()
    assert world.job(job).state == JobState.RUNNING
    assert len(world.backend.apps) == 1


# -- crash points between record and act ----------------------------------------------------------


def test_crash_after_the_intent_resubmits_the_same_run_once(world: World) -> None:
    job = world.ledger.add_job("orders")
    world.ledger.crash("Intent", "after")
    with pytest.raises(Crash):
        world.reconciler().tick()
    assert world.backend.apps == {}
    intent = world.job(job).current_run
    assert intent is not None and intent.state == RunState.SUBMITTING
    world.reconciler().tick()  # the restarted actor: the run is in doubt, looked up only
    assert f"backend.submit {intent.app_name}" not in world.ledger.calls
    world.clock.advance(POLICY.in_doubt_grace)
    world.reconciler().tick()
    calls = world.ledger.calls
    assert calls.index(f"backend.find {intent.app_name}") < calls.index(
        f"backend.submit {intent.app_name}"
    )
    assert [a.app_name for a in world.backend.live()] == [intent.app_name]
    assert len(world.ledger.runs_of(job.id)) == 1  # the recorded run, not a new one
    assert world.job(job).state == JobState.STARTING


def test_crash_after_submit_before_recording_adopts_instead_of_resubmitting(
    world: World,
) -> None:
    job = world.ledger.add_job("orders")
    world.backend.crash_after_submit = True
    with pytest.raises(Crash):
        world.reconciler().tick()
    assert len(world.backend.apps) == 1
    rec = world.reconciler()
    rec.tick()
    rec.tick()
    assert len(world.backend.apps) == 1  # never a second submission
    assert world.ledger.calls.count("ledger.apply Adopted") == 1
    stored = world.job(job)
    assert stored.current_run is not None
    assert stored.current_run.submission_id == next(iter(world.backend.apps))
    world.backend.start_all()
    rec.tick()
    assert world.job(job).state == JobState.RUNNING


def test_crash_recording_the_submission_adopts_on_restart(world: World) -> None:
    job = world.ledger.add_job("orders")
    world.ledger.crash("Submitted", "before")
    with pytest.raises(Crash):
        world.reconciler().tick()
    world.reconciler().tick()
    assert len(world.backend.apps) == 1
    assert world.ledger.calls.count("ledger.apply Adopted") == 1
    assert world.job(job).current_run is not None


def test_crash_after_the_kill_intent_kills_on_restart(world: World) -> None:
    _, job = running_job(world)
    world.ledger.api_write(job.id, desired_state=DesiredState.STOPPED)
    world.ledger.crash("KillIntent", "after")
    with pytest.raises(Crash):
        world.reconciler().tick()
    assert len(world.backend.live()) == 1
    rec = world.reconciler()
    rec.tick()
    rec.tick()
    assert world.backend.live() == []
    assert world.job(job).state == JobState.STOPPED


def test_unknown_submission_outcome_is_looked_up_before_resubmitting(world: World) -> None:
    job = world.ledger.add_job("orders")
    world.backend.unreachable = True
    rec = world.reconciler()
    rec.tick()
    run = world.job(job).current_run
    assert run is not None and run.submission_id is None
    world.backend.unreachable = False
    world.clock.advance(POLICY.in_doubt_grace)
    rec.tick()
    calls = world.ledger.calls
    last_find = len(calls) - 1 - calls[::-1].index(f"backend.find {run.app_name}")
    assert last_find < calls.index(f"backend.submit {run.app_name}", last_find)
    assert len(world.ledger.runs_of(job.id)) == 1


# -- stale claims ------------------------------------------------------------------------------


def test_no_claim_means_no_tick(world: World) -> None:
    world.ledger.add_job("orders")
    world.claim = None
    stats = world.reconciler().tick()
    assert stats.paused and stats.jobs == 0
    assert world.ledger.calls == []


def test_lease_expired_mid_tick_stops_acting(world: World) -> None:
    for i in range(3):
        world.ledger.add_job(f"job-{i}")
    world.claim = Claim("default", ME, 0, 1, valid_until=world.clock.mono + 5)
    rec = world.reconciler()

    def expire() -> None:  # the process froze past its lease while reading
        world.clock.advance(10)
        world.claim = None

    world.ledger.before("read", expire)
    stats = rec.tick()
    assert stats.paused and not stats.complete
    assert world.backend.apps == {}
    assert world.ledger.applies("Intent") == []


def test_a_claim_with_an_older_epoch_takes_and_touches_nothing(world: World) -> None:
    newer = Fence("node-b", ME.epoch + 1)
    job = world.ledger.add_job("orders", owner=newer)
    stats = world.reconciler().tick()
    assert (stats.claimed, stats.jobs, stats.actions) == (0, 0, 0)
    assert world.job(job).owner == "node-b"
    assert world.backend.apps == {}


def test_job_taken_by_a_newer_epoch_before_the_intent_is_never_submitted(world: World) -> None:
    job = world.ledger.add_job("orders")
    world.ledger.before(
        "Intent", lambda: world.ledger.other_claims(job.id, Fence("node-b", ME.epoch + 1))
    )
    stats = world.reconciler().tick()
    assert stats.errors == 0  # NotOwner: left to its owner, not an error
    assert world.backend.apps == {}
    stored = world.job(job)
    assert (stored.state, stored.current_run_id, stored.version) == (JobState.QUEUED, None, 1)


def test_job_taken_before_the_kill_intent_is_never_killed(world: World) -> None:
    rec, job = running_job(world)
    world.ledger.api_write(job.id, desired_state=DesiredState.STOPPED)
    world.ledger.before(
        "KillIntent",
        lambda: world.ledger.other_claims(job.id, Fence("node-b", ME.epoch + 1)),
    )
    rec.tick()
    assert not any(c.startswith("backend.kill") for c in world.ledger.calls)
    assert len(world.backend.live()) == 1
    assert world.job(job).state == JobState.RUNNING


def test_not_owner_drops_the_job_from_the_tick(world: World) -> None:
    rec, job = running_job(world)
    world.ledger.other_claims(job.id, Fence("node-b", ME.epoch + 1))
    assert job.current_run is not None and job.current_run.submission_id is not None
    world.backend.set_state(job.current_run.submission_id, AppState.FAILED)
    stats = rec.tick()
    assert stats.errors == 0
    assert world.job(job).state == JobState.RUNNING  # not ours to close
    assert rec.tick().jobs == 0  # re-read: no longer ours


def test_stale_version_is_re_read_and_acted_on_next_tick(world: World) -> None:
    rec, job = running_job(world)
    world.ledger.before(
        "KillIntent",
        lambda: world.ledger.api_write(job.id, state_reason="touched"),
    )
    world.ledger.api_write(job.id, desired_state=DesiredState.STOPPED)
    rec.tick()  # StaleWrite: nothing killed
    assert world.backend.live() != []
    rec.tick()
    rec.tick()
    assert world.backend.live() == []
    assert world.job(job).state == JobState.STOPPED


# -- reads and parallel submissions -----------------------------------------------------------


def test_steady_ticks_read_only_changed_jobs(world: World) -> None:
    for i in range(5):
        world.ledger.add_job(f"job-{i}")
    rec = world.reconciler(full_read_every=60.0, change_margin=1.0)
    rec.tick()
    world.backend.start_all()
    rec.tick()
    world.clock.advance(5)
    assert rec.tick().rows_read == 5  # the last tick's own writes, read back once
    world.clock.advance(5)
    stats = rec.tick()
    assert (stats.full_read, stats.rows_read, stats.jobs) == (False, 0, 5)
    target = next(iter(world.ledger.jobs.values()))
    world.ledger.api_write(target.id, desired_state=DesiredState.STOPPED)
    stats = rec.tick()
    assert (stats.full_read, stats.rows_read) == (False, 1)
    assert world.job(target).state == JobState.STOPPING
    world.clock.advance(61)
    assert rec.tick().full_read  # the safety net


def test_jobs_claimed_mid_life_trigger_a_full_read(world: World) -> None:
    rec = world.reconciler(full_read_every=60.0)
    assert rec.tick().full_read
    world.ledger.add_job("new")
    stats = rec.tick()
    assert (stats.claimed, stats.full_read, stats.submissions) == (1, True, 1)


def test_submissions_run_in_parallel_within_the_bound(world: World) -> None:
    names = [f"job-{i:02d}" for i in range(12)]
    for name in names:
        world.ledger.add_job(name)
    gate = threading.Barrier(3, timeout=10)
    world.backend.on_submit = lambda request: _wait(gate)
    rec = world.reconciler(submit_workers=3)
    stats = rec.tick()
    rec.close()
    assert (stats.submissions, stats.errors) == (12, 0)
    assert world.backend.max_in_flight == 3
    assert sorted(a.app_name.split(":")[1] for a in world.backend.live()) == names


def _wait(gate: threading.Barrier) -> None:
    try:
        gate.wait()
    except threading.BrokenBarrierError:
        pass  # the last round has fewer than the bound


def test_reconcile_one_job_acts_like_a_tick(world: World) -> None:
    job = world.ledger.add_job("orders", owner=ME)
    rec = world.reconciler()
    rec.tick()
    world.backend.start_all()
    assert rec.reconcile(world.job(job)) is True
    assert world.job(job).state == JobState.RUNNING
    assert rec.reconcile(world.job(job)) is False
