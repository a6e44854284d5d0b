"""The operations executor: one round claims this node's operations and advances their items.

Every node runs it (a loop the NodeSupervisor hosts in the node process, which asks Membership
for the claims it uses; ``scheduler/actors/operations.py``). A round:

1. for each group this node has a claim in (its slot in the group's pool under an epoch):
   automatic failovers due in that group are created (only by slot 0 of the pool, and at most
   once per incident: the store's unique incident key);
2. the PENDING and RUNNING operations whose ``home_group`` is that group and whose executor
   slot -- ``crc32(str(id)) % len(pool)``, the rule of a job's owner -- is this node's are
   claimed (a conditional write: never taken back from a node holding it under a newer epoch);
3. per operation: cancelled items that have not started are cancelled; the items under way,
   then the pending ones in plan order up to the operation's parallelism, are advanced in a
   bounded pool of threads. Each advance is the pure decision (``failover.decide``) applied in
   one transaction that proves the claim, writes the item's step (conditional on its version)
   and the job write that goes with it (conditional on the job's version): the job's owner
   then acts (it is the only one that submits or kills). An item advances several steps in a
   round when nothing has to happen in between;
4. an operation whose items all ended gets its final state.

Safety: every write is fenced by the claim, so a node with a stale view (an older epoch, an
expired lease: a frozen or partitioned node that comes back) can change nothing; every step is
idempotent and persisted, so the node that takes over after a crash goes on where it stopped.
The executor never submits anything itself: the job's owner submits once, after the switch,
and only if the job has no live run (``planning.plan``); so no item is submitted twice.

One item's error never stops the others, one operation's error never stops the others, and
nothing raises out of :meth:`Executor.round`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from scheduler.core.clock import utcnow
from scheduler.core.errors import (
    AlreadyExists,
    DroverError,
    InvalidInput,
    NotFound,
    NotOwner,
    StaleWrite,
)
from scheduler.core.ownership import Claim, Fence
from scheduler.core.records import ClusterRecord, JobRecord, RunRecord
from scheduler.core.states import command_effect
from scheduler.decisions.operations import auto, bulk
from scheduler.decisions.operations import failover as fo
from scheduler.decisions.operations.model import (
    FINAL_STEP_NAMES,
    ItemRecord,
    OperationKind,
    OperationRecord,
    OperationState,
    executor_index,
    final_state,
)
from scheduler.loops import replication
from scheduler.loops.replication import Availability
from scheduler.store import catalog as catalog_store
from scheduler.store import jobs as jobs_store
from scheduler.store import journal
from scheduler.store import operations as ops_store
from scheduler.store.db import Store

log = logging.getLogger("drover.executor")

#: steps one item may take in one round (it stops earlier when it has to wait)
STEPS_PER_ROUND = 6
#: threads advancing items at once (most of an advance waits on the store)
ADVANCE_THREADS = 8

MakeAvailableFn = Callable[..., Availability]


class LeaseExpired(Exception):
    """The claim's lease ran out during a round: stop writing."""


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


