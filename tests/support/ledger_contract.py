"""The ledger's contract (``scheduler.core.ledger``), one function per rule, for every
implementation.

A test module parametrizes over :data:`CONTRACT` with a :class:`Harness` of its ledger: the SQL
ledger on SQLite (unit) and on SQLite and MariaDB (integration), and the in-memory fake the
reconciler's unit tests use (so the fake cannot drift from the real thing).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

import pytest

from scheduler.core.errors import IllegalTransition, NotOwner, StaleWrite
from scheduler.core.ledger import (
    Adopted,
    DrainRequest,
    FailureQuery,
    Intent,
    KillIntent,
    Ledger,
    Observation,
    Proof,
    Reissue,
    RunClose,
    RunFence,
    StateMove,
    Submitted,
    UpgradeEnd,
    Write,
    fencing_digest,
)
from scheduler.core.ownership import Claim, Fence, owner_index
from scheduler.core.records import JobRecord
from scheduler.core.states import DesiredState, JobState, RunState
from scheduler.store.db import Store

ME = Fence("node-a", 4)
CLAIM = Claim("default", ME, 0, 1)


class Harness(Protocol):
    """A ledger and the writers around it, for the contract."""

    ledger: Ledger

    def add_job(self, name: str, *, desired: DesiredState = DesiredState.RUNNING) -> JobRecord:
        """A new unowned job in group ``default`` (QUEUED if desired RUNNING, else STOPPED)."""
        ...

    def job(self, job_id: int) -> JobRecord:
        """The job as stored, with its current run."""
        ...

    def api_write(self, job_id: int) -> None:
        """An operator's change through the API (bumps the version)."""
        ...

    def other_claims(self, job_id: int, fence: Fence) -> None: ...

    def transitions(self, job_id: int) -> list[tuple[str | None, str | None]]:
        """The job's state-change events, oldest first."""
        ...

    def now(self) -> datetime: ...


def _owned(h: Harness, name: str = "orders") -> JobRecord:
    job = h.add_job(name)
    assert h.ledger.claim(CLAIM) >= 1
    return h.job(job.id)


def _one(h: Harness, write: Write, fence: Fence = ME) -> JobRecord:
    """Apply one write; the job as written."""
    [written] = h.ledger.apply(fence, [write])
    return written


def _intent(h: Harness, job: JobRecord, reason: str = "desired RUNNING") -> JobRecord:
    cluster = h.ledger.read(ME, "default").primary_cluster
    return _one(h, Intent(job, cluster, f"/ck/{job.name}", reason))


def _submitted(h: Harness, name: str = "orders") -> JobRecord:
    job = _intent(h, _owned(h, name))
    return _one(h, Submitted(job, f"driver-{name}", None, h.now()))


def claim_takes_the_slot_but_never_from_a_newer_epoch(h: Harness) -> None:
    names = [f"job-{i}" for i in range(8)]
    for name in names:
        h.add_job(name)
    mine = [n for n in names if owner_index(n, 2) == 0]
    assert h.ledger.claim(Claim("default", ME, 0, 2)) == len(mine)
    assert h.ledger.claim(Claim("default", ME, 0, 2)) == 0  # already ours
    assert sorted(j.name for j in h.ledger.read(ME, "default").jobs) == sorted(mine)
    older = Claim("default", Fence("node-b", ME.epoch - 1), 0, 1)
    assert h.ledger.claim(older) == len(names) - len(mine)  # only the unclaimed ones
    assert sorted(j.name for j in h.ledger.read(ME, "default").jobs) == sorted(mine)


def a_cheap_claim_takes_only_unowned_jobs(h: Harness) -> None:
    held = h.add_job("held")
    h.other_claims(held.id, Fence("node-b", ME.epoch - 1))
    new = h.add_job("new")
    assert h.ledger.claim(CLAIM, only_unowned=True) == 1
    assert (h.job(new.id).owner, h.job(held.id).owner) == (ME.node_id, "node-b")
    assert h.ledger.claim(CLAIM) == 1  # the full claim takes the older epoch's job too
    assert h.job(held.id).owner == ME.node_id


