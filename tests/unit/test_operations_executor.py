"""The operations executor (scheduler/loops/operations.py) on fakes: the operations ledger and
the checkpoints in memory (tests/support/operations_fakes.py, held to the SQL ledger's contract),
a manual clock. Every step of a failover item and of a bulk item, the forced and refused paths,
cancels and failures, a claim lost to a newer epoch and a lease that runs out in the middle of a
step, automatic failovers -- and what each round writes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from scheduler.core import faults
from scheduler.core.directive import Phase
from scheduler.core.operations import ItemRecord, OperationKind, OperationRecord, OperationState
from scheduler.core.operations_ledger import FailoverPolicy
from scheduler.core.ownership import Claim, Fence
from scheduler.core.records import JobRecord
from scheduler.core.states import DesiredState, JobState, Priority, RunState
from scheduler.decisions.operations import bulk
from scheduler.decisions.operations import failover as fo
from scheduler.decisions.operations.model import executor_index
from scheduler.loops.operations import Executor, holder_of
from tests.support.fakes import Clock
from tests.support.operations_fakes import FakeCheckpoints, FakeOperationsLedger

TIMING = fo.Timing(
    fence_exit_grace=15.0,
    drain_timeout=60.0,
    start_timeout=60.0,
    checkpoint_attempts=2,
    retry_after=5.0,
)
N1 = Fence("n1", 1)
N2 = Fence("n2", 2)


class World:
    """The executor of node n1 (or another) on a fake ledger; the tests play the jobs' owners."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.ledger = FakeOperationsLedger(self.clock, node_id="n1")
        self.checkpoints = FakeCheckpoints()
        self.nudged: list[str] = []
        self.executors: dict[str, Executor] = {}

    def executor(self, node: str = "n1", parallelism: int = 10) -> Executor:
        if node not in self.executors:
            self.executors[node] = Executor(
                self.ledger,
                node_id=node,
                timing=TIMING,
                checkpoints=self.checkpoints,
                parallelism=parallelism,
                nudge=lambda group, job: self.nudged.append(job),
                clock=self.clock.now,
                monotonic=self.clock.monotonic,
                threads=2,
            )
        return self.executors[node]

    def claim(self, fence: Fence = N1, lease: float | None = None) -> Claim:
        until = self.clock.monotonic() + lease if lease is not None else float("inf")
        return Claim("g", fence, 0, 1, valid_until=until)

    def round(self, fence: Fence = N1, lease: float | None = None) -> int:
        stats = self.executor(fence.node_id).round({"g": self.claim(fence, lease)})
        assert stats.errors == 0
        return stats.advanced

    def failover(
        self, *, reachable: bool = True, force: fo.Force | None = None, parallelism: int = 10
    ) -> OperationRecord:
        request = fo.Request("A", None, fo.Selector(all=True), force)
        return self.executor().create_failover(
            request,
            created_by="alice",
            reason="a drill",
            source_reachable=reachable,
            parallelism=parallelism,
        )

    def bulk(self, kind: OperationKind, parallelism: int = 10) -> OperationRecord:
        jobs = [self.ledger.stored(i) for i in sorted(self.ledger.jobs)]
        plan = bulk.plan_bulk(
            kind, bulk.Selector(all=True), jobs, self.ledger.groups, self.ledger.clusters
        )
        new = bulk.new_operation(
            plan,
            bulk.Selector(all=True),
            created_by="bob",
            reason="a drill",
            home_group="g",
            parallelism=parallelism,
        )
        return self.ledger.create(new)

    def item(self, op: OperationRecord, name: str) -> ItemRecord:
        return next(i for i in self.ledger.operation(op.id).items if i.job_name == name)

    def steps(self, op: OperationRecord, name: str) -> list[str]:
        return [e.step for e in self.item(op, name).history]

    def step_by_job(self, op: OperationRecord) -> dict[str, str]:
        """Each item's step, by its job's name."""
        return {i.job_name: i.step for i in self.ledger.operation(op.id).items}

    def state(self, op: OperationRecord) -> OperationState:
        return self.ledger.operation(op.id).state

    # -- the jobs' owners ---------------------------------------------------------------------

    def killed(self, job: JobRecord) -> None:
        """The owner killed the job's run and the cluster confirmed it gone."""
        self.ledger.set_run(job.id, state=RunState.KILLED, ended_at=self.clock.now())

    def fenced(self, job: JobRecord) -> None:
        """The owner fenced the job's run (its cluster cannot be reached)."""
        now = self.clock.now()
        self.ledger.set_run(job.id, state=RunState.LOST, ended_at=now, fenced_at=now)

    def started_on_b(self, job: JobRecord, state: RunState = RunState.RUNNING) -> None:
        self.ledger.new_run(job.id, "B", state)