class Executor:
    def __init__(
        self,
        store: Store,
        *,
        node_id: str,
        timing: fo.Timing,
        parallelism: int = 32,
        make_available: MakeAvailableFn | None = None,
        nudge: Callable[[str, str], None] | None = None,
        clock: Callable[[], datetime] = utcnow,
        monotonic: Callable[[], float] = time.monotonic,
        threads: int = ADVANCE_THREADS,
        probe: Callable[[ClusterRecord], bool] | None = None,
    ) -> None:
        self._store = store
        self._node_id = node_id
        self._timing = timing
        self._parallelism = parallelism
        #: the CHECKPOINT step's I/O (scheduler.loops.replication.make_available: the source's
        #: newest complete batch, else the replica, else a fresh start; it takes the replica over)
        self._make_available: MakeAvailableFn = make_available or replication.make_available
        self._nudge = nudge or (lambda group, job: None)
        self._clock = clock
        self._monotonic = monotonic
        self._pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="advance")
        #: whether a cluster answers now (an automatic failover's plan kills what it can reach)
        self._probe = probe or (lambda cluster: False)
        self._lock = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    # -- the round ----------------------------------------------------------------------------

    def round(self, claims: Mapping[str, Claim]) -> RoundStats:
        started = time.perf_counter()
        stats = RoundStats()
        claims = {g: c for g, c in claims.items() if c is not None}
        if claims:
            try:
                stats.created = self._automatic(claims)
            except Exception:
                log.exception("cannot start the automatic failovers due")
                stats.errors += 1
            try:
                with self._store.session() as session:
                    operations = ops_store.active_operations(session, claims)
            except Exception:
                log.exception("cannot read the operations to execute")
                operations = []
                stats.errors += 1
            for op in operations:
                claim = claims[op.home_group]
                if executor_index(op.id, claim.size) != claim.index:
                    continue
                stats.operations += 1
                stats.executing.append(op.id)
                try:
                    stats.advanced += self.execute(op, claim)
                except (NotOwner, LeaseExpired) as exc:
                    log.info("operation %s: %s; left to its executor", op.id, exc)
                except Exception:
                    log.exception("operation %s: round failed", op.id)
                    stats.errors += 1
        stats.seconds = time.perf_counter() - started
        return stats

    def _check(self, claim: Claim) -> None:
        if not claim.valid(self._monotonic()):
            raise LeaseExpired(f"the claim on group {claim.group} expired")

    # -- automatic failover -------------------------------------------------------------------

    def _automatic(self, claims: Mapping[str, Claim]) -> int:
        deciding = [g for g, c in claims.items() if c.index == 0]
        if not deciding:
            return 0
        with self._store.session() as session:
            policies = ops_store.enabled_policies(session, deciding)
            if not policies:
                return 0
            groups = {g.name: g for g in catalog_store.list_groups(session)}
            clusters = {c.name: c for c in catalog_store.list_clusters(session)}
            incidents = {
                c.name: found
                for c in clusters.values()
                if c.health in auto.AUTOMATIC
                and (found := ops_store.incident_start(session, c.name)) is not None
            }
        due = auto.due(
            [auto.Policy(p.group, p.enabled, p.after_seconds, p.min_priority) for p in policies],
            groups,
            clusters,
            incidents,
            self._clock(),
        )
        created = 0
        for failover in due:
            try:
                op = self.create_failover(
                    failover.request,
                    created_by=auto.CREATED_BY,
                    reason=failover.reason,
                    incident=failover.incident,
                    home_group=failover.group,
                    source_reachable=self._reachable(clusters.get(failover.request.source)),
                )
            except AlreadyExists:
                continue  # this incident has its failover
            except DroverError as exc:
                log.warning("automatic failover of group %s: %s", failover.group, exc)
                continue
            created += 1
            log.warning(
                "automatic failover %s of group %s: %s (%d items)",
                op.id,
                failover.group,
                failover.reason,
                len(op.items),
            )
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
        now = self._clock()
        with self._store.transaction() as session:
            groups = {g.name: g for g in catalog_store.list_groups(session)}
            clusters = {c.name: c for c in catalog_store.list_clusters(session)}
            jobs = ops_store.candidate_jobs(session, request.source)
            plan = fo.plan_failover(
                request, jobs, groups, clusters, source_reachable=source_reachable, now=now
            )
            return persist_failover(
                session,
                plan,
                request,
                created_by=created_by,
                reason=reason,
                incident=incident,
                home_group=home_group or plan.home_group(next(iter(sorted(groups)), "default")),
                parallelism=parallelism or self._parallelism,
                node_id=self._node_id,
                now=now,
            )

    # -- one operation ------------------------------------------------------------------------

    def execute(self, op: OperationRecord, claim: Claim) -> int:
        """Claim ``op`` if needed and advance its items once; returns how many items moved."""
        fence = claim.fence
        if (op.executor, op.executor_epoch) != (fence.node_id, fence.epoch):
            self._check(claim)
            with self._store.transaction() as session:
                if not ops_store.claim_operation(session, op.id, fence):
                    return 0
            log.info(
                "operation %s: executed by %s under epoch %s (was %s/%s)",
                op.id,
                fence.node_id,
                fence.epoch,
                op.executor,
                op.executor_epoch,
            )
        with self._store.session() as session:
            op = ops_store.get_operation(session, op.id)
        if (op.executor, op.executor_epoch) != (fence.node_id, fence.epoch):
            raise NotOwner(
                f"operation {op.id} is executed by {op.executor} under epoch {op.executor_epoch}"
            )
        if op.state == OperationState.PENDING:
            self._check(claim)
            with self._store.transaction() as session:
                ops_store.set_operation_state(
                    session, op, fence, OperationState.RUNNING, now=self._clock()
                )
                journal.add_audit(
                    session,
                    actor=f"node:{self._node_id}",
                    action=f"{_audit_prefix(op.kind)}.start",
                    target_kind="operation",
                    target_name=str(op.id),
                    detail={"executor": fence.node_id, "epoch": fence.epoch, "kind": op.kind},
                    node_id=self._node_id,
                    team=op.team or "",
                )
        if op.kind in bulk.KINDS:
            moved = self._execute_bulk(op, claim)
            self._finish_if_done(op.id, claim)
            return moved
        if op.kind != OperationKind.FAILOVER:
            raise InvalidInput(f"operation {op.id}: no executor for kind {op.kind}")
        chosen = self._chosen(op)
        moved = 0
        if chosen:
            with self._store.session() as session:  # one read for the whole round
                read = _read(session, chosen)
            futures = [self._pool.submit(self._advance, op, item, claim, read) for item in chosen]
            for future in futures:
                try:
                    moved += future.result()
                except (NotOwner, LeaseExpired):
                    raise
                except Exception:
                    log.exception("operation %s: an item failed to advance", op.id)
        self._finish_if_done(op.id, claim)
        return moved

    def _chosen(self, op: OperationRecord) -> list[ItemRecord]:
        """The items to advance now: those under way, then pending ones in plan order while
        fewer than the parallelism are under way (a skip or a refusal costs no slot); every
        pending one when the operation is cancelled."""
        steps, actions = (bulk.Step, bulk.Action) if op.kind in bulk.KINDS else (fo.Step, fo.Action)
        limit = int(op.options.get("parallelism") or self._parallelism)
        under_way = [i for i in op.items if steps(i.step).started]
        chosen = list(under_way)
        slots = limit - len(under_way)
        for item in op.items:
            if item.step != steps.PENDING.value:
                continue
            if op.cancelling or not actions(item.action).runs:
                chosen.append(item)
            elif slots > 0:
                chosen.append(item)
                slots -= 1
        return chosen

    def _finish_if_done(self, operation_id: int, claim: Claim) -> None:
        with self._store.session() as session:
            op = ops_store.get_operation(session, operation_id)
        if op.state.is_final or not all(i.step in FINAL_STEP_NAMES for i in op.items):
            return
        state = OperationState(
            final_state(
                [i.step for i in op.items],
                failed_steps=bulk.FAILED_STEPS if op.kind in bulk.KINDS else fo.FAILED_STEPS,
                cancelled=op.cancel_requested_at is not None
                and any(i.step == "CANCELLED" for i in op.items),
            )
        )
        self._check(claim)
        with self._store.transaction() as session:
            ops_store.set_operation_state(session, op, claim.fence, state, now=self._clock())
            journal.add_audit(
                session,
                actor=f"node:{self._node_id}",
                action=f"{_audit_prefix(op.kind)}.finish",
                target_kind="operation",
                target_name=str(op.id),
                detail={"state": state.value, "items": op.counts(), "kind": op.kind},
                node_id=self._node_id,
                team=op.team or "",
            )
        log.warning("operation %s %s: %s", op.id, state, op.counts())

    # -- bulk operations ----------------------------------------------------------------------

    def _execute_bulk(self, op: OperationRecord, claim: Claim) -> int:
        chosen = self._chosen(op)
        if not chosen:
            return 0
        with self._store.session() as session:  # one read for the whole round
            jobs = ops_store.jobs_by_id(session, [i.job_id for i in chosen if i.job_id])
        futures = [
            self._pool.submit(self._advance_bulk, op, item, claim, jobs.get(item.job_id or -1))
            for item in chosen
        ]
        moved = 0
        for future in futures:
            try:
                moved += future.result()
            except (NotOwner, LeaseExpired):
                raise
            except Exception:
                log.exception("operation %s: an item failed to advance", op.id)
        return moved

    def _advance_bulk(
        self, op: OperationRecord, item: ItemRecord, claim: Claim, job: JobRecord | None
    ) -> int:
        """Advance one bulk item as far as it goes this round; returns 1 if it moved."""
        timing = bulk.Timing(self._timing.start_timeout, self._timing.drain_timeout)
        moved = 0
        for attempt in range(3):
            if attempt:
                with self._store.session() as session:
                    job = ops_store.jobs_by_id(session, [item.job_id or -1]).get(item.job_id or -1)
            decision = bulk.decide(
                item, bulk.Facts(job, op.cancelling, self._clock()), timing, op.kind
            )
            try:
                if isinstance(decision, bulk.Wait):
                    if (
                        item.detail.get("waiting") != decision.why
                        and not bulk.Step(item.step).is_final
                    ):
                        item = self._write(item, claim, step=None, note="", waiting=decision.why)
                    return moved
                if isinstance(decision, bulk.Apply):
                    item, job = self._apply_command(op, item, claim, decision)
                else:
                    bulk.transition(bulk.Step(item.step), decision.step)
                    item = self._write(
                        item,
                        claim,
                        step=decision.step.value,
                        note=decision.note,
                        waiting="",
                        error=decision.note if decision.step == bulk.Step.FAILED else None,
                    )
                moved = 1
                if bulk.Step(item.step).is_final:
                    return moved
            except NotOwner:
                raise
            except StaleWrite as exc:
                log.info("item %s of operation %s: %s; again next round", item.id, op.id, exc)
                return moved
        return moved

    def _apply_command(
        self, op: OperationRecord, item: ItemRecord, claim: Claim, decision: bulk.Apply
    ) -> tuple[ItemRecord, JobRecord | None]:
        """Apply the job command and record WAITING in one fenced transaction, deciding on the
        job's row read under its lock (a job that needs nothing any more: SKIPPED)."""
        self._check(claim)
        now = self._clock()
        command = decision.command
        with self._store.transaction() as session:
            try:
                row = jobs_store.load_job(session, item.job_name, for_update=True)
            except NotFound:
                row = None
            if row is None or row.id != item.job_id:
                written = ops_store.advance_item(
                    session,
                    item,
                    claim.fence,
                    step=bulk.Step.FAILED.value,
                    now=now,
                    note="the job was deleted",
                    error="the job was deleted",
                    detail={"waiting": ""},
                )
                return written, None
            before = jobs_store.with_run(session, row)
            skip = (
                f"the job went into failover {before.directive.operation_id}"
                if before.directive is not None
                else bulk.why_not(command, before)
            )
            if skip is not None:
                written = ops_store.advance_item(
                    session,
                    item,
                    claim.fence,
                    step=bulk.Step.SKIPPED.value,
                    now=now,
                    note=f"{skip} meanwhile: nothing to do",
                    detail={"waiting": ""},
                )
                return written, before
            effect = command_effect(command, before.desired_state, before.state)
            grace = op.options.get("grace_seconds")
            written = ops_store.advance_item(
                session,
                item,
                claim.fence,
                step=bulk.Step.WAITING.value,
                note=decision.note,
                now=now,
                detail={"waiting": "", "run_before": before.current_run_id},
            )
            after = jobs_store.apply_command(
                session,
                before.name,
                desired=effect.desired,
                state=effect.state,
                bump_generation=effect.bump_generation,
                reset_attempts=effect.reset_attempts,
                expected_version=None,
                cause=f"operation:{op.id}",
                node_id=self._node_id,
                message=f"{command} by bulk operation {op.id} of {op.created_by}"
                + (f" (grace {grace:g} s)" if grace is not None else ""),
                grace_seconds=grace,
            )
            journal.add_audit(
                session,
                actor=op.created_by,
                action=f"job.{command}",
                target_kind="job",
                target_name=before.name,
                detail={"operation": op.id, "item": item.id},
                node_id=self._node_id,
                team=before.team,
                before={"desired_state": before.desired_state.value, "state": before.state.value},
                after={"desired_state": after.desired_state.value, "state": after.state.value},
            )
        self._nudge(after.group, after.name)
        log.info("operation %s item %s (%s): %s applied", op.id, item.id, item.job_name, command)
        return written, after

    # -- one item -----------------------------------------------------------------------------

    def _advance(
        self, op: OperationRecord, item: ItemRecord, claim: Claim, first: _Read | None = None
    ) -> int:
        """Advance one item as far as it goes this round; returns 1 if it moved. ``first``:
        what the round read for it already (its job, its source run, the clusters)."""
        moved = 0
        force = fo.Force.from_json(op.options.get("force"))
        for _ in range(STEPS_PER_ROUND):
            if first is not None:
                read, first = first, None
            else:
                with self._store.session() as session:
                    read = _read(session, [item])
            job = read.jobs.get(item.job_id or -1)
            runs = read.runs
            clusters = read.clusters
            facts = fo.Facts(
                job,
                runs.get(item.source_run_id or -1),
                clusters,
                op.cancelling,
                self._clock(),
                force,
            )
            decision = fo.decide(item, facts, self._timing)
            try:
                if isinstance(decision, fo.Wait):
                    if (
                        item.detail.get("waiting") != decision.why
                        and not fo.Step(item.step).is_final
                    ):
                        item = self._write(item, claim, step=None, note="", waiting=decision.why)
                    return moved
                if isinstance(decision, fo.Record):
                    item = self._write(
                        item, claim, step=None, note=decision.note, fields=decision.fields
                    )
                    return 1
                if isinstance(decision, fo.MakeAvailable):
                    item = self._checkpoint(item, claim, decision)
                    if item.step == fo.Step.CHECKPOINT:
                        return moved  # retried later
                    moved = 1
                    continue
                item = self._apply(op, item, claim, decision, job)
                moved = 1
                if fo.Step(item.step).is_final:
                    return moved
            except NotOwner:
                raise  # the operation is no longer ours
            except StaleWrite as exc:
                log.info("item %s of operation %s: %s; again next round", item.id, op.id, exc)
                return moved
        return moved

    def _write(
        self,
        item: ItemRecord,
        claim: Claim,
        *,
        step: str | None,
        note: str,
        waiting: str | None = None,
        **kwargs: object,
    ) -> ItemRecord:
        self._check(claim)
        detail = dict(kwargs.pop("detail", None) or {})  # type: ignore[call-overload]
        if waiting is not None:
            detail["waiting"] = waiting
        with self._store.transaction() as session:
            return ops_store.advance_item(
                session,
                item,
                claim.fence,
                step=step,
                note=note,
                now=self._clock(),
                detail=detail or None,
                **kwargs,  # type: ignore[arg-type]
            )

    def _apply(
        self,
        op: OperationRecord,
        item: ItemRecord,
        claim: Claim,
        decision: fo.Advance,
        job: JobRecord | None,
    ) -> ItemRecord:
        fo.transition(fo.Step(item.step), decision.step)
        self._check(claim)
        now = self._clock()
        detail = {k: v for k, v in decision.fields.items() if k not in _ITEM_FIELDS}
        if not decision.step.is_final and decision.step != fo.Step.PENDING:
            detail["waiting"] = ""
        fields = {k: v for k, v in decision.fields.items() if k in _ITEM_FIELDS}
        if decision.step == fo.Step.DRAINING:
            detail["forced"] = bool(item.detail.get("forced"))
        with self._store.transaction() as session:
            written = ops_store.advance_item(
                session,
                item,
                claim.fence,
                step=decision.step.value,
                note=decision.note,
                now=now,
                fields=fields,
                detail=detail or None,
                error=decision.note if decision.step == fo.Step.FAILED else None,
            )
            record = job
            if decision.job_write is not None and record is not None:
                message = fo.job_event_message(item, decision.note)
                if isinstance(decision.job_write, fo.SetDirective):
                    ops_store.set_directive(
                        session,
                        record,
                        decision.job_write.directive,
                        now=now,
                        node_id=self._node_id,
                        message=message,
                    )
                else:
                    ops_store.switch_cluster(
                        session,
                        record,
                        decision.job_write.target,
                        decision.job_write.directive,
                        reason=decision.job_write.reason,
                        now=now,
                        node_id=self._node_id,
                    )
        if decision.job_write is not None and job is not None:
            self._nudge(job.group, job.name)
        if decision.step.is_final and item.detail.get("checkpoint"):
            self._release(item)
        log.info(
            "operation %s item %s (%s): %s -> %s: %s",
            op.id,
            item.id,
            item.job_name,
            item.step,
            decision.step,
            decision.note,
        )
        return written

    def _checkpoint(self, item: ItemRecord, claim: Claim, want: fo.MakeAvailable) -> ItemRecord:
        """The CHECKPOINT step's I/O, outside any transaction; its outcome recorded after."""
        try:
            got = self._make_available(
                want.job,
                source=want.source_location,
                target=want.target_location,
                target_root=want.target_root,
                store=self._store,
                holder=holder_of(item.operation_id),
            )
        except Exception as exc:
            attempts = item.attempts + 1
            error = f"{type(exc).__name__}: {exc}"
            log.warning("item %s: checkpoint attempt %d failed: %s", item.id, attempts, error)
            if attempts >= self._timing.checkpoint_attempts:
                return self._fail_checkpoint(item, claim, error)
            return self._write(
                item,
                claim,
                step=None,
                note=f"checkpoint attempt {attempts} failed: {error}",
                error=error,
                attempt=True,
                not_before=self._clock() + timedelta(seconds=self._timing.retry_after),
            )
        note = f"checkpoint {got.how}: {got.detail}; {got.resumes}"
        fo.transition(fo.Step.CHECKPOINT, fo.Step.SWITCHING)
        return self._write(
            item,
            claim,
            step=fo.Step.SWITCHING.value,
            note=note,
            detail={
                "checkpoint_from": want.source_location or "",
                "checkpoint_to": got.location,
                "resume_batch": got.resume_batch,
                "resume": got.resumes,
                "checkpoint": got.how,
                "waiting": "",
            },
        )

    def _release(self, item: ItemRecord) -> None:
        """The item is over: the replicator may write the job's replica again (the hold
        make_available took would otherwise last its full length)."""
        try:
            replication.release(self._store, item.job_name, holder=holder_of(item.operation_id))
        except Exception as exc:  # noqa: BLE001 - the hold runs out by itself
            log.info("item %s: cannot release the replica of %s (%s)", item.id, item.job_name, exc)

    def _fail_checkpoint(self, item: ItemRecord, claim: Claim, error: str) -> ItemRecord:
        with self._store.session() as session:
            job = ops_store.jobs_by_id(session, [item.job_id or -1]).get(item.job_id or -1)
        clear = job is not None and job.directive is not None and job.directive.item_id == item.id
        decision = fo.Advance(
            fo.Step.FAILED,
            f"the checkpoint could not be made available: {error}; the job stays on "
            f"{item.source_cluster}",
            job_write=fo.SetDirective(None) if clear else None,
        )
        with self._store.session() as session:
            op = ops_store.get_operation(session, item.operation_id)
        return self._apply(op, item, claim, decision, job)


