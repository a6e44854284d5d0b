"""In-memory stand-ins for the operations executor's two interfaces: the operations ledger and the
checkpoints (``scheduler.core.operations_ledger``).

:class:`FakeOperationsLedger` honours the ledger's rules, held to the same contract suite as the
SQL ledger (``tests/support/operations_contract.py``): every write is conditional on the claim on
the operation (NotOwner) and on the versions read (StaleWrite), nothing changes when a condition
fails, an item changes only as ``ItemRecord.after`` says, a write returns what it wrote. It also
plays the world around the executor: the jobs' owners (runs opened, closed, fenced), operators
(a job changed, deleted), other executors (an operation taken under a newer epoch), and it logs
every call so that a test can tell what was written.

:class:`FakeCheckpoints` makes checkpoints available from a table of answers, or fails.
"""

from __future__ import annotations

import itertools
import secrets
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from scheduler.core.backend import app_name_for
from scheduler.core.errors import AlreadyExists, NotFound, NotOwner, StaleWrite
from scheduler.core.operations import (
    ACTIVE_STATES,
    FINAL_STEP_NAMES,
    ItemChange,
    ItemRecord,
    NewOperation,
    OperationRecord,
    OperationState,
    StepEntry,
    audit_prefix,
    transition_operation,
)
from scheduler.core.operations_ledger import (
    AutoDecision,
    AutomaticFacts,
    AutoPause,
    Availability,
    Candidates,
    CheckpointMove,
    FailoverPolicy,
    ItemWrite,
    JobWrite,
    Recovery,
    RoundRead,
    SetDirective,
    Written,
)
from scheduler.core.ownership import Fence
from scheduler.core.records import ClusterRecord, GroupRecord, JobRecord, RunRecord
from scheduler.core.states import (
    Command,
    DesiredState,
    JobState,
    Priority,
    RunState,
    command_effect,
    transition,
)
from scheduler.decisions.operations import auto, bulk
from tests.support.fakes import Clock, cluster, job_record

#: the ledger's writes (what "nothing was written" counts)
WRITES = frozenset({"take", "advance", "note", "apply_command", "finish", "create", "decided"})


@dataclass(frozen=True)
class Audit:
    actor: str
    action: str
    target: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobEvent:
    job_id: int
    message: str
    from_state: str | None = None
    to_state: str | None = None