def read_in_full_or_only_what_changed(h: Harness) -> None:
    first = _owned(h, "first")
    h.add_job("second")
    h.ledger.claim(CLAIM)
    view = h.ledger.read(ME, "default")
    assert {j.name for j in view.jobs} == {"first", "second"}
    assert view.primary_cluster in view.clusters
    mark = h.now()
    assert h.ledger.read(ME, "default", changed_since=mark).jobs == []
    h.api_write(first.id)
    changed = h.ledger.read(ME, "default", changed_since=mark)
    assert [j.name for j in changed.jobs] == ["first"]
    both = h.ledger.read(ME, "default", changed_since=h.now(), ids=[first.id])
    assert [j.name for j in both.jobs] == ["first"]
    assert h.ledger.read(Fence("node-b", ME.epoch), "default").jobs == []


def intent_submission_observation_and_close(h: Harness) -> None:
    job = _owned(h)
    cluster = h.ledger.read(ME, "default").primary_cluster
    written = _one(h, Intent(job, cluster, "/ck/orders", "desired RUNNING"))
    run = written.current_run
    assert run is not None and written == h.job(job.id)
    assert (written.state, run.state, run.attempt, run.owner_epoch) == (
        JobState.SUBMITTING,
        RunState.SUBMITTING,
        1,
        ME.epoch,
    )
    assert run.app_name.endswith(f":{run.id}") and run.fencing_token
    assert written.version == job.version + 1
    started = _one(h, Submitted(written, "driver-1", "app-1", h.now()))
    assert started == h.job(job.id)
    assert started.current_run is not None and started.current_run.submission_id == "driver-1"
    observed = Observation(
        started, RunState.RUNNING, JobState.RUNNING, "application app-1 is RUNNING", None, h.now()
    )
    running = _one(h, observed)
    assert running == h.job(job.id)
    assert running.state == JobState.RUNNING
    ended = h.now()
    closed = _one(
        h,
        RunClose(
            running,
            RunState.FAILED,
            JobState.FAILED,
            "exit code 1",
            exit_code=1,
            counts_as_failure=True,
            ended_at=ended,
            not_before=ended + timedelta(seconds=2),
        ),
    )
    stored = h.job(job.id)
    assert closed == stored and stored.state == JobState.FAILED
    assert stored.current_run is not None and stored.current_run.state == RunState.FAILED
    assert stored.not_before == ended + timedelta(seconds=2)
    assert h.transitions(job.id)[-4:] == [
        ("QUEUED", "SUBMITTING"),
        ("SUBMITTING", "STARTING"),
        ("STARTING", "RUNNING"),
        ("RUNNING", "FAILED"),
    ]
    failures = h.ledger.failures([FailureQuery(job.id, ended - timedelta(seconds=1))])
    assert (failures[job.id].count, failures[job.id].last_at) == (1, ended)
    assert h.ledger.failures([FailureQuery(job.id, ended + timedelta(seconds=1))]) == {}
    again = _one(h, Intent(closed, cluster, "/ck/orders", "restart"))
    assert again.current_run is not None and again.current_run.attempt == 2
    assert again.not_before is None and again == h.job(job.id)
    assert h.transitions(job.id)[-2:] == [("FAILED", "QUEUED"), ("QUEUED", "SUBMITTING")]