_ITEM_FIELDS = frozenset({"source_run_id", "target_run_id"})


def _audit_prefix(kind: OperationKind) -> str:
    """Audit actions: ``failover.*`` for failovers, ``operation.*`` for bulk operations (their
    kind is in the entry's detail)."""
    return "failover" if kind == OperationKind.FAILOVER else "operation"


@dataclass(frozen=True)
class _Read:
    """What a round (or one more step of an item) reads: jobs, source runs, clusters."""

    jobs: dict[int, JobRecord]
    runs: dict[int, RunRecord]
    clusters: dict[str, ClusterRecord]


def _read(session: Session, items: list[ItemRecord]) -> _Read:
    return _Read(
        ops_store.jobs_by_id(session, [i.job_id for i in items if i.job_id is not None]),
        ops_store.runs_by_id(session, [i.source_run_id or 0 for i in items]),
        {c.name: c for c in catalog_store.list_clusters(session)},
    )


def persist_failover(
    session: Session,
    plan: fo.Plan,
    request: fo.Request,
    *,
    created_by: str,
    reason: str,
    incident: str | None,
    home_group: str,
    parallelism: int,
    node_id: str,
    now: datetime,
) -> OperationRecord:
    """Store ``plan`` as a PENDING failover operation, with its audit entry."""
    items = [
        ops_store.NewItem(
            job_id=i.job_id,
            job_name=i.job_name,
            action=i.action.value,
            why=i.why,
            step=fo.Step.PENDING.value,
            source_cluster=i.source,
            target_cluster=i.target,
            source_run_id=i.source_run_id,
            detail={"forced": i.forced, "priority": i.priority.value, "group": i.group},
        )
        for i in plan.items
    ]
    op = ops_store.create_operation(
        session,
        kind=OperationKind.FAILOVER,
        home_group=home_group,
        source_cluster=plan.source,
        target_cluster=plan.target,
        selector=request.selector.to_json(),
        options={
            "parallelism": parallelism,
            "force": request.force.to_json() if request.force is not None else None,
            "source_reachable": plan.source_reachable,
        },
        reason=reason,
        created_by=created_by,
        plan_digest=plan.digest,
        items=items,
        incident=incident,
        now=now,
    )
    journal.add_audit(
        session,
        actor=created_by,
        action="failover.create",
        target_kind="operation",
        target_name=str(op.id),
        detail={
            "source": plan.source,
            "target": plan.target,
            "selector": request.selector.to_json(),
            "reason": reason,
            "plan_digest": plan.digest,
            "items": len(plan.items),
            "incident": incident,
            "force": request.force.to_json() if request.force is not None else None,
        },
        node_id=node_id,
        after={"state": op.state.value, "items": [[i.job_name, i.action] for i in op.items]},
    )
    return op