class FakeOperationsLedger:
    """The operations ledger in memory (see the module docstring)."""

    def __init__(self, clock: Clock, *, node_id: str = "node-a") -> None:
        self.clock = clock
        self.node_id = node_id
        self.operations: dict[int, OperationRecord] = {}
        self.items: dict[int, ItemRecord] = {}
        self.jobs: dict[int, JobRecord] = {}
        self.runs: dict[int, RunRecord] = {}
        self.clusters: dict[str, ClusterRecord] = {"A": cluster("A"), "B": cluster("B")}
        self.groups: dict[str, GroupRecord] = {"g": group("g", "A", "B")}
        self.policies: dict[str, FailoverPolicy] = {}
        #: cluster -> (event id, when its abnormal period began)
        self.incidents: dict[str, tuple[int, datetime]] = {}
        #: automatic failover's switch, the clusters' last abnormal periods, its decisions
        self.paused: AutoPause | None = None
        self.recoveries: dict[str, Recovery] = {}
        self.decisions: list[AutoDecision] = []
        self.audit: list[Audit] = []
        self.events: list[JobEvent] = []
        #: every call, in order (``WRITES``: the ones that write)
        self.calls: list[str] = []
        #: method name -> a function run (once) right before the method's next call
        self._before: dict[str, Callable[[], object]] = {}
        self._ids = itertools.count(1)
        self._lock = threading.RLock()

    # -- the world around the executor --------------------------------------------------------

    def before(self, method: str, action: Callable[[], object]) -> None:
        """Run ``action`` once, right before the next call of ``method`` (a concurrent writer, a
        lease running out)."""
        self._before[method] = action

    @property
    def writes(self) -> list[str]:
        """The write calls so far, in order."""
        return [c for c in self.calls if c in WRITES]

    def add_job(
        self,
        name: str,
        *,
        group: str = "g",
        cluster: str | None = "A",
        desired: DesiredState = DesiredState.RUNNING,
        run: RunState | None = RunState.RUNNING,
        priority: Priority = Priority.HIGH,
        team: str = "t",
    ) -> JobRecord:
        """A job of ``group``; with a run in state ``run`` on ``cluster`` (None: no run, at
        rest)."""
        with self._lock:
            now = self.clock.now()
            state = JobState.STOPPED if desired == DesiredState.STOPPED else JobState.QUEUED
            if run is not None and not run.is_final:
                state = JobState.RUNNING if run == RunState.RUNNING else JobState.STARTING
            job = job_record(
                next(self._ids),
                name,
                now,
                group=group,
                team=team,
                priority=priority,
                desired_state=desired,
                state=state,
                cluster=cluster,
                owner="owner",
                owner_epoch=1,
            )
            self.jobs[job.id] = job
            if run is not None and cluster is not None:
                self.new_run(job.id, cluster, run)
            return self.stored(job.id)

    def new_run(self, job_id: int, cluster: str, state: RunState = RunState.RUNNING) -> JobRecord:
        """The job's owner submits a new run on ``cluster``: the job's current run."""
        with self._lock:
            job = self.jobs[job_id]
            run_id = 1000 + next(self._ids)
            now = self.clock.now()
            run = RunRecord(
                id=run_id,
                job_name=job.name,
                attempt=1 + sum(1 for r in self.runs.values() if r.job_name == job.name),
                generation=job.generation,
                cluster=cluster,
                node_id="owner",
                owner_epoch=1,
                fencing_token=secrets.token_hex(8),
                app_name=app_name_for(job.name, run_id),
                checkpoint_location=f"file:///ck/{cluster}/{job.name}/checkpoint",
                submission_id=f"driver-{run_id}",
                app_id=None,
                state=state,
                reason="",
                exit_code=None,
                created_at=now,
                submitted_at=now,
                started_at=now if state == RunState.RUNNING else None,
                ended_at=now if state.is_final else None,
            )
            self.runs[run_id] = run
            job_state = {RunState.RUNNING: JobState.RUNNING}.get(state, JobState.STARTING)
            return self.owner_write(job_id, current_run_id=run_id, state=job_state)

    def owner_write(self, job_id: int, **changes: Any) -> JobRecord:
        """The job's owner (or an operator) changes the job: its version moves."""
        with self._lock:
            job = self.jobs[job_id]
            self.jobs[job_id] = replace(
                job, version=job.version + 1, updated_at=self.clock.now(), **changes
            )
            return self.stored(job_id)

    def set_run(self, job_id: int, **changes: Any) -> JobRecord:
        """The job's current run changes (the owner closes or fences it; a fence check answered
        "superseded"); closing it moves the job's version."""
        with self._lock:
            job = self.jobs[job_id]
            assert job.current_run_id is not None
            run = replace(self.runs[job.current_run_id], **changes)
            self.runs[run.id] = run
            if run.state.is_final and "state" in changes:
                at_rest = JobState.QUEUED if job.desired_state == DesiredState.RUNNING else None
                return self.owner_write(job_id, state=at_rest or JobState.STOPPED)
            return self.stored(job_id)

    def delete_job(self, job_id: int) -> None:
        with self._lock:
            del self.jobs[job_id]

    def other_takes(self, operation_id: int, fence: Fence) -> None:
        """Another node takes the operation under ``fence`` (its newer epoch)."""
        with self._lock:
            op = self.operations[operation_id]
            self.operations[operation_id] = replace(
                op, executor=fence.node_id, executor_epoch=fence.epoch, version=op.version + 1
            )

    def stored(self, job_id: int) -> JobRecord:
        """The job as stored, with its current run."""
        with self._lock:
            job = self.jobs[job_id]
            run = self.runs.get(job.current_run_id) if job.current_run_id is not None else None
            return replace(job, current_run=run)

    def operation(self, operation_id: int) -> OperationRecord:
        """The operation as stored, with its items in plan order."""
        with self._lock:
            items = sorted(
                (i for i in self.items.values() if i.operation_id == operation_id),
                key=lambda i: i.position,
            )
            return replace(self.operations[operation_id], items=tuple(items))

    # -- the ledger: reads --------------------------------------------------------------------

    def active(self, groups: Iterable[str]) -> list[OperationRecord]:
        with self._call("active"):
            wanted = set(groups)
            return [
                op
                for _, op in sorted(self.operations.items())
                if op.state in ACTIVE_STATES and op.home_group in wanted
            ]

    def read(
        self, operation_id: int, choose: Callable[[OperationRecord], Sequence[ItemRecord]]
    ) -> RoundRead:
        with self._call("read"):
            if operation_id not in self.operations:
                raise NotFound(f"no operation {operation_id}")
            op = self.operation(operation_id)
            chosen = tuple(choose(op))
            if not chosen:
                return RoundRead(op, chosen)
            jobs = {i.job_id: self.stored(i.job_id) for i in chosen if i.job_id in self.jobs}
            runs = {
                i.source_run_id: self.runs[i.source_run_id]
                for i in chosen
                if i.source_run_id in self.runs
            }
            return RoundRead(op, chosen, jobs, runs, dict(self.clusters))  # type: ignore[arg-type]

    def job(self, job_id: int) -> JobRecord | None:
        with self._call("job"):
            return self.stored(job_id) if job_id in self.jobs else None

    def automatic(self, groups: Iterable[str]) -> AutomaticFacts:
        with self._call("automatic"):
            wanted = set(groups)
            policies = [p for g, p in sorted(self.policies.items()) if g in wanted and p.enabled]
            if not policies:
                return AutomaticFacts(policies)
            incidents = {
                name: found
                for name, found in self.incidents.items()
                if self.clusters[name].health in auto.AUTOMATIC
            }
            if not incidents:
                return AutomaticFacts(policies, dict(self.groups), dict(self.clusters))
            recoveries = {
                name: r
                for name, r in self.recoveries.items()
                if self.clusters[name].health == "NORMAL"
            }
            return AutomaticFacts(
                policies,
                dict(self.groups),
                dict(self.clusters),
                incidents,
                paused=self.paused,
                recoveries=recoveries,
            )

    def decided(self, decisions: Sequence[AutoDecision]) -> int:
        with self._call("decided"):
            written = 0
            for decision in decisions:
                last = next(
                    (d for d in reversed(self.decisions)
                     if (d.group, d.cluster) == (decision.group, decision.cluster)),
                    None,
                )  # fmt: skip
                said = (decision.incident, decision.verdict, decision.code)
                if last is not None and (last.incident, last.verdict, last.code) == said:
                    continue
                self.decisions.append(decision)
                written += 1
            return written

    def candidates(self, source: str) -> Candidates:
        with self._call("candidates"):
            primary_of = {g.name for g in self.groups.values() if g.primary_cluster == source}
            jobs = [
                self.stored(j.id)
                for _, j in sorted(self.jobs.items())
                if j.cluster == source
                or (j.cluster is None and j.group in primary_of)
                or (j.current_run_id in self.runs and self.runs[j.current_run_id].cluster == source)
            ]
            return Candidates(jobs, dict(self.groups), dict(self.clusters))

    # -- the ledger: writes -------------------------------------------------------------------

    def create(self, new: NewOperation) -> OperationRecord:
        with self._call("create"):
            if new.incident is not None and any(
                op.incident == new.incident for op in self.operations.values()
            ):
                raise AlreadyExists(f"incident {new.incident!r} already has an operation")
            now = self.clock.now()
            pending = any(i.step not in FINAL_STEP_NAMES for i in new.items)
            op = OperationRecord(
                id=next(self._ids),
                kind=new.kind,
                state=OperationState.PENDING if pending else OperationState.SUCCEEDED,
                home_group=new.home_group,
                source_cluster=new.source_cluster,
                target_cluster=new.target_cluster,
                selector=dict(new.selector),
                options=dict(new.options),
                reason=new.reason,
                created_by=new.created_by,
                incident=new.incident,
                plan_digest=new.plan_digest,
                executor=None,
                executor_epoch=0,
                executor_since=None,
                cancel_requested_at=None,
                cancel_requested_by=None,
                version=1,
                created_at=now,
                updated_at=now,
                started_at=None,
                finished_at=None if pending else now,
                team=new.team,
            )
            self.operations[op.id] = op
            for position, planned in enumerate(new.items):
                item = ItemRecord(
                    id=next(self._ids),
                    operation_id=op.id,
                    position=position,
                    job_id=planned.job_id,
                    job_name=planned.job_name,
                    action=planned.action,
                    why=planned.why,
                    step=planned.step,
                    history=(StepEntry(planned.step, now, planned.why),),
                    attempts=0,
                    last_error="",
                    source_cluster=planned.source_cluster,
                    target_cluster=planned.target_cluster,
                    source_run_id=planned.source_run_id,
                    target_run_id=None,
                    detail=dict(planned.detail),
                    not_before=None,
                    version=1,
                    updated_at=now,
                )
                self.items[item.id] = item
            self._audit(new.created_by, f"{audit_prefix(new.kind)}.create", op.id, new.audit)
            return self.operation(op.id)

    def take(self, operation_id: int, fence: Fence) -> OperationRecord | None:
        with self._call("take"):
            op = self.operations[operation_id]
            holds = op.executor_epoch < fence.epoch or op.executor in (None, fence.node_id)
            if op.state not in ACTIVE_STATES or op.executor_epoch > fence.epoch or not holds:
                return None
            now = self.clock.now()
            op = replace(
                op,
                executor=fence.node_id,
                executor_epoch=fence.epoch,
                executor_since=now,
                version=op.version + 1,
                updated_at=now,
            )
            if op.state == OperationState.PENDING:
                op = replace(
                    op,
                    state=OperationState.RUNNING,
                    version=op.version + 1,
                    started_at=op.started_at or now,
                )
                detail = {"executor": fence.node_id, "epoch": fence.epoch, "kind": op.kind}
                self._audit(f"node:{self.node_id}", f"{audit_prefix(op.kind)}.start", op.id, detail)
            self.operations[op.id] = op
            return op

    def advance(
        self, fence: Fence, operation: OperationRecord, writes: Sequence[ItemWrite]
    ) -> list[Written]:
        if not writes:
            return []
        with self._call("advance"):
            if len({w.item.id for w in writes}) != len(writes):
                raise ValueError("advance: one write per item")
            jobs = [w.job.id for w in writes if w.job is not None and w.job_write is not None]
            if len(set(jobs)) != len(jobs):
                raise ValueError("advance: one write per job")
            self._prove(operation.id, fence)
            now = self.clock.now()
            for w in writes:  # every condition first: all or nothing
                self._item_holds(w.item)
            changes = {
                w.item.id: self._job_change(w.job, w.job_write, w.message, now)
                for w in writes
                if w.job is not None and w.job_write is not None
            }
            out = []
            for w in writes:
                written = w.item
                for change in w.changes:
                    written = written.after(change, now)
                after = None
                if w.job is not None and w.item.id in changes:
                    after = self._job_land(w.job, *changes[w.item.id], now)
                self.items[w.item.id] = written
                out.append(Written(written, after))
            return out

    def note(
        self,
        fence: Fence,
        operation: OperationRecord,
        notes: Sequence[tuple[ItemRecord, Sequence[ItemChange]]],
    ) -> list[ItemRecord]:
        with self._call("note"):
            if not notes:
                return []
            if len({item.id for item, _ in notes}) != len(notes):
                raise ValueError("note: one entry per item")
            self._prove(operation.id, fence)
            now = self.clock.now()
            out = []
            for item, changes in notes:
                if self.items[item.id].version != item.version:
                    continue
                written = item
                for change in changes:
                    written = written.after(change, now)
                self.items[item.id] = written
                out.append(written)
            return out

    def apply_command(
        self,
        fence: Fence,
        operation: OperationRecord,
        item: ItemRecord,
        command: Command,
        note: str,
    ) -> Written:
        with self._call("apply_command"):
            self._prove(operation.id, fence)
            self._item_holds(item)
            now = self.clock.now()
            job = self.jobs.get(item.job_id or -1)
            if job is None or job.name != item.job_name:
                gone = ItemChange(
                    bulk.Step.FAILED.value,
                    "the job was deleted",
                    error="the job was deleted",
                    detail={"waiting": ""},
                )
                self.items[item.id] = item.after(gone, now)
                return Written(self.items[item.id])
            before = self.stored(job.id)
            skip = bulk.recheck(command, before)
            if skip is not None:
                skipped = ItemChange(bulk.Step.SKIPPED.value, skip, detail={"waiting": ""})
                self.items[item.id] = item.after(skipped, now)
                return Written(self.items[item.id], before)
            effect = command_effect(command, before.desired_state, before.state)
            grace = operation.options.get("grace_seconds")
            message = f"{command} by bulk operation {operation.id} of {operation.created_by}"
            changes: dict[str, Any] = {"desired_state": effect.desired, "grace_seconds": grace}
            if effect.bump_generation:
                changes["generation"] = before.generation + 1
            if effect.reset_attempts:
                changes.update(attempts_reset_at=now, not_before=None)
            if effect.state is not None and effect.state != before.state:
                changes.update(state=transition(before.state, effect.state), state_reason=message)
            self.jobs[job.id] = replace(
                self.jobs[job.id], version=job.version + 1, updated_at=now, **changes
            )
            self.events.append(JobEvent(job.id, message))
            self._audit(
                operation.created_by,
                f"job.{command}",
                before.name,
                {"operation": operation.id, "item": item.id},
            )
            waiting = ItemChange(
                bulk.Step.WAITING.value,
                note,
                detail={"waiting": "", "run_before": before.current_run_id},
            )
            self.items[item.id] = item.after(waiting, now)
            return Written(self.items[item.id], self.stored(job.id))

    def finish(self, fence: Fence, operation: OperationRecord, state: OperationState) -> None:
        with self._call("finish"):
            self._prove(operation.id, fence)
            op = self.operations[operation.id]
            transition_operation(op.state, state)
            now = self.clock.now()
            self.operations[op.id] = replace(
                op, state=state, version=op.version + 1, updated_at=now, finished_at=now
            )
            detail = {"state": state.value, "items": operation.counts(), "kind": op.kind}
            self._audit(f"node:{self.node_id}", f"{audit_prefix(op.kind)}.finish", op.id, detail)

    # -- rules --------------------------------------------------------------------------------

    def _call(self, method: str) -> _Call:
        return _Call(self, method)

    def _prove(self, operation_id: int, fence: Fence) -> None:
        op = self.operations[operation_id]
        if (op.executor, op.executor_epoch) != (fence.node_id, fence.epoch):
            raise NotOwner(
                f"operation {operation_id} is no longer executed by {fence.node_id} under epoch "
                f"{fence.epoch}"
            )

    def _item_holds(self, item: ItemRecord) -> None:
        if self.items[item.id].version != item.version:
            raise StaleWrite(f"item {item.id} changed since version {item.version}")

    def _job_change(
        self, job: JobRecord, write: JobWrite, message: str, now: datetime
    ) -> tuple[dict[str, Any], str]:
        """What ``write`` changes on the job, and its event's message (StaleWrite when it may
        not: the job moved, or still has an open run to switch)."""
        stored = self.jobs.get(job.id)
        if stored is None or stored.version != job.version:
            raise StaleWrite(f"job {job.name!r} changed since version {job.version}")
        changes: dict[str, Any]
        if isinstance(write, SetDirective):
            changes = {"directive": write.directive}
        else:
            run = job.current_run
            if run is not None and not run.state.is_final:
                raise StaleWrite(f"job {job.name!r} still has an open run ({run.id})")
            changes = {"cluster": write.target, "directive": write.directive, "not_before": None}
            message = write.reason
            if job.desired_state == DesiredState.RUNNING:
                changes.update(attempts_reset_at=now, state_reason=write.reason)
                if job.state != JobState.QUEUED:
                    changes["state"] = transition(job.state, JobState.QUEUED)
        return changes, message

    def _job_land(
        self, job: JobRecord, changes: dict[str, Any], message: str, now: datetime
    ) -> JobRecord:
        stored = self.jobs[job.id]
        self.jobs[job.id] = replace(stored, version=job.version + 1, updated_at=now, **changes)
        self.events.append(JobEvent(job.id, message))
        return replace(job, version=job.version + 1, updated_at=now, **changes)

    def _audit(self, actor: str, action: str, target: object, detail: Any) -> None:
        self.audit.append(Audit(actor, action, str(target), dict(detail)))