def observations_land_together_or_not_at_all(h: Harness) -> None:
    jobs = [_submitted(h, name) for name in ("a", "b", "c")]
    at = h.now()

    def running(job: JobRecord) -> Observation:
        return Observation(job, RunState.RUNNING, JobState.RUNNING, "up", "app-x", at)

    h.api_write(jobs[2].id)
    moved = h.job(jobs[2].id)
    with pytest.raises(StaleWrite):
        h.ledger.apply(ME, [running(j) for j in jobs])
    assert [h.job(j.id).version for j in jobs[:2]] == [j.version for j in jobs[:2]]
    assert h.job(jobs[2].id) == moved
    written = h.ledger.apply(ME, [running(j) for j in jobs[:2]])
    assert written == [h.job(j.id) for j in jobs[:2]]
    for job in written:
        assert job.state == JobState.RUNNING and job.current_run is not None
        assert (job.current_run.state, job.current_run.app_id) == (RunState.RUNNING, "app-x")
        assert job.current_run.started_at == at
        assert h.transitions(job.id)[-1] == ("STARTING", "RUNNING")


def intents_and_submissions_land_together_or_not_at_all(h: Harness) -> None:
    """The batched intents and outcomes of a tick's submissions: the same rows and events as
    one by one, all or nothing (a moved job or a stale fence: StaleWrite, nothing changed)."""
    cluster = h.ledger.read(ME, "default").primary_cluster
    jobs = [_owned(h, name) for name in ("a", "b", "c")]
    # "c" ran once already: its next attempt is 2, its path goes through QUEUED again
    c = _intent(h, jobs[2], "r")
    c = _one(
        h,
        RunClose(c, RunState.FAILED, JobState.FAILED, "exit code 1", 1, True, h.now()),
    )
    jobs[2] = h.job(c.id)

    def intent(job: JobRecord) -> Intent:
        return Intent(job, cluster, f"/ck/{job.name}", "desired RUNNING", note=f"note {job.name}")

    h.api_write(jobs[1].id)
    moved = h.job(jobs[1].id)
    with pytest.raises(StaleWrite):
        h.ledger.apply(ME, [intent(j) for j in jobs])
    assert [h.job(j.id) for j in (jobs[0], jobs[2])] == [jobs[0], jobs[2]]
    assert h.job(jobs[1].id) == moved
    jobs[1] = moved
    written = h.ledger.apply(ME, [intent(j) for j in jobs])
    assert written == [h.job(j.id) for j in jobs]
    for job, before in zip(written, jobs, strict=True):
        run = job.current_run
        assert run is not None and job.state == JobState.SUBMITTING
        assert (run.state, run.owner_epoch, run.cluster) == (RunState.SUBMITTING, ME.epoch, cluster)
        assert run.checkpoint_location == f"/ck/{job.name}" and run.fencing_token
        assert run.app_name.endswith(f":{run.id}") and job.version == before.version + 1
    assert [j.current_run.attempt for j in written if j.current_run] == [1, 1, 2]
    assert h.transitions(jobs[2].id)[-2:] == [("FAILED", "QUEUED"), ("QUEUED", "SUBMITTING")]
    at = h.now()

    def outcome(job: JobRecord) -> Submitted:
        return Submitted(job, f"driver-{job.name}", f"app-{job.name}", at)

    with pytest.raises(StaleWrite):  # another node's newer claim on one of them
        h.other_claims(written[0].id, Fence("node-b", ME.epoch + 1))
        h.ledger.apply(ME, [outcome(j) for j in written])
    assert [h.job(j.id).version for j in written[1:]] == [j.version for j in written[1:]]
    started = h.ledger.apply(ME, [outcome(j) for j in written[1:]])
    assert started == [h.job(j.id) for j in written[1:]]
    for job in started:
        run = job.current_run
        assert run is not None and job.state == JobState.STARTING
        assert (run.state, run.submission_id, run.app_id) == (
            RunState.STARTING,
            f"driver-{job.name}",
            f"app-{job.name}",
        )
        assert run.submitted_at == at
        assert h.transitions(job.id)[-1] == ("SUBMITTING", "STARTING")


