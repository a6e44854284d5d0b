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
from scheduler.core.ledger import FailureQuery, Intent, Ledger, Observation, Submitted
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


def _submitted(h: Harness) -> JobRecord:
    job = _owned(h)
    cluster = h.ledger.read(ME, "default").primary_cluster
    job = h.ledger.record_intent(
        job, ME, cluster=cluster, checkpoint_location="/ck/orders", reason="desired RUNNING"
    )
    return h.ledger.record_submitted(job, ME, submission_id="driver-1", app_id=None, at=h.now())


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
    written = h.ledger.record_intent(
        job, ME, cluster=cluster, checkpoint_location="/ck/orders", reason="desired RUNNING"
    )
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
    started = h.ledger.record_submitted(
        written, ME, submission_id="driver-1", app_id="app-1", at=h.now()
    )
    assert started == h.job(job.id)
    assert started.current_run is not None and started.current_run.submission_id == "driver-1"
    running = h.ledger.record_observed(
        started,
        ME,
        run_state=RunState.RUNNING,
        job_state=JobState.RUNNING,
        reason="application app-1 is RUNNING",
        started_at=h.now(),
    )
    assert running == h.job(job.id)
    assert running.state == JobState.RUNNING
    ended = h.now()
    closed = h.ledger.close_run(
        running,
        ME,
        run_state=RunState.FAILED,
        job_state=JobState.FAILED,
        reason="exit code 1",
        exit_code=1,
        counts_as_failure=True,
        ended_at=ended,
        not_before=ended + timedelta(seconds=2),
    )
    stored = h.job(job.id)
    assert closed.version == stored.version and stored.state == JobState.FAILED
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
    again = h.ledger.record_intent(
        closed, ME, cluster=cluster, checkpoint_location="/ck/orders", reason="restart"
    )
    assert again.current_run is not None and again.current_run.attempt == 2
    assert h.transitions(job.id)[-2:] == [("FAILED", "QUEUED"), ("QUEUED", "SUBMITTING")]


def observations_land_together_or_not_at_all(h: Harness) -> None:
    cluster = h.ledger.read(ME, "default").primary_cluster
    jobs = []
    for name in ("a", "b", "c"):
        job = _owned(h, name)
        job = h.ledger.record_intent(
            job, ME, cluster=cluster, checkpoint_location="/ck", reason="desired RUNNING"
        )
        jobs.append(
            h.ledger.record_submitted(job, ME, submission_id=f"d-{name}", app_id=None, at=h.now())
        )
    at = h.now()

    def running(job: JobRecord) -> Observation:
        return Observation(job, RunState.RUNNING, JobState.RUNNING, "up", "app-x", at)

    h.api_write(jobs[2].id)
    moved = h.job(jobs[2].id)
    with pytest.raises(StaleWrite):
        h.ledger.record_observed_all(ME, [running(j) for j in jobs])
    assert [h.job(j.id).version for j in jobs[:2]] == [j.version for j in jobs[:2]]
    assert h.job(jobs[2].id) == moved
    written = h.ledger.record_observed_all(ME, [running(j) for j in jobs[:2]])
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
    c = h.ledger.record_intent(jobs[2], ME, cluster=cluster, checkpoint_location="/ck", reason="r")
    c = h.ledger.close_run(
        c,
        ME,
        run_state=RunState.FAILED,
        job_state=JobState.FAILED,
        reason="exit code 1",
        exit_code=1,
        counts_as_failure=True,
        ended_at=h.now(),
    )
    jobs[2] = h.job(c.id)

    def intent(job: JobRecord) -> Intent:
        return Intent(job, cluster, f"/ck/{job.name}", "desired RUNNING", note=f"note {job.name}")

    h.api_write(jobs[1].id)
    moved = h.job(jobs[1].id)
    with pytest.raises(StaleWrite):
        h.ledger.record_intents(ME, [intent(j) for j in jobs])
    assert [h.job(j.id) for j in (jobs[0], jobs[2])] == [jobs[0], jobs[2]]
    assert h.job(jobs[1].id) == moved
    jobs[1] = moved
    written = h.ledger.record_intents(ME, [intent(j) for j in jobs])
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
        h.ledger.record_submitted_all(ME, [outcome(j) for j in written])
    assert [h.job(j.id).version for j in written[1:]] == [j.version for j in written[1:]]
    started = h.ledger.record_submitted_all(ME, [outcome(j) for j in written[1:]])
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


def a_batch_proof_holds_only_for_all(h: Harness) -> None:
    jobs = [_owned(h, name) for name in ("a", "b", "c")]
    h.ledger.prove_all(ME, jobs)  # changes nothing
    assert [h.job(j.id) for j in jobs] == jobs
    h.api_write(jobs[1].id)
    with pytest.raises(StaleWrite):
        h.ledger.prove_all(ME, jobs)
    h.other_claims(jobs[2].id, Fence("node-b", ME.epoch + 1))
    with pytest.raises(StaleWrite):
        h.ledger.prove_all(ME, [jobs[0], jobs[2]])
    h.ledger.prove_all(ME, [jobs[0]])
    assert h.job(jobs[0].id) == jobs[0]