@pytest.fixture
def w() -> Iterator[World]:
    world = World()
    yield world
    for executor in world.executors.values():
        executor.close()


# -- a failover item, step by step -----------------------------------------------------------


def test_a_kill_item_drains_copies_switches_and_starts_on_the_target(w: World) -> None:
    job = w.ledger.add_job("orders")
    w.checkpoints.batches["orders"] = 6
    op = w.failover()
    assert w.item(op, "orders").action == "kill"
    writes = len(w.ledger.writes)

    # PENDING -> DRAINING: the drain directive on the job, its owner woken
    assert w.round() == 1
    item = w.item(op, "orders")
    assert item.step == "DRAINING" and item.source_run_id == job.current_run_id
    directive = w.ledger.stored(job.id).directive
    assert directive is not None and directive.phase == Phase.DRAIN
    assert (directive.operation_id, directive.item_id) == (op.id, item.id)
    assert w.nudged == ["orders"] and w.state(op) == OperationState.RUNNING
    assert "the owner drains run" in item.detail["waiting"]
    assert w.ledger.writes[writes:] == ["take", "advance", "note"]

    # nothing changed: nothing written
    writes = len(w.ledger.writes)
    assert w.round() == 0 and w.ledger.writes[writes:] == []

    # the owner confirmed the kill: CHECKPOINT (stored before the copy), SWITCHING, STARTING
    w.killed(job)
    writes = len(w.ledger.writes)
    assert w.round() == 1
    assert w.steps(op, "orders") == ["PENDING", "DRAINING", "CHECKPOINT", "SWITCHING", "STARTING"]
    assert w.checkpoints.calls == [("orders", holder_of(op.id))]
    item = w.item(op, "orders")
    assert item.detail["resume_batch"] == 7 and item.detail["checkpoint"] == "source"
    assert item.detail["checkpoint_to"] == "file:///ck/B/orders/checkpoint"
    moved = w.ledger.stored(job.id)
    assert (moved.cluster, moved.state) == ("B", JobState.QUEUED)
    assert moved.directive is not None and moved.directive.phase == Phase.RUN
    assert w.ledger.writes[writes:] == ["advance", "advance", "note"]

    # the owner submitted on B: the target run is recorded
    w.started_on_b(job, RunState.STARTING)
    w.round()
    item = w.item(op, "orders")
    assert item.target_run_id == w.ledger.stored(job.id).current_run_id
    assert "submitted on B" in item.history[-1].note

    # RUNNING on B: DONE, the directive cleared, the replica released, the failover over
    w.ledger.set_run(job.id, state=RunState.RUNNING)
    w.ledger.owner_write(job.id, state=JobState.RUNNING)
    assert w.round() == 1
    assert w.item(op, "orders").step == "DONE" and w.ledger.stored(job.id).directive is None
    assert w.checkpoints.released == [("orders", holder_of(op.id))]
    assert w.state(op) == OperationState.SUCCEEDED
    actions = [a.action for a in w.ledger.audit if a.target == str(op.id)]
    assert actions == ["failover.create", "failover.start", "failover.finish"]


