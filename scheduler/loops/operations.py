"""The operations executor: one round claims this node's operations and advances their items.

Every node runs it (a loop the NodeSupervisor hosts in the node process, which asks Membership
for the claims it uses; ``scheduler/actors/operations.py``). It acts through two narrow
interfaces (``scheduler.core.operations_ledger``): the operations ledger, whose methods are its
fenced transactions, and the checkpoints, which make a failed-over job's checkpoint available on
the target. It decides with the pure step machines of ``scheduler.decisions.operations``. A
round:

1. for each group this node has a claim in (its slot in the group's pool under an epoch):
   automatic failovers due in that group are created (only by slot 0 of the pool, and at most
   once per incident: the store's unique incident key);
2. the PENDING and RUNNING operations whose ``home_group`` is that group and whose executor
   slot -- ``crc32(str(id)) % len(pool)``, the rule of a job's owner -- is this node's are taken
   (``OperationsLedger.take``: never from a node holding it under a newer epoch) and read once,
   with what the items the round works on need (``model.chosen``: the items under way, then
   the pending ones in plan order up to the operation's parallelism; every pending one when it
   is cancelled);
3. those items are advanced in a bounded pool of threads, each as far as it goes: a decision
   (``failover.decide``, ``bulk.decide``) on the item and its job as last read or written. An
   item stops at a step that writes its job (a directive, a switch) and before a checkpoint's
   copy: those are written with the item's steps before them for all the round's items at once,
   in one transaction that proves the claim (``OperationsLedger.advance``; in halves when one
   job moved meanwhile), and the items go on from there (the copies in the pool). Steps without
   a job write, and what an item waits for, are written for all the round's items at once at
   its end (``OperationsLedger.note``); a bulk command is applied on its job's row as it is
   (``OperationsLedger.apply_command``). The job's owner then acts (it is the only one that
   submits or kills);
4. an operation whose items all ended gets its final state.

Safety: every write is fenced by the claim, so a node with a stale view (an older epoch) can
change nothing, and the claim's lease is checked before each write: one that ran out is asked
for again (``renew``: Membership's current claim) and the round goes on only under the same
fence, else it stops (:class:`LeaseExpired`: a frozen or partitioned node that comes back
writes nothing more); every step is idempotent and persisted, so the node that takes over
after a crash goes on where it stopped. The executor
never submits anything itself: the job's owner submits once, after the switch, and only if the
job has no live run (``planning.plan``); so no item is submitted twice.

One item's error never stops the others, one operation's error never stops the others, and
nothing raises out of :meth:`Executor.round`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from scheduler.core import faults
from scheduler.core.combining import land_in_halves
from scheduler.core.errors import (
    AlreadyExists,
    DroverError,
    InvalidInput,
    LeaseExpired,
    NotOwner,
    StaleWrite,
)
from scheduler.core.operations import ITEM_FIELDS, ItemChange
from scheduler.core.operations_ledger import (
    AutoDecision,
    CheckpointMove,
    Checkpoints,
    ItemWrite,
    OperationsLedger,
    RoundRead,
    SetDirective,
    Written,
)
from scheduler.core.ownership import Claim, Fence
from scheduler.core.records import ClusterRecord, JobRecord
from scheduler.decisions.operations import auto, bulk
from scheduler.decisions.operations import failover as fo
from scheduler.decisions.operations.model import (
    Advance,
    ItemRecord,
    OperationKind,
    OperationRecord,
    OperationState,
    Wait,
    chosen,
    ended_state,
    executor_index,
)

log = logging.getLogger("drover.executor")

#: steps one item may take in one round (it stops earlier when it has to wait)
STEPS_PER_ROUND = 6
#: threads advancing items at once (most of an advance waits on the store)
ADVANCE_THREADS = 8
#: seconds a round goes on starting checkpoint copies (the rest wait for the next round, so
#: that a round, and the items that wait for one, are not held up by many copies)
COPY_SECONDS = 1.0

Decision = fo.Decision | bulk.Decision


@dataclass
class RoundStats:
    operations: int = 0
    advanced: int = 0
    errors: int = 0
    created: int = 0
    seconds: float = 0.0
    executing: list[int] = field(default_factory=list)


def holder_of(operation_id: int) -> str:
    """Who holds a job's replica while a failover makes its checkpoint available."""
    return f"failover:{operation_id}"