def writes_of_several_kinds_land_together_or_not_at_all(h: Harness) -> None:
    """One apply of an intent, a proof, an observation and a state move: all in one
    transaction (each job as written, in order), or nothing when one of them does not hold."""
    fresh, proven, started = _owned(h, "fresh"), _owned(h, "proven"), _submitted(h, "started")
    stopped = h.add_job("stopped", desired=DesiredState.STOPPED)
    h.ledger.claim(CLAIM)
    stopped = h.job(stopped.id)
    cluster = h.ledger.read(ME, "default").primary_cluster

    def writes() -> list[Write]:
        return [
            Intent(h.job(fresh.id), cluster, "/ck/fresh", "desired RUNNING"),
            Proof(h.job(proven.id)),
            Observation(h.job(started.id), RunState.RUNNING, JobState.RUNNING, "up"),
            StateMove(stopped, (JobState.QUEUED, JobState.FAILED), "gave up", clear_backoff=True),
        ]

    h.api_write(stopped.id)
    before = [h.job(j.id) for j in (fresh, proven, started)]
    with pytest.raises(StaleWrite):
        h.ledger.apply(ME, writes())
    assert [h.job(j.id) for j in (fresh, proven, started)] == before
    stopped = h.job(stopped.id)
    written = h.ledger.apply(ME, writes())
    assert written == [h.job(j.id) for j in (fresh, proven, started, stopped)]
    assert [j.state for j in written] == [
        JobState.SUBMITTING,
        JobState.QUEUED,
        JobState.RUNNING,
        JobState.FAILED,
    ]
    assert written[1] == before[1]  # the proof changed nothing
    assert h.transitions(stopped.id)[-2:] == [("STOPPED", "QUEUED"), ("QUEUED", "FAILED")]
    with pytest.raises(StaleWrite):  # a job twice in one apply
        h.ledger.apply(ME, [Proof(written[1]), Proof(written[1])])


def a_batch_proof_holds_only_for_all(h: Harness) -> None:
    jobs = [_owned(h, name) for name in ("a", "b", "c")]
    assert h.ledger.apply(ME, [Proof(j) for j in jobs]) == jobs  # changes nothing
    assert [h.job(j.id) for j in jobs] == jobs
    h.api_write(jobs[1].id)
    with pytest.raises(StaleWrite) as raised:
        h.ledger.apply(ME, [Proof(j) for j in jobs])
    assert not isinstance(raised.value, NotOwner)
    h.other_claims(jobs[2].id, Fence("node-b", ME.epoch + 1))
    with pytest.raises(NotOwner):
        h.ledger.apply(ME, [Proof(jobs[0]), Proof(jobs[2])])
    h.ledger.apply(ME, [Proof(jobs[0])])
    assert h.job(jobs[0].id) == jobs[0]


def adoption_records_the_found_application(h: Harness) -> None:
    job = _intent(h, _owned(h))
    adopted = _one(h, Adopted(job, "driver-9", None, h.now()))
    stored = h.job(job.id)
    assert adopted == stored and stored.state == JobState.SUBMITTING
    assert stored.current_run is not None and stored.current_run.submission_id == "driver-9"
    assert stored.version == job.version + 1


def fencing_tokens_are_kept_as_digests(h: Harness) -> None:
    """An intent's token and a reissued one come back once, on the record ``apply`` returns;
    what is kept is their digest. A reissue proves the claim and needs the run still open."""
    intent = Intent(_owned(h), h.ledger.read(ME, "default").primary_cluster, "/ck/o", "go")
    job = _one(h, intent)
    run = job.current_run
    assert run is not None and run.fencing_secret == intent.fencing_token
    assert run.fencing_token == fencing_digest(intent.fencing_token) != intent.fencing_token
    reissue = Reissue(job)
    again = _one(h, reissue)
    assert (
        again.current_run is not None and again.current_run.fencing_secret == reissue.fencing_token
    )
    stored = h.job(job.id).current_run
    assert stored is not None and stored.fencing_token == fencing_digest(reissue.fencing_token)
    assert again.version == job.version + 1 and reissue.fencing_token != intent.fencing_token
    with pytest.raises(NotOwner):
        _one(h, Reissue(again), Fence("node-a", ME.epoch - 1))
    close = RunClose(again, RunState.FAILED, JobState.FAILED, "gone", 1, False, h.now())
    closed = _one(h, close)
    with pytest.raises(StaleWrite):
        _one(h, Reissue(closed))


