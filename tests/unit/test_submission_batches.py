"""A tick with many submissions records their intents and outcomes in batches.

Against the in-memory ledger and backend: the same rows and events as one by one, a batch whose
transaction does not land falls back to one by one (each job then gets its own answer), and a
lease that runs out mid-batch stops the submissions that had not been sent (their runs are looked
up on the cluster at the next tick, never blindly resubmitted).
"""

from __future__ import annotations

from scheduler.core.ownership import Claim, Fence
from scheduler.core.states import JobState, RunState
from scheduler.decisions.planning import RestartPolicy
from scheduler.loops.reconciler import PROOF_TTL, SUBMIT_BATCH, Reconciler
from tests.support.fakes import Clock, FakeBackend, FakeBackends, FakeLedger

ME = Fence("node-a", 4)


def _world(jobs: int) -> tuple[FakeLedger, FakeBackend, Clock, list[int]]:
    clock = Clock()
    ledger = FakeLedger(clock, node_id=ME.node_id)
    backend = FakeBackend(calls=ledger.calls)
    ids = [ledger.add_job(f"job-{i:03d}").id for i in range(jobs)]
    return ledger, backend, clock, ids


def _reconciler(
    ledger: FakeLedger, backend: FakeBackend, clock: Clock, claim: list[Claim | None]
) -> Reconciler:
    return Reconciler(
        ledger,
        FakeBackends(c1=backend),
        node_id=ME.node_id,
        group="default",
        claim=lambda: claim[0],
        policy=RestartPolicy(),
        clock=clock.now,
        monotonic=clock.monotonic,
        submit_workers=4,
    )


def test_many_submissions_are_recorded_in_batches() -> None:
    ledger, backend, clock, ids = _world(100)
    rec = _reconciler(ledger, backend, clock, [Claim("default", ME, 0, 1)])
    stats = rec.tick()
    rec.close()
    assert (stats.submissions, stats.errors) == (100, 0)
    batches = ledger.applies("Intent")
    assert len(batches) == 100 // SUBMIT_BATCH + (100 % SUBMIT_BATCH > 0)
    assert sum(batches) == 100 and max(batches) == SUBMIT_BATCH and 1 not in batches
    assert sorted(ledger.applies("Submitted")) == sorted(batches)
    for job_id in ids:
        job = ledger.job(job_id)
        assert job.state == JobState.STARTING
        assert job.current_run is not None and job.current_run.state == RunState.STARTING
        assert job.current_run.submission_id is not None
    assert len(backend.live()) == 100
    # the same events as one by one: QUEUED -> SUBMITTING -> STARTING per job
    moves = [(e.from_state, e.to_state) for e in ledger.events if e.to_state is not None]
    assert moves.count(("QUEUED", "SUBMITTING")) == moves.count(("SUBMITTING", "STARTING")) == 100


def test_a_batch_that_does_not_land_is_recorded_one_by_one() -> None:
    ledger, backend, clock, ids = _world(40)
    # an operator's write lands just before the first batch of intents: that batch falls back
    ledger.before("Intent", lambda: ledger.api_write(ids[0]))
    rec = _reconciler(ledger, backend, clock, [Claim("default", ME, 0, 1)])
    stats = rec.tick()
    rec.close()
    assert stats.errors == 0 and stats.submissions == 40
    assert 1 in ledger.applies("Intent")  # the fallback
    assert ledger.job(ids[0]).state == JobState.QUEUED  # moved: re-read, submitted next tick
    assert all(ledger.job(i).state == JobState.STARTING for i in ids[1:])
    rec.tick()
    rec.close()
    assert ledger.job(ids[0]).state == JobState.STARTING
    assert len(backend.live()) == 40


def test_a_lease_that_runs_out_mid_batch_stops_the_rest() -> None:
    ledger, backend, clock, ids = _world(2 * SUBMIT_BATCH)
    claim: list[Claim | None] = [Claim("default", ME, 0, 1, valid_until=clock.mono + 10)]
    sent: list[str] = []

    def submit(request: object) -> None:
        sent.append(str(request))
        if len(sent) == 3:
            clock.advance(11)  # the lease runs out after the third submission
            claim[0] = None

    backend.on_submit = submit
    rec = _reconciler(ledger, backend, clock, claim)
    rec._submit_workers = 1  # one batch after the other
    stats = rec.tick()
    rec.close()
    assert stats.paused
    assert len(backend.live()) == 3
    submitted = [i for i in ids if ledger.job(i).state == JobState.STARTING]
    waiting = [i for i in ids if ledger.job(i).state == JobState.SUBMITTING]
    assert len(submitted) == 3  # what was sent is recorded
    # recorded intents, never sent: looked up by tag before any submission at the next tick
    assert len(waiting) == SUBMIT_BATCH - 3
    for job_id in waiting:
        run = ledger.job(job_id).current_run
        assert run is not None and run.submission_id is None
    # the next batch found the lease expired before recording anything
    assert sum(ledger.job(i).state == JobState.QUEUED for i in ids) == SUBMIT_BATCH


def test_an_old_proof_is_renewed_before_a_send_and_a_taken_job_is_not_sent() -> None:
    """Sends of a batch go one after the other: once the intents' proof is older than
    PROOF_TTL, the rest of the batch is proven again first, and a job another node claimed
    meanwhile (it would look the run up, find nothing and submit it itself) is not sent."""
    ledger, backend, clock, ids = _world(SUBMIT_BATCH)
    sent: list[str] = []
    taken = ids[5]

    def submit(request: object) -> None:
        sent.append(str(request))
        if len(sent) == 2:
            clock.advance(PROOF_TTL * 2)  # a slow cluster: the proof grows old
            ledger.other_claims(taken, Fence("node-b", ME.epoch + 1))

    backend.on_submit = submit
    rec = _reconciler(ledger, backend, clock, [Claim("default", ME, 0, 1)])
    rec._submit_workers = 1
    stats = rec.tick()
    rec.close()
    assert stats.errors == 0
    assert any(n > 1 for n in ledger.applies("Proof"))  # the rest of the batch at once
    assert len(backend.live()) == SUBMIT_BATCH - 1
    assert f"job-{5:03d}" not in {a.app_name.split(":")[1] for a in backend.live()}
    job = ledger.job(taken)
    assert job.owner == "node-b" and job.current_run is not None
    assert job.current_run.submission_id is None  # left to its new owner to look up