def test_the_items_advances_of_a_round_go_in_one_write_and_their_notes_in_another(
    w: World,
) -> None:
    """Store trips: four advances per item (drain, checkpoint, switch, done: each with its job
    write, or before the copy), written for all the round's items at once (the switches for
    each few copied: twice the executor's threads); what they wait for goes with the round's
    notes."""
    jobs = [w.ledger.add_job(f"job-{i}") for i in range(10)]
    op = w.failover()
    before = len(w.ledger.writes)
    w.round()
    assert w.ledger.writes[before:] == ["take", "advance", "note"]
    for job in jobs:
        w.killed(job)
    before = len(w.ledger.writes)
    w.round()
    # the 10 checkpoints stored before the copies; the switches of 4, 4 and 2 copied
    assert w.ledger.writes[before:] == ["advance"] * 4 + ["note"]
    assert all(w.item(op, j.name).step == "STARTING" for j in jobs)
    for job in jobs:
        w.started_on_b(job)
    before = len(w.ledger.writes)
    w.round()
    assert w.state(op) == OperationState.SUCCEEDED
    assert w.ledger.writes[before:] == ["advance", "finish"]
    assert w.ledger.writes.count("advance") == 6
    assert w.ledger.writes.count("note") <= 3


def test_a_round_starts_copies_for_a_while_and_leaves_the_rest_to_the_next(
    w: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("scheduler.loops.operations.COPY_SECONDS", 0.0)
    jobs = [w.ledger.add_job(f"job-{i}") for i in range(6)]
    op = w.failover()
    w.round()
    for job in jobs:
        w.killed(job)
    w.round()  # one few copied (twice the threads: 4); every checkpoint step stored
    # which four is the pool's order of the drains before: any four
    steps = sorted(w.item(op, j.name).step for j in jobs)
    assert steps == ["CHECKPOINT"] * 2 + ["STARTING"] * 4
    assert len(w.checkpoints.calls) == 4
    w.round()
    assert all(w.item(op, j.name).step == "STARTING" for j in jobs)
    assert len(w.checkpoints.calls) == 6


def test_an_advance_that_does_not_land_is_split_until_the_moved_job_is_alone(w: World) -> None:
    jobs = [w.ledger.add_job(f"job-{i}") for i in range(8)]
    op = w.failover()
    # an operator writes one job after the round's read: its drain is refused, not the others'
    w.ledger.before("advance", lambda: w.ledger.owner_write(jobs[5].id, state_reason="touched"))
    calls = len(w.ledger.calls)
    w.round()
    # the 8, the half with it, its half, it alone (then read again and decided on): and the
    # halves without it at once
    assert w.ledger.calls[calls:].count("advance") == 1 + 2 + 2 + 2 + 1
    assert w.ledger.calls[calls:].count("job") == 1
    assert all(w.item(op, j.name).step == "DRAINING" for j in jobs)
    assert all(w.ledger.stored(j.id).directive is not None for j in jobs)


def test_a_job_its_owner_wrote_meanwhile_is_read_again_and_switched_in_the_same_round(
    w: World,
) -> None:
    job = w.ledger.add_job("orders")
    op = w.failover()
    w.round()
    w.killed(job)
    # the owner writes the job (a new reason: it holds it) while the checkpoint is copied
    w.checkpoints.during = lambda: w.ledger.owner_write(job.id, state_reason="held")
    calls = len(w.ledger.calls)
    w.round()
    assert w.item(op, "orders").step == "STARTING" and w.ledger.stored(job.id).cluster == "B"
    assert w.ledger.calls[calls:].count("job") == 1  # read once more, not a round later
    assert len(w.checkpoints.calls) == 1  # and not copied again


def test_a_fence_item_waits_until_the_stale_driver_was_told(w: World) -> None:
    job = w.ledger.add_job("orders")
    w.ledger.set_run(job.id, fence_checked_at=w.clock.now())  # its pipeline checks its fence
    w.ledger.clusters["A"] = replace(w.ledger.clusters["A"], health="VOTE_ABNORMAL")
    op = w.failover(reachable=False)
    assert w.item(op, "orders").action == "fence"
    w.round()
    assert w.item(op, "orders").step == "DRAINING"
    w.fenced(job)
    w.round()
    item = w.item(op, "orders")
    assert item.step == "FENCING" and "stops at its next fence check" in item.detail["waiting"]
    # answered "superseded" by a fence check: it has the exit grace to stop
    w.ledger.runs[item.source_run_id or 0] = replace(
        w.ledger.runs[item.source_run_id or 0], fence_superseded_at=w.clock.now()
    )
    w.round()
    assert w.item(op, "orders").step == "FENCING"
    w.clock.advance(TIMING.fence_exit_grace + 1)
    w.round()
    assert w.steps(op, "orders")[-3:] == ["CHECKPOINT", "SWITCHING", "STARTING"]
    assert "answered 'superseded'" in w.item(op, "orders").history[-3].note
    assert w.ledger.stored(job.id).cluster == "B"


def test_a_forced_fence_does_not_wait_for_a_driver_that_never_checks(w: World) -> None:
    job = w.ledger.add_job("legacy")
    w.clock.advance(600)  # it has run long enough without a check: not self-fencing
    w.ledger.clusters["A"] = replace(w.ledger.clusters["A"], health="MANUAL_ABNORMAL")
    refused = w.failover(reachable=False)
    assert w.item(refused, "legacy").action == "refuse"
    w.round()
    assert w.item(refused, "legacy").step == "REFUSED"
    assert w.state(refused) == OperationState.FAILED  # a refusal fails the operation
    force = fo.Force(frozenset({"legacy"}), "AZ a is powered off", "alice")
    op = w.failover(reachable=False, force=force)
    assert w.item(op, "legacy").action == "fence" and w.item(op, "legacy").detail["forced"]
    w.round()
    w.fenced(job)
    w.round()
    steps = w.steps(op, "legacy")
    assert steps[-4:] == ["FENCING", "CHECKPOINT", "SWITCHING", "STARTING"], steps
    assert "forced by the operator" in w.item(op, "legacy").history[-3].note


def test_a_job_without_a_run_moves_and_a_stopped_one_is_only_switched(w: World) -> None:
    idle = w.ledger.add_job("idle", run=None)
    off = w.ledger.add_job("off", run=None, desired=DesiredState.STOPPED)
    op = w.failover()
    assert {i.action for i in w.ledger.operation(op.id).items} == {"move"}
    w.round()  # both walk to their switch in one round
    assert w.steps(op, "off") == ["PENDING", "DRAINING", "CHECKPOINT", "SWITCHING", "DONE"]
    assert w.ledger.stored(off.id).cluster == "B" and w.ledger.stored(off.id).directive is None
    assert w.item(op, "idle").step == "STARTING" and w.ledger.stored(idle.id).cluster == "B"
    w.started_on_b(idle)
    w.round()
    assert w.state(op) == OperationState.SUCCEEDED


def test_planned_skips_end_at_once_and_take_no_slot(w: World) -> None:
    for i in range(3):
        w.ledger.add_job(f"run-{i}")
    w.ledger.add_job("on-b", cluster="B")  # not on the source: not in the plan
    no_target = w.ledger.add_job("alone", group="solo")
    w.ledger.groups["solo"] = replace(w.ledger.groups["g"], name="solo", failover_cluster=None)
    op = w.failover(parallelism=1)
    assert w.item(op, "alone").action == "skip" and no_target.group == "solo"
    w.round()
    assert w.step_by_job(op) == {
        "alone": "SKIPPED",
        "run-0": "DRAINING",
        "run-1": "PENDING",
        "run-2": "PENDING",
    }


def test_an_item_skips_a_job_that_left_the_source_or_went_into_another_failover(
    w: World,
) -> None:
    left = w.ledger.add_job("left")
    taken = w.ledger.add_job("taken")
    op = w.failover()
    w.ledger.set_run(left.id, state=RunState.KILLED, ended_at=w.clock.now())
    w.ledger.new_run(left.id, "B")
    other = fo.drain_directive(w.item(op, "taken"), op.id + 100, False)
    w.ledger.owner_write(taken.id, directive=other)
    w.round()
    assert "no longer on the source" in w.item(op, "left").history[-1].note
    assert w.item(op, "taken").step == "SKIPPED"
    assert w.state(op) == OperationState.SUCCEEDED


def test_cancel_stops_new_items_and_leaves_a_drained_job_where_it_is(w: World) -> None:
    first = w.ledger.add_job("a-first")
    w.ledger.add_job("b-second")
    op = w.failover(parallelism=1)
    w.round()
    assert [i.step for i in w.ledger.operation(op.id).items] == ["DRAINING", "PENDING"]
    w.ledger.operations[op.id] = replace(
        w.ledger.operations[op.id], cancel_requested_at=w.clock.now(), cancel_requested_by="bob"
    )
    w.round()
    assert [i.step for i in w.ledger.operation(op.id).items] == ["DRAINING", "CANCELLED"]
    w.killed(first)
    w.round()
    assert w.item(op, "a-first").step == "CANCELLED"
    job = w.ledger.stored(first.id)
    assert job.cluster == "A" and job.directive is None
    assert w.checkpoints.calls == [] and w.state(op) == OperationState.CANCELLED


def test_items_fail_when_their_job_is_deleted_or_not_drained_in_time(w: World) -> None:
    gone = w.ledger.add_job("gone")
    slow = w.ledger.add_job("slow")
    op = w.failover()
    w.ledger.delete_job(gone.id)
    w.round()
    assert w.item(op, "gone").step == "FAILED" and w.item(op, "slow").step == "DRAINING"
    w.clock.advance(TIMING.drain_timeout + 1)
    w.round()
    failed = w.item(op, "slow")
    assert failed.step == "FAILED" and "not drained" in failed.last_error
    assert w.ledger.stored(slow.id).directive is None  # back to its usual management
    assert w.state(op) == OperationState.FAILED


def test_a_checkpoint_is_retried_then_the_item_fails_and_the_job_stays(w: World) -> None:
    job = w.ledger.add_job("orders")
    w.checkpoints.fail["orders"] = TIMING.checkpoint_attempts
    op = w.failover()
    w.round()
    w.killed(job)
    w.round()
    item = w.item(op, "orders")
    assert (item.step, item.attempts) == ("CHECKPOINT", 1) and "cannot write" in item.last_error
    assert "attempt 1 failed" in item.history[-1].note
    assert item.not_before is not None
    w.round()  # not before its retry time
    assert len(w.checkpoints.calls) == 1
    w.clock.advance(TIMING.retry_after + 1)
    w.round()
    failed = w.item(op, "orders")
    assert failed.step == "FAILED" and "could not be made available" in failed.history[-1].note
    assert w.ledger.stored(job.id).directive is None and w.ledger.stored(job.id).cluster == "A"


def test_an_item_fails_when_its_job_is_not_running_on_the_target_in_time(w: World) -> None:
    job = w.ledger.add_job("orders")
    op = w.failover()
    w.round()
    w.killed(job)
    w.round()
    assert w.item(op, "orders").step == "STARTING"
    w.started_on_b(job, RunState.STARTING)  # its owner submitted it on B: still starting
    w.round()
    starting = w.ledger.stored(job.id).current_run
    assert starting is not None and starting.cluster == "B"
    w.clock.advance(TIMING.start_timeout / 2)
    w.ledger.set_run(job.id, state=RunState.FAILED, ended_at=w.clock.now())
    w.started_on_b(job, RunState.STARTING)  # a new run on B (the first one died): noted...
    w.round()
    assert "submitted on B as run" in w.item(op, "orders").history[-1].note
    starting = w.ledger.stored(job.id).current_run
    w.clock.advance(TIMING.start_timeout / 2 - 1)
    w.round()
    assert w.item(op, "orders").step == "STARTING"  # not before the start timeout
    w.clock.advance(2)  # ... and the timeout still counts from when the item entered STARTING
    runs = dict(w.ledger.runs)
    w.round()
    failed = w.item(op, "orders")
    assert failed.step == "FAILED" and f"within {TIMING.start_timeout:g} s" in failed.last_error
    assert w.state(op) == OperationState.FAILED
    # the job stays where it is under its usual management (the reconciler): on B, desired
    # RUNNING, its one run on B untouched -- nothing killed, nothing submitted again
    stored = w.ledger.stored(job.id)
    assert stored.directive is None and stored.cluster == "B"
    assert stored.desired_state == DesiredState.RUNNING
    assert stored.current_run == starting and w.ledger.runs == runs
    w.clock.advance(TIMING.start_timeout)
    w.round()  # an ended item does nothing more
    assert w.ledger.stored(job.id) == stored


# -- claims and leases --------------------------------------------------------------------------


def test_a_lease_that_runs_out_during_the_copy_writes_nothing_and_the_next_holder_goes_on(
    w: World,
) -> None:
    job = w.ledger.add_job("orders")
    w.checkpoints.batches["orders"] = 3
    op = w.failover()
    w.round(lease=30)
    w.killed(job)
    w.checkpoints.during = lambda: w.clock.advance(60)  # the copy outlasts n1's lease
    writes = len(w.ledger.writes)
    w.round(lease=30)
    # CHECKPOINT was stored before the copy; nothing after it
    assert w.ledger.writes[writes:] == ["advance"]
    assert w.item(op, "orders").step == "CHECKPOINT"
    assert w.ledger.stored(job.id).cluster == "A"
    # the next holder (a newer epoch) takes over and repeats the copy (idempotent)
    w.round(N2)
    assert w.ledger.operation(op.id).executor == "n2"
    assert w.steps(op, "orders")[-2:] == ["SWITCHING", "STARTING"]
    assert [holder for _, holder in w.checkpoints.calls] == [holder_of(op.id)] * 2
    # n1's copy stopped at its first write after its lease ran out (the guard): only n2 wrote
    assert w.checkpoints.completed == [("orders", holder_of(op.id))]
    # n1 comes back with its old claim: it can change nothing
    writes = len(w.ledger.writes)
    w.round(N1)
    assert w.ledger.writes[writes:] == ["take"]  # refused: n2 holds it under a newer epoch


def test_a_lease_renewed_under_the_same_fence_lets_the_round_go_on(w: World) -> None:
    job = w.ledger.add_job("orders")
    op = w.failover()
    renewed: list[str] = []

    def renew(group: str) -> Claim:
        renewed.append(group)
        return w.claim(N1, lease=30)

    ex = Executor(
        w.ledger,
        node_id="n1",
        timing=TIMING,
        checkpoints=w.checkpoints,
        clock=w.clock.now,
        monotonic=w.clock.monotonic,
        renew=renew,
    )
    try:
        ex.round({"g": w.claim(lease=30)})
        w.killed(job)
        w.checkpoints.during = lambda: w.clock.advance(60)
        ex.round({"g": w.claim(lease=30)})
        assert renewed == ["g"] and w.item(op, "orders").step == "STARTING"
        # Membership now answers with a newer view: the round stops before writing
        w.ledger.new_run(job.id, "B")
        w.clock.advance(60)
        ex._renew = lambda group: w.claim(N2, lease=30)
        writes = len(w.ledger.writes)
        ex.round({"g": replace(w.claim(lease=30), valid_until=w.clock.monotonic())})
        assert w.ledger.writes[writes:] == [] and w.item(op, "orders").step == "STARTING"
    finally:
        ex.close()


def test_a_lease_that_ran_out_before_the_round_writes_nothing(w: World) -> None:
    w.ledger.add_job("orders")
    op = w.failover()
    writes = len(w.ledger.writes)
    w.round(lease=0)
    assert w.ledger.writes[writes:] == [] and w.state(op) == OperationState.PENDING


def test_a_claim_lost_to_a_newer_epoch_mid_round_stops_its_writes(w: World) -> None:
    jobs = [w.ledger.add_job(f"job-{i}") for i in range(3)]
    op = w.failover()
    w.round()
    for job in jobs:
        w.killed(job)
    before = w.ledger.operation(op.id)
    # n2 takes the operation under a newer epoch between n1's read and its first write
    w.ledger.before("advance", lambda: w.ledger.other_takes(op.id, N2))
    writes = len(w.ledger.writes)
    stats = w.executor().round({"g": w.claim()})
    assert stats.errors == 0 and stats.advanced == 0
    assert "advance" in w.ledger.writes[writes:] and "note" not in w.ledger.writes[writes:]
    assert w.ledger.operation(op.id).items == before.items  # nothing written
    assert w.checkpoints.calls == []  # nor copied: the checkpoint's step was refused first


# -- bulk items ---------------------------------------------------------------------------------


def test_a_bulk_stop_applies_the_command_and_waits_until_the_job_stopped(w: World) -> None:
    job = w.ledger.add_job("orders")
    w.ledger.add_job("idle", run=None, desired=DesiredState.STOPPED)
    op = w.bulk(OperationKind.STOP)
    writes = len(w.ledger.writes)
    assert w.round() == 2
    item = w.item(op, "orders")
    assert item.step == "WAITING" and item.detail["run_before"] == job.current_run_id
    assert "the job is RUNNING" in item.detail["waiting"]
    assert w.ledger.stored(job.id).desired_state == DesiredState.STOPPED
    assert w.item(op, "idle").step == "SKIPPED" and w.nudged == ["orders"]
    assert ("job.stop", "orders") in [(a.action, a.target) for a in w.ledger.audit]
    assert w.ledger.writes[writes:] == ["take", "apply_command", "note"]
    w.killed(job)
    w.ledger.owner_write(job.id, state=JobState.STOPPED)
    w.round()
    assert w.item(op, "orders").step == "DONE" and w.state(op) == OperationState.SUCCEEDED


def test_a_rolling_restart_replaces_each_run_once_within_its_parallelism(w: World) -> None:
    jobs = [w.ledger.add_job(f"job-{i}") for i in range(3)]
    op = w.bulk(OperationKind.RESTART, parallelism=1)
    w.round()
    assert [i.step for i in w.ledger.operation(op.id).items] == ["WAITING", "PENDING", "PENDING"]
    for job in jobs:
        w.round()  # its run is the one it had: it waits
        w.killed(job)
        w.ledger.new_run(job.id, "A")
        w.round()
    assert w.state(op) == OperationState.SUCCEEDED
    assert all("replaced run" in i.history[-1].note for i in w.ledger.operation(op.id).items)


def test_bulk_items_skip_refuse_cancel_and_fail_as_the_job_is(w: World) -> None:
    w.ledger.add_job("stopped-meanwhile")
    gone = w.ledger.add_job("gone")
    w.ledger.clusters["B"] = replace(w.ledger.clusters["B"], health="MANUAL_ABNORMAL")
    w.ledger.add_job("on-b", cluster="B")
    w.ledger.add_job("later")
    op = w.bulk(OperationKind.RESTART, parallelism=10)
    assert w.item(op, "on-b").action == "refuse"
    stopped = w.item(op, "stopped-meanwhile").job_id or 0
    w.ledger.owner_write(stopped, desired_state=DesiredState.STOPPED, state=JobState.STOPPED)
    w.ledger.delete_job(gone.id)
    w.ledger.operations[op.id] = replace(w.ledger.operations[op.id], cancel_requested_at=None)
    w.round()
    assert w.step_by_job(op) == {
        "gone": "FAILED",
        "later": "WAITING",
        "on-b": "REFUSED",
        "stopped-meanwhile": "SKIPPED",
    }
    cancelled = w.bulk(OperationKind.STOP)
    w.ledger.operations[cancelled.id] = replace(
        w.ledger.operations[cancelled.id], cancel_requested_at=w.clock.now()
    )
    w.round()
    assert {i.step for i in w.ledger.operation(cancelled.id).items} == {"CANCELLED"}
    assert w.state(cancelled) == OperationState.CANCELLED


def test_a_bulk_lease_that_runs_out_after_the_read_writes_nothing(w: World) -> None:
    job = w.ledger.add_job("orders")
    op = w.bulk(OperationKind.STOP)
    w.round()  # taken, command applied
    w.killed(job)
    w.ledger.owner_write(job.id, state=JobState.STOPPED)
    w.ledger.before("read", lambda: w.clock.advance(60))
    writes = len(w.ledger.writes)
    w.round(lease=30)
    assert w.ledger.writes[writes:] == [] and w.item(op, "orders").step == "WAITING"
    w.round(N2)
    assert w.item(op, "orders").step == "DONE" and w.state(op) == OperationState.SUCCEEDED


# -- automatic failovers --------------------------------------------------------------------


def test_an_automatic_failover_starts_once_per_incident(w: World) -> None:
    w.ledger.add_job("orders", priority=Priority.HIGH)
    w.ledger.add_job("batch", priority=Priority.LOW)
    w.ledger.policies["g"] = FailoverPolicy("g", True, 60.0, Priority.HIGH)
    w.round()
    assert w.ledger.operations == {}  # A is NORMAL
    w.ledger.clusters["A"] = replace(w.ledger.clusters["A"], health="VOTE_ABNORMAL")
    w.ledger.incidents["A"] = (7, w.clock.now())
    w.round()
    assert w.ledger.operations == {}  # not abnormal for long enough yet
    w.clock.advance(61)
    w.round()
    w.round()
    (op,) = w.ledger.operations.values()
    assert op.incident == "auto:g:A:7" and op.created_by == "drover:auto-failover"
    assert [i.job_name for i in w.ledger.operation(op.id).items] == ["orders"]


def test_only_the_pools_executor_slot_executes_an_operation(w: World) -> None:
    w.ledger.add_job("orders")
    op = w.failover()
    slot = executor_index(op.id, 2)
    stats = w.executor().round({"g": Claim("g", N1, 1 - slot, 2)})
    assert stats.operations == 0 and w.state(op) == OperationState.PENDING
    stats = w.executor().round({"g": Claim("g", N1, slot, 2)})
    assert stats.operations == 1 and w.state(op) == OperationState.RUNNING


def test_no_claim_no_round(w: World) -> None:
    w.ledger.add_job("orders")
    w.failover()
    calls = len(w.ledger.calls)
    assert w.executor().round({"g": None}).operations == 0
    assert w.ledger.calls[calls:] == []


def test_test_holds_keep_an_item_in_its_step(
    w: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``DROVER_FAULT_HOLDS`` (scheduler/core/faults.py): a held DRAINING item is not advanced,
    a held CHECKPOINT is stored but not copied; both go on once the hold is gone."""
    monkeypatch.setenv(faults.HOLDS_ENV, str(tmp_path))
    job = w.ledger.add_job("orders")
    w.checkpoints.batches["orders"] = 3
    op = w.failover()
    w.round()
    assert w.item(op, "orders").step == "DRAINING"
    (tmp_path / "failover-draining@orders").touch()
    (tmp_path / "failover-checkpoint@orders").touch()
    w.killed(job)
    assert w.round() == 0 and w.item(op, "orders").step == "DRAINING"
    (tmp_path / "failover-draining@orders").unlink()
    w.round()
    assert w.item(op, "orders").step == "CHECKPOINT" and w.checkpoints.calls == []
    w.round()
    assert w.item(op, "orders").step == "CHECKPOINT" and w.checkpoints.calls == []
    (tmp_path / "failover-checkpoint@orders").unlink()
    w.round()
    assert w.steps(op, "orders")[-2:] == ["SWITCHING", "STARTING"]