class _Call:
    """One ledger call: serialised, logged, after its ``before`` action."""

    def __init__(self, ledger: FakeOperationsLedger, method: str) -> None:
        self._ledger = ledger
        self._method = method

    def __enter__(self) -> None:
        action = self._ledger._before.pop(self._method, None)
        if action is not None:
            action()
        self._ledger._lock.acquire()
        self._ledger.calls.append(self._method)

    def __exit__(self, *exc: object) -> None:
        self._ledger._lock.release()


def group(name: str, primary: str, failover: str | None) -> GroupRecord:
    return GroupRecord(name=name, primary_cluster=primary, failover_cluster=failover)


class FakeCheckpoints:
    """Checkpoints made available from ``batches`` (job -> its newest complete batch on the
    source; missing: a fresh start), or failing with ``fail`` (job -> how many more times)."""

    def __init__(self) -> None:
        self.batches: dict[str, int] = {}
        self.fail: dict[str, int] = {}
        self.calls: list[tuple[str, str]] = []
        #: the calls that got to write (the caller's guard let them)
        self.completed: list[tuple[str, str]] = []
        self.released: list[tuple[str, str]] = []
        #: run during the next make_available (time passing while a checkpoint is copied)
        self.during: Callable[[], object] | None = None
        self._lock = threading.Lock()

    def make_available(
        self, job: JobRecord, move: CheckpointMove, guard: Callable[[], object] | None = None
    ) -> Availability:
        target, holder = move.target, move.holder
        if guard is not None:
            guard()
        with self._lock:
            self.calls.append((job.name, holder))
            during, self.during = self.during, None
            failing = self.fail.get(job.name, 0)
            if failing:
                self.fail[job.name] = failing - 1
        if during is not None:
            during()
        if failing:
            raise OSError(f"cannot write {target}")
        if guard is not None:  # every write checks the claim: a copy that outlasted it stops
            guard()
        with self._lock:
            self.completed.append((job.name, holder))
        batch = self.batches.get(job.name)
        if batch is None:
            return Availability(target, None, "fresh start", "no source checkpoint is known")
        return Availability(target, batch, "source", f"synced from {move.source}")

    def release(self, jobs: Sequence[str], *, holder: str) -> None:
        with self._lock:
            self.released.extend((job, holder) for job in jobs)