class _Lease:
    """A group's claim during a round: checked before every write; one that ran out is asked
    for again (``renew``), and the round goes on only under the same fence (a changed view waits
    for the next round)."""

    def __init__(
        self,
        claim: Claim,
        renew: Callable[[str], Claim | None] | None,
        monotonic: Callable[[], float],
    ) -> None:
        self._claim = claim
        self._renew = renew
        self._monotonic = monotonic
        self._lock = threading.Lock()

    @property
    def fence(self) -> Fence:
        return self._claim.fence

    def check(self) -> Fence:
        """The fence to write under (LeaseExpired when the claim ran out and was not renewed)."""
        with self._lock:
            claim = self._claim
            if claim.valid(self._monotonic()):
                return claim.fence
            fresh = self._renew(claim.group) if self._renew is not None else None
            if fresh is None or fresh.fence != claim.fence or not fresh.valid(self._monotonic()):
                raise LeaseExpired(f"the claim on group {claim.group} expired")
            self._claim = fresh
            return fresh.fence


@dataclass(eq=False)
class _Walk:
    """One item's way through a round: the item as decided so far, as stored (what its next
    write is conditional on), its job as last read or written, and the changes decided but not
    written yet (written with the item's next step that writes its job, before its copy, or
    else with the round's notes)."""

    item: ItemRecord
    job: JobRecord | None
    stored: ItemRecord = field(init=False)
    pending: list[ItemChange] = field(default_factory=list)
    #: decisions made this round (at most STEPS_PER_ROUND)
    steps: int = 0
    #: 1 once the item moved this round
    moved: int = 0
    #: a job write of it found the job moved this round, and it was decided again
    retried: bool = False

    def __post_init__(self) -> None:
        self.stored = self.item


@dataclass(frozen=True, eq=False)
class _JobStep:
    """A step that writes the item's job, decided by its walk: written with the round's
    others."""

    walk: _Walk
    change: ItemChange
    decision: Advance[Any]


