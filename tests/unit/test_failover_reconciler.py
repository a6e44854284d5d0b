"""The reconciler steered by a failover's directive, against the in-memory ledger and backends:
it kills a draining job's run and never submits it on the source; when the source cannot be
reached it fences the run (only on an abnormal cluster, and only a self-fencing run) and never
touches the cluster; after the switch it submits once on the target."""

from __future__ import annotations

from dataclasses import replace

from scheduler.core.directive import Directive, Phase
from scheduler.core.ownership import Claim, Fence
from scheduler.core.records import JobRecord
from scheduler.core.states import JobState, RunState
from scheduler.decisions.planning import RestartPolicy
from scheduler.loops.reconciler import Reconciler
from tests.support.fakes import Clock, FakeBackend, FakeBackends, FakeLedger, cluster

ME = Fence("node-a", 4)
DRAIN = Directive(3, 11, Phase.DRAIN, "c1", "c2")


def setup() -> tuple[FakeLedger, FakeBackend, FakeBackend, Reconciler, JobRecord]:
    clock = Clock()
    ledger = FakeLedger(clock, node_id=ME.node_id)
    ledger.clusters["c2"] = cluster("c2")
    a = FakeBackend(calls=ledger.calls, start_running=True)
    b = FakeBackend(calls=ledger.calls, start_running=True)
    rec = Reconciler(
        ledger,
        FakeBackends(c1=a, c2=b),
        node_id=ME.node_id,
        group="default",
        claim=lambda: Claim("default", ME, 0, 1),
        policy=RestartPolicy(),
        unknown_after_polls=1,
        clock=clock.now,
        monotonic=clock.monotonic,
    )
    job = ledger.add_job("orders")
    rec.tick()
    rec.tick()
    job = ledger.job(job.id)
    assert job.state == JobState.RUNNING and job.current_run is not None
    return ledger, a, b, rec, job


def steer(ledger: FakeLedger, job: JobRecord, directive: Directive | None, **more: object) -> None:
    ledger.api_write(job.id, directive=directive, **more)


def test_drain_kills_confirms_and_holds_without_resubmitting() -> None:
    ledger, a, b, rec, job = setup()
    steer(ledger, job, DRAIN)
    for _ in range(4):
        rec.tick()
    job = ledger.job(job.id)
    assert job.state == JobState.QUEUED and job.current_run is not None
    assert job.current_run.state == RunState.KILLED
    assert "held until it is switched" in job.state_reason
    assert a.live() == [] and b.live() == []
    assert [c for c in ledger.calls if c.startswith("backend.submit")] == [
        "backend.submit drover:orders:100"
    ]  # only the first run's, never again on c1
    # the switch (what the executor writes): submitted once on c2
    steer(ledger, ledger.job(job.id), replace(DRAIN, phase=Phase.RUN), cluster="c2")
    for _ in range(3):
        rec.tick()
    job = ledger.job(job.id)
    assert job.state == JobState.RUNNING and job.current_run is not None
    assert job.current_run.cluster == "c2" and len(b.live("orders")) == 1


def test_unreachable_source_is_fenced_only_when_abnormal_and_self_fencing() -> None:
    ledger, a, b, rec, job = setup()
    steer(ledger, job, DRAIN)
    a.unreachable = True
    rec.tick()
    job = ledger.job(job.id)
    assert job.state == JobState.UNKNOWN and "which is NORMAL" in job.state_reason
    assert job.current_run is not None and not job.current_run.state.is_final

    ledger.clusters["c1"] = cluster("c1", "VOTE_ABNORMAL")
    rec.tick()
    job = ledger.job(job.id)
    assert "not self-fencing, not fenced unless forced" in job.state_reason
    assert job.current_run is not None and not job.current_run.state.is_final

    run = job.current_run
    ledger.runs[run.id] = replace(run, fence_checked_at=ledger.clock.now())  # it checked in
    rec.tick()
    job = ledger.job(job.id)
    assert job.state == JobState.QUEUED and job.current_run is not None
    assert job.current_run.state == RunState.LOST and job.current_run.fenced_at is not None
    assert "fenced: failover 3" in job.current_run.reason
    kills = [c for c in ledger.calls if c.startswith("backend.kill")]
    assert kills == []  # nothing was asked of the unreachable cluster
    rec.tick()
    assert ledger.job(job.id).current_run == job.current_run  # held: nothing submitted


def test_forced_fence_of_a_run_that_is_not_self_fencing() -> None:
    ledger, a, b, rec, job = setup()
    steer(ledger, job, replace(DRAIN, force_unfenced=True))
    a.unreachable = True
    ledger.clusters["c1"] = cluster("c1", "MANUAL_ABNORMAL")
    rec.tick()
    job = ledger.job(job.id)
    assert job.current_run is not None and job.current_run.state == RunState.LOST
    assert "fence forced by the operator" in job.current_run.reason