def persist_bulk(
    session: Session,
    plan: bulk.Plan,
    selector: bulk.Selector,
    *,
    created_by: str,
    reason: str,
    home_group: str,
    parallelism: int,
    node_id: str,
    now: datetime,
    grace_seconds: float | None = None,
) -> OperationRecord:
    """Store ``plan`` as a PENDING bulk operation, with its audit entry. Its team is the one
    team of its jobs (None when they are several teams')."""
    teams = plan.teams
    team = next(iter(teams)) if len(teams) == 1 else None
    items = [
        ops_store.NewItem(
            job_id=i.job_id,
            job_name=i.job_name,
            action=i.action.value,
            why=i.why,
            step=bulk.Step.PENDING.value,
            source_cluster=i.cluster,
            detail={"priority": i.priority.value, "group": i.group, "team": i.team},
        )
        for i in plan.items
    ]
    op = ops_store.create_operation(
        session,
        kind=plan.kind,
        home_group=home_group,
        source_cluster=None,
        target_cluster=None,
        selector=selector.to_json(),
        options={
            "parallelism": parallelism,
            "teams": sorted(teams),
            "grace_seconds": grace_seconds,
        },
        reason=reason,
        created_by=created_by,
        plan_digest=plan.digest,
        items=items,
        now=now,
        team=team,
    )
    journal.add_audit(
        session,
        actor=created_by,
        action="operation.create",
        target_kind="operation",
        target_name=str(op.id),
        detail={
            "kind": plan.kind.value,
            "selector": selector.to_json(),
            "reason": reason,
            "plan_digest": plan.digest,
            "items": len(plan.items),
            "counts": plan.counts(),
            "parallelism": parallelism,
        },
        node_id=node_id,
        team=team or "",
        after={"state": op.state.value, "items": [[i.job_name, i.action] for i in op.items]},
    )
    return op


__all__ = ["Executor", "Fence", "RoundStats", "persist_bulk", "persist_failover"]