@dataclass
class _Round:
    """One operation's round: what it read, the items stopped at a write that goes with the
    other items' (a step with a job write, a copy), and what its items leave for its end."""

    read: RoundRead
    lease: _Lease
    #: every item as last read or written
    items: dict[int, ItemRecord]
    #: changes that write no job, written at the end of the round (``OperationsLedger.note``)
    notes: list[tuple[ItemRecord, list[ItemChange]]] = field(default_factory=list)
    #: jobs whose replica this operation holds no more (``Checkpoints.release``)
    releases: list[str] = field(default_factory=list)
    #: items stopped at a step with a job write, or at a copy
    steps: list[_JobStep] = field(default_factory=list)
    copies: list[tuple[_Walk, fo.MakeAvailable]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def operation(self) -> OperationRecord:
        return self.read.operation

    @property
    def id(self) -> int:
        return self.read.operation.id

    def stop(
        self,
        *,
        step: _JobStep | None = None,
        copy: tuple[_Walk, fo.MakeAvailable] | None = None,
    ) -> None:
        with self.lock:
            if step is not None:
                self.steps.append(step)
            if copy is not None:
                self.copies.append(copy)

    def take_steps(self) -> list[_JobStep]:
        with self.lock:
            steps, self.steps = self.steps, []
        return steps

    def take_copies(self) -> list[tuple[_Walk, fo.MakeAvailable]]:
        with self.lock:
            copies, self.copies = self.copies, []
        return copies

    def written(self, item: ItemRecord) -> None:
        with self.lock:
            self.items[item.id] = item
            if item.is_final and item.detail.get("checkpoint"):
                self.releases.append(item.job_name)

    def note(self, item: ItemRecord, changes: list[ItemChange]) -> None:
        with self.lock:
            self.notes.append((item, changes))


class Executor:
    def __init__(
        self,
        ledger: OperationsLedger,
        *,
        node_id: str,
        timing: fo.Timing,
        checkpoints: Checkpoints,
        parallelism: int = 32,
        nudge: Callable[[str, str], None] | None = None,
        clock: Callable[[], datetime] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        threads: int = ADVANCE_THREADS,
        probe: Callable[[ClusterRecord], bool] | None = None,
        renew: Callable[[str], Claim | None] | None = None,
        auto_cooldown: float = 3600.0,
    ) -> None:
        self._ledger = ledger
        self._node_id = node_id
        self._timing = timing
        self._bulk_timing = bulk.Timing(timing.start_timeout, timing.drain_timeout)
        self._parallelism = parallelism
        #: the CHECKPOINT step's I/O (the source's newest complete batch, else the replica, else
        #: a fresh start; it takes the replica over until released)
        self._checkpoints = checkpoints
        self._nudge = nudge or (lambda group, job: None)
        #: UTC now (decisions, notes); the ledger stamps its writes with its own clock
        self._clock = clock or partial(datetime.now, UTC)
        self._monotonic = monotonic
        self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="advance")
        #: checkpoint copies run at once, between two writes of the steps they lead to
        self._copy_slice = 2 * max(1, threads)
        #: whether a cluster answers now (an automatic failover's plan kills what it can reach)
        self._probe = probe or (lambda cluster: False)
        #: this node's current claim in a group (Membership's answer), asked for when the claim a
        #: round holds ran out; None: a round stops there
        self._renew = renew
        #: seconds after its last abnormal period a cluster is not failed over onto automatically
        self._auto_cooldown = auto_cooldown
        #: incidents known to have their automatic failover: not planned (nor their source
        #: probed) again every round while the cluster stays abnormal
        self._handled: set[str] = set()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    # -- the round ----------------------------------------------------------------------------

    def round(self, claims: Mapping[str, Claim | None]) -> RoundStats:
        started = time.perf_counter()
        stats = RoundStats()
        held = {g: c for g, c in claims.items() if c is not None}
        if held:
            try:
                stats.created = self._automatic(held)
            except Exception:
                log.exception("cannot start the automatic failovers due")
                stats.errors += 1
            try:
                operations = self._ledger.active(held)
            except Exception:
                log.exception("cannot read the operations to execute")
                operations = []
                stats.errors += 1
            leases = {g: self._lease(c) for g, c in held.items()}
            for op in operations:
                claim = held[op.home_group]
                if executor_index(op.id, claim.size) != claim.index:
                    continue
                stats.operations += 1
                stats.executing.append(op.id)
                try:
                    stats.advanced += self._execute(op, leases[op.home_group])
                except (NotOwner, LeaseExpired) as exc:
                    log.info("operation %s: %s; left to its executor", op.id, exc)
                except Exception:
                    log.exception("operation %s: round failed", op.id)
                    stats.errors += 1
        stats.seconds = time.perf_counter() - started
        return stats

    def _lease(self, claim: Claim) -> _Lease:
        return _Lease(claim, self._renew, self._monotonic)

    # -- automatic failover -------------------------------------------------------------------

    def _automatic(self, claims: Mapping[str, Claim]) -> int:
        deciding = [g for g, c in claims.items() if c.index == 0]
        if not deciding:
            return 0
        facts = self._ledger.automatic(deciding)
        if not facts.policies or not facts.incidents:
            return 0
        decided = auto.decide(
            facts.policies,
            facts.groups,
            facts.clusters,
            facts.incidents,
            self._clock(),
            paused=facts.paused,
            cooldown_s=self._auto_cooldown,
            recoveries=facts.recoveries,
        )
        created = 0
        record: list[AutoDecision] = []
        self._handled &= {decision.incident for decision, _ in decided}
        for decision, failover in decided:
            if decision.incident in self._handled:
                continue  # this incident has its failover (and its event)
            if failover is None:
                record.append(decision)
                continue
            try:
                op = self.create_failover(
                    failover.request,
                    created_by=auto.CREATED_BY,
                    reason=failover.reason,
                    incident=failover.incident,
                    home_group=failover.group,
                    source_reachable=self._reachable(facts.clusters.get(failover.request.source)),
                )
            except AlreadyExists:
                self._handled.add(failover.incident)
                continue  # this incident has its failover (and its event)
            except DroverError as exc:
                log.warning("automatic failover of group %s: %s", failover.group, exc)
                continue
            created += 1
            self._handled.add(failover.incident)
            counts = Counter(i.action for i in op.items)
            what = ", ".join(f"{n} {a}" for a, n in sorted(counts.items())) or "no job"
            record.append(
                replace(
                    decision,
                    operation_id=op.id,
                    why=f"{decision.why} ({len(op.items)} items: {what})",
                )
            )
            log.warning(
                "automatic failover %s of group %s: %s (%d items)",
                op.id,
                failover.group,
                failover.reason,
                len(op.items),
            )
        for decision in record:
            if decision.verdict == auto.HELD:
                log.warning("%s", decision.why)
        try:
            self._ledger.decided(record)
        except Exception:  # the decision stands; its record is repeated next round
            log.exception("cannot record automatic failover's decisions")
        return created

    def _reachable(self, cluster: ClusterRecord | None) -> bool:
        if cluster is None:
            return False
        try:
            return bool(self._probe(cluster))
        except Exception:  # noqa: BLE001 - a cluster that cannot be probed is unreachable
            return False

    def create_failover(
        self,
        request: fo.Request,
        *,
        created_by: str,
        reason: str,
        incident: str | None = None,
        home_group: str | None = None,
        source_reachable: bool,
        parallelism: int | None = None,
    ) -> OperationRecord:
        """Plan and persist a failover (the API's execution path does the same)."""
        found = self._ledger.candidates(request.source)
        plan = fo.plan_failover(
            request,
            found.jobs,
            found.groups,
            found.clusters,
            source_reachable=source_reachable,
            now=self._clock(),
        )
        fallback = next(iter(sorted(found.groups)), "default")
        return self._ledger.create(
            fo.new_operation(
                plan,
                request,
                created_by=created_by,
                reason=reason,
                incident=incident,
                home_group=home_group or plan.home_group(fallback),
                parallelism=parallelism or self._parallelism,
            )
        )

    # -- one operation ------------------------------------------------------------------------

    def execute(self, op: OperationRecord, claim: Claim) -> int:
        """Take ``op`` if needed and advance its items once; returns how many items moved."""
        return self._execute(op, self._lease(claim))

    def _execute(self, op: OperationRecord, lease: _Lease) -> int:
        fence = lease.fence
        if op.kind not in bulk.KINDS and op.kind != OperationKind.FAILOVER:
            raise InvalidInput(f"operation {op.id}: no executor for kind {op.kind}")
        mine = (op.executor, op.executor_epoch) == (fence.node_id, fence.epoch)
        if not mine or op.state == OperationState.PENDING:
            if self._ledger.take(op.id, lease.check()) is None:
                return 0
            log.info(
                "operation %s: executed by %s under epoch %s (was %s/%s)",
                op.id,
                fence.node_id,
                fence.epoch,
                op.executor,
                op.executor_epoch,
            )
        read = self._ledger.read(op.id, partial(chosen, default_parallelism=self._parallelism))
        op = read.operation
        if (op.executor, op.executor_epoch) != (fence.node_id, fence.epoch):
            raise NotOwner(
                f"operation {op.id} is executed by {op.executor} under epoch {op.executor_epoch}"
            )
        if op.state.is_final:
            return 0
        r = _Round(read, lease, {i.id: i for i in op.items})
        walks = [_Walk(item, read.jobs.get(item.job_id or -1)) for item in read.chosen]
        # each item walks as far as it goes without a write; the steps before the copies, then
        # the steps with a job write, are written for all the items at once; the items go on
        # from there (the copies in the pool), until every one waits or ended
        todo: list[Callable[[], None]] = [partial(self._walk, r, w) for w in walks]
        copies: list[Callable[[], None]] = []
        copying: float | None = None  # when the round's first copies started
        while todo or copies:
            if todo:
                self._in_pool(op, todo)
            elif copying is None or self._monotonic() - copying < COPY_SECONDS:
                # the copies a few at a time, each few's switches written as soon as they are
                # copied: their owners start them while the others are copied
                if copying is None:
                    copying = self._monotonic()
                self._in_pool(op, copies[: self._copy_slice])
                copies = copies[self._copy_slice :]
            else:  # their steps are stored: the next round copies them
                log.info("operation %s: %d copies left to the next round", op.id, len(copies))
                break
            copies += self._store_copies(r)
            todo = self._write_steps(r)
        self._end_round(r)
        return sum(w.moved for w in walks)

    def _in_pool(self, op: OperationRecord, work: list[Callable[[], None]]) -> None:
        """Run ``work`` in the pool of threads; NotOwner or LeaseExpired once all of it ran,
        when one of it met one (one item's other error never stops the others)."""
        futures = [self._pool.submit(w) for w in work]
        stop: NotOwner | LeaseExpired | None = None
        for future in futures:
            try:
                future.result()
            except (NotOwner, LeaseExpired) as exc:
                stop = stop or exc
            except Exception:
                log.exception("operation %s: an item failed to advance", op.id)
        if stop is not None:
            raise stop

    def _end_round(self, r: _Round) -> None:
        """What the round's items left for its end: their notes (one transaction), the replicas
        they hold no more, and the operation's final state once every item ended."""
        op = r.operation
        if r.notes:
            for item in self._ledger.note(r.lease.check(), op, r.notes):
                r.written(item)
        if r.releases:
            try:
                self._checkpoints.release(r.releases, holder=holder_of(op.id))
            except Exception as exc:  # noqa: BLE001 - the holds run out by themselves
                log.info("operation %s: cannot release replicas %s (%s)", op.id, r.releases, exc)
        now = replace(op, items=tuple(sorted(r.items.values(), key=lambda i: i.position)))
        state = ended_state(now)
        if state is None:
            return
        self._ledger.finish(r.lease.check(), now, state)
        log.warning("operation %s %s: %s", op.id, state, now.counts())

    # -- one item -----------------------------------------------------------------------------

    def _decide(self, r: _Round, item: ItemRecord, job: JobRecord | None) -> Decision:
        op = r.operation
        if op.kind == OperationKind.FAILOVER:
            facts = fo.Facts(
                job,
                r.read.runs.get(item.source_run_id or -1),
                r.read.clusters,
                op.cancelling,
                self._clock(),
                fo.Force.from_json(op.options.get("force")),
            )
            return fo.decide(item, facts, self._timing)
        return bulk.decide(
            item, bulk.Facts(job, op.cancelling, self._clock()), self._bulk_timing, op.kind
        )

    def _walk(self, r: _Round, w: _Walk, decided: Decision | None = None) -> None:
        """Advance one item as far as it goes without a write (``decided``: its next decision,
        made already). It stops at a step with a job write, or at a copy (the round writes
        those for all its items at once, then the item goes on), or when it waits or ended
        (what it decided goes with the round's notes)."""
        op = r.operation
        if w.steps == 0 and op.kind == OperationKind.FAILOVER:
            if w.item.step in (fo.Step.DRAINING, fo.Step.FENCING):
                if faults.held(f"failover-{w.item.step.lower()}", w.item.job_name):  # tests only
                    return
        try:
            while w.steps < STEPS_PER_ROUND:
                w.steps += 1
                decision = decided if decided is not None else self._decide(r, w.item, w.job)
                decided = None
                if isinstance(decision, Wait):
                    if w.item.detail.get("waiting") != decision.why and not w.item.is_final:
                        w.pending.append(ItemChange(None, detail={"waiting": decision.why}))
                    break
                if isinstance(decision, fo.Record):
                    w.pending.append(ItemChange(None, decision.note, fields=decision.fields))
                    w.moved = 1
                    break
                if isinstance(decision, bulk.Apply):
                    done = self._ledger.apply_command(
                        r.lease.check(), op, w.stored, decision.command, decision.note
                    )
                    w.stored = w.item = done.item
                    r.written(w.item)
                    w.job, w.moved = done.job, 1
                    if w.job is not None and w.item.step == bulk.Step.WAITING:
                        self._nudge(w.job.group, w.job.name)
                    what = w.item.history[-1].note if w.item.history else w.item.step
                    log.info(
                        "operation %s item %s (%s): %s", op.id, w.item.id, w.item.job_name, what
                    )
                    if w.item.is_final:
                        break
                    continue
                if isinstance(decision, fo.MakeAvailable):
                    r.stop(copy=(w, decision))  # the step is stored before its I/O
                    return
                change = self._change(op, w.item, decision)
                if decision.job_write is not None:
                    r.stop(step=_JobStep(w, change, decision))
                    return
                w.pending.append(change)
                before = w.item.step
                w.item = w.item.after(change, self._clock())
                w.moved = 1
                self._stepped(op, w.item, before, decision)
                if w.item.is_final:
                    break
        except StaleWrite as exc:
            if isinstance(exc, NotOwner):
                raise  # the operation is no longer ours
            log.info("item %s of operation %s: %s; again next round", w.item.id, op.id, exc)
            w.pending = []
            return
        if w.pending:
            r.note(w.stored, w.pending)
            w.pending = []

    def _store_copies(self, r: _Round) -> list[Callable[[], None]]:
        """The items stopped at a copy: their steps before it stored (for all at once), then
        their copies to run (each goes on from its outcome)."""
        copies = r.take_copies()
        unstored = [(w, want) for w, want in copies if w.pending]
        written = self._advance_all(r, [ItemWrite(w.stored, w.pending) for w, _ in unstored])
        refused: set[int] = set()
        for (w, _), done in zip(unstored, written, strict=True):
            w.pending = []
            if isinstance(done, StaleWrite):
                log.info("item %s of operation %s: %s; again next round", w.item.id, r.id, done)
                refused.add(w.item.id)
                continue
            w.stored = w.item = done.item
            w.moved = 1
        return [partial(self._copy, r, w, want) for w, want in copies if w.item.id not in refused]

    def _copy(self, r: _Round, w: _Walk, want: fo.MakeAvailable) -> None:
        """The item's copy (its step stored), then its walk on from the outcome."""
        if faults.held("failover-checkpoint", w.item.job_name):  # tests only
            return
        outcome = self._checkpoint(r, w.item, w.job, want)
        if not isinstance(outcome, ItemChange):
            self._walk(r, w, outcome)
            return
        w.pending.append(outcome)
        if outcome.step is None:  # retried later
            r.note(w.stored, w.pending)
            w.pending = []
            return
        w.item = w.item.after(outcome, self._clock())
        w.moved = 1
        self._walk(r, w)

    def _write_steps(self, r: _Round) -> list[Callable[[], None]]:
        """The items stopped at a step with a job write: each written with the item's steps
        before it, for all at once; what goes on from there: the items written and not ended,
        and those whose job moved since it was read (decided again, once, on the job as it is
        now, with the steps decided before)."""
        steps = r.take_steps()
        op = r.operation
        writes = [
            ItemWrite(
                s.walk.stored,
                [*s.walk.pending, s.change],
                job=s.walk.job,
                job_write=s.decision.job_write,
                message=fo.job_event_message(s.walk.item, s.decision.note)
                if s.decision.note
                else "",
            )
            for s in steps
        ]
        go: list[Callable[[], None]] = []
        for s, done in zip(steps, self._advance_all(r, writes), strict=True):
            w = s.walk
            if isinstance(done, StaleWrite):
                if w.job is None or w.retried:
                    log.info(
                        "item %s of operation %s: %s; again next round", w.item.id, op.id, done
                    )
                    w.pending = []
                else:
                    w.retried = True
                    log.info("item %s of operation %s: %s; decided again", w.item.id, op.id, done)
                    go.append(partial(self._again, r, w))
                continue
            before = w.item.step
            w.pending = []
            w.stored = w.item = done.item
            w.moved = 1
            if done.job is not None:
                w.job = done.job
                self._nudge(w.job.group, w.job.name)
            self._stepped(op, w.item, before, s.decision)
            if not w.item.is_final:
                go.append(partial(self._walk, r, w))
        return go

    def _again(self, r: _Round, w: _Walk) -> None:
        """The item's walk on from its job as it is now (its step's job write found it moved)."""
        assert w.job is not None
        w.job = self._ledger.job(w.job.id)
        self._walk(r, w)

    def _advance_all(self, r: _Round, writes: list[ItemWrite]) -> list[Written | StaleWrite]:
        """``writes`` in one transaction (``OperationsLedger.advance``); when that does not land,
        in halves, down to each alone: per write, as written or the StaleWrite that refused it
        (NotOwner and LeaseExpired stop the round)."""

        def advance(batch: Sequence[ItemWrite]) -> Sequence[Written]:
            done = self._ledger.advance(r.lease.check(), r.operation, batch)
            for written in done:
                r.written(written.item)
            return done

        def split(size: int, exc: StaleWrite) -> None:
            log.info("operation %s: %d advances did not land (%s); split", r.id, size, exc)

        return land_in_halves(
            writes, advance, splits=(StaleWrite,), on_split=split, stops=(NotOwner,)
        )

    @staticmethod
    def _stepped(
        op: OperationRecord, item: ItemRecord, before: str, decision: Advance[Any]
    ) -> None:
        log.info(
            "operation %s item %s (%s): %s -> %s: %s",
            op.id,
            item.id,
            item.job_name,
            before,
            decision.step,
            decision.note,
        )

    def _change(self, op: OperationRecord, item: ItemRecord, decision: Advance[Any]) -> ItemChange:
        """The item change of ``decision`` (IllegalTransition if its kind's table forbids it)."""
        if op.kind == OperationKind.FAILOVER:
            fo.transition(fo.Step(item.step), fo.Step(decision.step))
        else:
            bulk.transition(bulk.Step(item.step), bulk.Step(decision.step))
        step = decision.step
        detail = {k: v for k, v in decision.fields.items() if k not in ITEM_FIELDS}
        if not step.is_final and step.value != "PENDING":
            detail["waiting"] = ""
        return ItemChange(
            step.value,
            decision.note,
            fields={k: v for k, v in decision.fields.items() if k in ITEM_FIELDS},
            detail=detail,
            error=decision.note if step.value == "FAILED" else None,
        )

    def _checkpoint(
        self, r: _Round, item: ItemRecord, job: JobRecord | None, want: fo.MakeAvailable
    ) -> ItemChange | Advance[fo.Step]:
        """The CHECKPOINT step's I/O, outside any transaction, and what records its outcome: the
        change to SWITCHING, or to a retry later; after the last attempt, FAILED with the
        job's directive cleared."""
        assert job is not None  # decide() asks for a checkpoint only for a job it read
        try:
            move = CheckpointMove(
                want.source_location,
                want.target_location,
                want.target_root,
                list(r.read.clusters.values()),
                holder_of(item.operation_id),
            )
            # a claim that ran out (a frozen node) copies nothing
            got = self._checkpoints.make_available(job, move, guard=r.lease.check)
        except (NotOwner, LeaseExpired):
            raise
        except Exception as exc:
            attempts = item.attempts + 1
            error = f"{type(exc).__name__}: {exc}"
            log.warning("item %s: checkpoint attempt %d failed: %s", item.id, attempts, error)
            if attempts < self._timing.checkpoint_attempts:
                return ItemChange(
                    None,
                    f"checkpoint attempt {attempts} failed: {error}",
                    error=error,
                    attempt=True,
                    not_before=self._clock() + timedelta(seconds=self._timing.retry_after),
                )
            ours = job.directive is not None and job.directive.item_id == item.id
            return Advance(
                fo.Step.FAILED,
                f"the checkpoint could not be made available: {error}; the job stays on "
                f"{item.source_cluster}",
                job_write=SetDirective(None) if ours else None,
            )
        fo.transition(fo.Step.CHECKPOINT, fo.Step.SWITCHING)
        return ItemChange(
            fo.Step.SWITCHING.value,
            f"checkpoint {got.how}: {got.detail}; {got.resumes}",
            detail={
                "checkpoint_from": want.source_location or "",
                "checkpoint_to": got.location,
                "resume_batch": got.resume_batch,
                "resume": got.resumes,
                "checkpoint": got.how,
                "waiting": "",
            },
        )


__all__ = ["Executor", "Fence", "RoundStats", "holder_of"]