def intents_and_reissues_record_when_the_submission_was_decided(h: Harness) -> None:
    """An intent's run records its creation as its latest submission decision, a reissue its
    own ``at``, as stored (the planner's in-doubt grace counts from it), and the digest of the
    token it replaced; recording the submission's outcome moves neither."""
    job = _intent(h, _owned(h))
    run = job.current_run
    assert run is not None and run.submit_intent_at == run.created_at
    stored = h.job(job.id).current_run
    assert stored is not None and stored.submit_intent_at == run.submit_intent_at
    at = run.created_at + timedelta(seconds=42, microseconds=7)
    again = _one(h, Reissue(job, at=at))
    assert again.current_run is not None and again.current_run.submit_intent_at == at
    stored = h.job(job.id).current_run
    assert stored is not None and stored.submit_intent_at == at
    # the replaced token's digest is kept: a late driver carrying it is the run's duplicate
    assert stored.superseded_tokens == run.fencing_token
    third = _one(h, Reissue(again, at=at))
    assert third.current_run is not None
    stored = h.job(job.id).current_run
    assert stored is not None
    assert stored.superseded_tokens == f"{run.fencing_token},{again.current_run.fencing_token}"
    again = third
    stored = h.job(job.id).current_run
    assert stored is not None and stored.submit_intent_at == at


def kill_intent_then_proof(h: Harness) -> None:
    job = _submitted(h)
    stopping = _one(h, KillIntent(job, "desired STOPPED"))
    stored = h.job(job.id)
    assert stopping == stored and stored.state == JobState.STOPPING
    assert stored.current_run is not None and stored.current_run.state == RunState.STOPPING
    assert stored.state_reason == "stopping: desired STOPPED"
    again = _one(h, KillIntent(stopping, "desired STOPPED"))
    assert again.version == h.job(job.id).version  # a proof, not a change
    with pytest.raises(NotOwner):
        _one(h, KillIntent(stopping, "late"), Fence("node-a", ME.epoch - 1))


def drain_fence_and_upgrade_end(h: Harness) -> None:
    """A graceful stop's deadline, a fenced run (closed LOST, the job through its path) and the
    end of an upgrade: each with its events."""
    running = _one(
        h, Observation(_submitted(h), RunState.RUNNING, JobState.RUNNING, "up", None, h.now())
    )
    deadline = h.now() + timedelta(seconds=30)
    draining = _one(h, DrainRequest(running, deadline, "desired STOPPED"))
    assert draining == h.job(running.id) and draining.state == JobState.STOPPING
    assert draining.current_run is not None and draining.current_run.drain_deadline == deadline
    assert draining.current_run.state == RunState.RUNNING
    assert h.transitions(running.id)[-1] == ("RUNNING", "STOPPING")
    at = h.now()
    path = (JobState.QUEUED,)
    fenced = _one(h, RunFence(draining, "fenced: cluster abnormal", path, at))
    stored = h.job(running.id)
    assert fenced == stored and (stored.state, stored.state_reason) == (
        JobState.QUEUED,
        "fenced: cluster abnormal",
    )
    run = stored.current_run
    assert run is not None and (run.state, run.fenced_at, run.ended_at) == (RunState.LOST, at, at)
    assert h.transitions(running.id)[-1] == ("STOPPING", "QUEUED")
    with pytest.raises(StaleWrite):  # the run is closed: no run write any more
        _one(h, Observation(fenced, RunState.RUNNING, JobState.RUNNING, "up"))
    assert h.ledger.failures([FailureQuery(running.id, at - timedelta(seconds=1))]) == {}
    ended = _one(h, UpgradeEnd(fenced, "upgrade to revision 2 is over"))
    assert ended == h.job(running.id) and ended.version == fenced.version + 1
    assert (ended.state, ended.state_reason) == (fenced.state, fenced.state_reason)
    assert (ended.upgrade_deadline, ended.upgrade_from) == (None, None)
    assert h.transitions(running.id)[-1] == ("STOPPING", "QUEUED")  # a note, not a move