def adoption_records_the_found_application(h: Harness) -> None:
    job = _owned(h)
    cluster = h.ledger.read(ME, "default").primary_cluster
    job = h.ledger.record_intent(
        job, ME, cluster=cluster, checkpoint_location="/ck", reason="desired RUNNING"
    )
    adopted = h.ledger.record_adopted(job, ME, submission_id="driver-9", app_id=None, at=h.now())
    stored = h.job(job.id)
    assert adopted == stored and stored.state == JobState.SUBMITTING
    assert stored.current_run is not None and stored.current_run.submission_id == "driver-9"


def kill_intent_then_proof(h: Harness) -> None:
    job = _submitted(h)
    stopping = h.ledger.record_kill_intent(job, ME, reason="desired STOPPED")
    stored = h.job(job.id)
    assert stopping == stored and stored.state == JobState.STOPPING
    assert stored.current_run is not None and stored.current_run.state == RunState.STOPPING
    again = h.ledger.record_kill_intent(stopping, ME, reason="desired STOPPED")
    assert again.version == h.job(job.id).version  # a proof, not a change
    with pytest.raises(NotOwner):
        h.ledger.record_kill_intent(stopping, Fence("node-a", ME.epoch - 1), reason="late")


def state_path_and_reason(h: Harness) -> None:
    job = h.add_job("orders", desired=DesiredState.STOPPED)
    h.ledger.claim(CLAIM)
    job = h.job(job.id)
    assert job.state == JobState.STOPPED
    failed = h.ledger.record_state(
        job, ME, [JobState.QUEUED, JobState.FAILED], "gave up", not_before=None
    )
    assert failed == h.job(job.id) and failed.state_reason == "gave up"
    assert h.transitions(job.id)[-2:] == [("STOPPED", "QUEUED"), ("QUEUED", "FAILED")]
    held = h.ledger.record_state(failed, ME, [], "waiting")
    assert (
        (held.state, held.state_reason)
        == (JobState.FAILED, "waiting")
        == (
            h.job(job.id).state,
            h.job(job.id).state_reason,
        )
    )
    with pytest.raises(IllegalTransition):
        h.ledger.record_state(held, ME, [JobState.RUNNING], "nope")
    assert h.job(job.id).version == held.version


def _writes(h: Harness, job: JobRecord, fence: Fence) -> list[Callable[[], object]]:
    return [
        lambda: h.ledger.prove(job, fence),
        lambda: h.ledger.record_state(job, fence, [JobState.STOPPING], "stop"),
        lambda: h.ledger.record_observed(
            job, fence, run_state=RunState.RUNNING, job_state=JobState.RUNNING, reason="r"
        ),
        lambda: h.ledger.record_kill_intent(job, fence, reason="stop"),
        lambda: h.ledger.record_adopted(job, fence, submission_id="d", app_id=None, at=h.now()),
        lambda: h.ledger.close_run(
            job,
            fence,
            run_state=RunState.KILLED,
            job_state=JobState.FAILED,
            reason="gone",
            exit_code=None,
            counts_as_failure=False,
            ended_at=h.now(),
        ),
    ]


def a_stale_fence_changes_nothing(h: Harness) -> None:
    job = _submitted(h)
    before = h.job(job.id)
    h.other_claims(job.id, Fence("node-b", ME.epoch + 1))
    taken = h.job(job.id)
    for write in _writes(h, job, ME):
        with pytest.raises(NotOwner):
            write()
    assert h.job(job.id) == taken and taken.version == before.version
    other = _owned(h, "other")
    h.other_claims(other.id, Fence("node-b", ME.epoch + 1))
    with pytest.raises(NotOwner):
        h.ledger.record_intent(other, ME, cluster="c", checkpoint_location="/ck", reason="r")
    assert h.job(other.id).current_run_id is None and h.job(other.id).version == other.version


def a_stale_version_changes_nothing(h: Harness) -> None:
    job = _submitted(h)
    h.api_write(job.id)
    moved = h.job(job.id)
    for write in _writes(h, job, ME):
        with pytest.raises(StaleWrite) as raised:
            write()
        assert not isinstance(raised.value, NotOwner)
    assert h.job(job.id) == moved


CONTRACT: list[Callable[[Harness], None]] = [
    claim_takes_the_slot_but_never_from_a_newer_epoch,
    a_cheap_claim_takes_only_unowned_jobs,
    read_in_full_or_only_what_changed,
    intent_submission_observation_and_close,
    observations_land_together_or_not_at_all,
    intents_and_submissions_land_together_or_not_at_all,
    a_batch_proof_holds_only_for_all,
    adoption_records_the_found_application,
    kill_intent_then_proof,
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