def state_path_and_reason(h: Harness) -> None:
    job = h.add_job("orders", desired=DesiredState.STOPPED)
    h.ledger.claim(CLAIM)
    job = h.job(job.id)
    assert job.state == JobState.STOPPED
    failed = _one(h, StateMove(job, (JobState.QUEUED, JobState.FAILED), "gave up", True))
    assert failed == h.job(job.id) and failed.state_reason == "gave up"
    assert h.transitions(job.id)[-2:] == [("STOPPED", "QUEUED"), ("QUEUED", "FAILED")]
    held = _one(h, StateMove(failed, (), "waiting"))
    assert (
        (held.state, held.state_reason)
        == (JobState.FAILED, "waiting")
        == (
            h.job(job.id).state,
            h.job(job.id).state_reason,
        )
    )
    with pytest.raises(IllegalTransition):
        _one(h, StateMove(held, (JobState.RUNNING,), "nope"))
    assert h.job(job.id).version == held.version


def _writes(h: Harness, job: JobRecord) -> list[Write]:
    return [
        Proof(job),
        StateMove(job, (JobState.STOPPING,), "stop"),
        Observation(job, RunState.RUNNING, JobState.RUNNING, "r"),
        KillIntent(job, "stop"),
        Adopted(job, "d", None, h.now()),
        RunClose(job, RunState.KILLED, JobState.FAILED, "gone", None, False, h.now()),
        DrainRequest(job, h.now(), "stop"),
        RunFence(job, "fenced", (JobState.STOPPING, JobState.QUEUED), h.now()),
        UpgradeEnd(job, "over"),
    ]


def a_stale_fence_changes_nothing(h: Harness) -> None:
    job = _submitted(h)
    before = h.job(job.id)
    h.other_claims(job.id, Fence("node-b", ME.epoch + 1))
    taken = h.job(job.id)
    for write in _writes(h, job):
        with pytest.raises(NotOwner):
            _one(h, write)
    assert h.job(job.id) == taken and taken.version == before.version
    other = _owned(h, "other")
    h.other_claims(other.id, Fence("node-b", ME.epoch + 1))
    with pytest.raises(NotOwner):
        _one(h, Intent(other, "c", "/ck", "r"))
    assert h.job(other.id).current_run_id is None and h.job(other.id).version == other.version


def a_stale_version_changes_nothing(h: Harness) -> None:
    job = _submitted(h)
    h.api_write(job.id)
    moved = h.job(job.id)
    for write in _writes(h, job):
        with pytest.raises(StaleWrite) as raised:
            _one(h, write)
        assert not isinstance(raised.value, NotOwner)
    assert h.job(job.id) == moved


CONTRACT: list[Callable[[Harness], None]] = [
    claim_takes_the_slot_but_never_from_a_newer_epoch,
    a_cheap_claim_takes_only_unowned_jobs,
    read_in_full_or_only_what_changed,
    intent_submission_observation_and_close,
    observations_land_together_or_not_at_all,
    intents_and_submissions_land_together_or_not_at_all,
    writes_of_several_kinds_land_together_or_not_at_all,
    a_batch_proof_holds_only_for_all,
    adoption_records_the_found_application,
    fencing_tokens_are_kept_as_digests,
    intents_and_reissues_record_when_the_submission_was_decided,
    kill_intent_then_proof,
    drain_fence_and_upgrade_end,
    state_path_and_reason,
    a_stale_fence_changes_nothing,
    a_stale_version_changes_nothing,
]


# -- harnesses --------------------------------------------------------------------------------


class FakeHarness:
    """The contract around :class:`tests.support.fakes.FakeLedger`."""

    def __init__(self) -> None:
        from tests.support.fakes import Clock, FakeLedger

        self.clock = Clock()
        self.fake = FakeLedger(self.clock, node_id=ME.node_id)
        self.ledger: Ledger = self.fake
        self._writes = 0

    def add_job(self, name: str, *, desired: DesiredState = DesiredState.RUNNING) -> JobRecord:
        state = JobState.QUEUED if desired == DesiredState.RUNNING else JobState.STOPPED
        return self.fake.add_job(name, desired=desired, state=state)

    def job(self, job_id: int) -> JobRecord:
        return self.fake.job(job_id)

    def api_write(self, job_id: int) -> None:
        self._writes += 1
        self.fake.api_write(job_id, team=f"team-{self._writes}")

    def other_claims(self, job_id: int, fence: Fence) -> None:
        self.fake.other_claims(job_id, fence)

    def transitions(self, job_id: int) -> list[tuple[str | None, str | None]]:
        return [
            (e.from_state, e.to_state)
            for e in self.fake.events
            if e.job_id == job_id and e.to_state is not None
        ]

    def now(self) -> datetime:
        return self.clock.now()


class SqlHarness:
    """The contract around :class:`scheduler.store.ledger.SqlLedger` on a migrated store with
    the default group."""

    def __init__(self, store: Store) -> None:
        from scheduler.core.backend import app_name_for
        from scheduler.store.ledger import SqlLedger

        self.store = store
        self.ledger: Ledger = SqlLedger(store, node_id=ME.node_id, app_name_for=app_name_for)
        self._names: dict[int, str] = {}
        self._writes = 0

    def add_job(self, name: str, *, desired: DesiredState = DesiredState.RUNNING) -> JobRecord:
        from scheduler.core.records import JobSpec
        from scheduler.store import jobs as jobs_store

        spec = JobSpec(name=name, entrypoint="file:///pipelines/p.py", desired_state=desired)
        with self.store.transaction() as session:
            job = jobs_store.create_job(session, spec, cause="test", node_id="test")
        self._names[job.id] = name
        return job

    def job(self, job_id: int) -> JobRecord:
        from scheduler.store import jobs as jobs_store

        with self.store.session() as session:
            return jobs_store.get_job(session, self._names[job_id])

    def api_write(self, job_id: int) -> None:
        from scheduler.store import jobs as jobs_store

        self._writes += 1
        with self.store.transaction() as session:
            jobs_store.update_job_spec(
                session,
                self._names[job_id],
                {"team": f"team-{self._writes}"},
                expected_version=None,
                cause="api",
                node_id="test",
            )

    def other_claims(self, job_id: int, fence: Fence) -> None:
        from sqlalchemy import update

        from scheduler.store.models import Job

        with self.store.transaction() as session:
            session.execute(
                update(Job)
                .where(Job.id == job_id)
                .values(owner=fence.node_id, owner_epoch=fence.epoch)
            )

    def transitions(self, job_id: int) -> list[tuple[str | None, str | None]]:
        from sqlalchemy import select

        from scheduler.store.models import JobEvent

        with self.store.session() as session:
            rows = session.execute(
                select(JobEvent.from_state, JobEvent.to_state)
                .where(JobEvent.job_id == job_id, JobEvent.to_state.is_not(None))
                .order_by(JobEvent.id)
            )
            return [(a, b) for a, b in rows]

    def now(self) -> datetime:
        from scheduler.core.clock import utcnow

        return utcnow()
