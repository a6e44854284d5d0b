"""The operations ledger in SQL: the operations executor's fenced transactions
(``scheduler.core.operations_ledger.OperationsLedger``; its rules are there).

One method, one transaction (or one read), built of the repository functions of
``scheduler.store.operations``: a round of the executor reads each operation once
(:meth:`SqlOperationsLedger.read`) and writes the advances of its items -- the claim's proof, the
items' steps and the job writes that go with them -- in one transaction (:meth:`advance`); what
only notes an item (what it waits for, a run it recorded) goes for many items at once too
(:meth:`note`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from scheduler.core.errors import NotFound, StaleWrite
from scheduler.core.operations import (
    ItemChange,
    ItemRecord,
    NewOperation,
    OperationRecord,
    OperationState,
    audit_prefix,
)
from scheduler.core.operations_ledger import (
    AutoDecision,
    AutomaticFacts,
    Candidates,
    FailoverPolicy,
    ItemWrite,
    RoundRead,
    SetDirective,
    Written,
)
from scheduler.core.ownership import Fence
from scheduler.core.records import JobRecord
from scheduler.core.states import Command, command_effect
from scheduler.decisions.alerts import AlertKind, Signal, key_of
from scheduler.decisions.health import ClusterHealth
from scheduler.decisions.operations import auto, bulk
from scheduler.store import alerts as alert_store
from scheduler.store import auto_failover as auto_store
from scheduler.store import catalog as catalog_store
from scheduler.store import jobs as jobs_store
from scheduler.store import journal
from scheduler.store import operations as ops
from scheduler.store.db import Store
from scheduler.store.models import utcnow

NORMAL = ClusterHealth.NORMAL.value


def _alert(session: Session, decision: AutoDecision, now: datetime) -> None:
    """The alert of an automatic failover decision: a held one fires (again when its reason
    changed); a created one fires and ends the group's held alert."""
    subject = f"{decision.group}:{decision.cluster}"
    held_key = key_of(AlertKind.AUTO_FAILOVER_HELD, subject)
    open_held = next(
        (a for a in alert_store.open_alerts(session, [AlertKind.AUTO_FAILOVER_HELD])
         if a.key == held_key),
        None,
    )  # fmt: skip
    details = {
        "incident": decision.incident,
        "code": decision.code,
        "target": decision.target,
        "operation_id": decision.operation_id,
    }
    if decision.verdict == auto.HELD:
        if open_held is not None and open_held.details.get("code") == decision.code:
            return
        if open_held is not None:
            alert_store.resolve_alert(session, held_key, f"now: {decision.why}", now)
        alert_store.raise_alert(
            session,
            Signal(
                AlertKind.AUTO_FAILOVER_HELD,
                subject,
                decision.why,
                cluster=decision.cluster,
                group=decision.group,
                details=details,
            ),
            now,
        )
        return
    if open_held is not None:
        alert_store.resolve_alert(
            session, held_key, f"automatic failover {decision.operation_id} created", now
        )
    alert_store.raise_alert(
        session,
        Signal(
            AlertKind.AUTO_FAILOVER,
            subject,
            f"automatic failover {decision.operation_id} of group {decision.group}: "
            f"{decision.cluster} -> {decision.target}; {decision.why}",
            cluster=decision.cluster,
            group=decision.group,
            details=details,
        ),
        now,
    )


class SqlOperationsLedger:
    """The operations ledger of ``node_id`` on ``store`` (audit entries and job events name it)."""

    def __init__(
        self, store: Store, *, node_id: str, clock: Callable[[], datetime] = utcnow
    ) -> None:
        self._store = store
        self._node_id = node_id
        self._clock = clock

    # -- reads --------------------------------------------------------------------------------

    def active(self, groups: Iterable[str]) -> list[OperationRecord]:
        with self._store.session() as session:
            return ops.active_operations(session, groups)

    def read(
        self, operation_id: int, choose: Callable[[OperationRecord], Sequence[ItemRecord]]
    ) -> RoundRead:
        with self._store.session() as session:
            op = ops.get_operation(session, operation_id)
            chosen = tuple(choose(op))
            if not chosen:
                return RoundRead(op, chosen)
            return RoundRead(
                op,
                chosen,
                ops.jobs_by_id(session, [i.job_id for i in chosen if i.job_id is not None]),
                ops.runs_by_id(session, [i.source_run_id or 0 for i in chosen]),
                {c.name: c for c in catalog_store.list_clusters(session)},
            )

    def job(self, job_id: int) -> JobRecord | None:
        with self._store.session() as session:
            return ops.jobs_by_id(session, [job_id]).get(job_id)

    def automatic(self, groups: Iterable[str]) -> AutomaticFacts:
        with self._store.session() as session:
            policies = [
                FailoverPolicy(p.group, p.enabled, p.after_seconds, p.min_priority)
                for p in ops.enabled_policies(session, groups)
            ]
            if not policies:
                return AutomaticFacts(policies)
            clusters = {c.name: c for c in catalog_store.list_clusters(session)}
            incidents = {
                c.name: found
                for c in clusters.values()
                if c.health in auto.AUTOMATIC
                and (found := ops.incident_start(session, c.name)) is not None
            }
            groups = {g.name: g for g in catalog_store.list_groups(session)}
            if not incidents:  # nothing due: the switch and the cool-downs are not needed
                return AutomaticFacts(policies, groups, clusters)
            return AutomaticFacts(
                policies,
                groups,
                clusters,
                incidents,
                paused=auto_store.switch(session),
                recoveries=auto_store.recoveries(
                    session, [c.name for c in clusters.values() if c.health == NORMAL]
                ),
            )

    def decided(self, decisions: Sequence[AutoDecision]) -> int:
        if not decisions:
            return 0
        now = self._clock()
        written = 0
        with self._store.transaction() as session:
            for decision in decisions:
                event = auto_store.record_decision(
                    session, decision, node_id=self._node_id, now=now
                )
                if event is None:
                    continue  # said already
                written += 1
                _alert(session, decision, now)
        return written

    def candidates(self, source: str) -> Candidates:
        with self._store.session() as session:
            return Candidates(
                ops.candidate_jobs(session, source),
                {g.name: g for g in catalog_store.list_groups(session)},
                {c.name: c for c in catalog_store.list_clusters(session)},
            )

    # -- writes -------------------------------------------------------------------------------

    def create(self, new: NewOperation) -> OperationRecord:
        with self._store.transaction() as session:
            return ops.persist(session, new, node_id=self._node_id, now=self._clock())

    def take(self, operation_id: int, fence: Fence) -> OperationRecord | None:
        now = self._clock()
        with self._store.transaction() as session:
            if not ops.claim_operation(session, operation_id, fence):
                return None
            op = ops.get_operation(session, operation_id, items=False)
            if op.state != OperationState.PENDING:
                return op
            started = ops.set_operation_state(session, op, fence, OperationState.RUNNING, now=now)
            self._audit(
                session, op, "start", {"executor": fence.node_id, "epoch": fence.epoch}
            )
            return started

    def advance(
        self, fence: Fence, operation: OperationRecord, writes: Sequence[ItemWrite]
    ) -> list[Written]:
        if not writes:
            return []
        if len({w.item.id for w in writes}) != len(writes):
            raise ValueError("advance: one write per item")
        jobs = [w.job.id for w in writes if w.job is not None and w.job_write is not None]
        if len(set(jobs)) != len(jobs):
            raise ValueError("advance: one write per job")
        now = self._clock()
        with self._store.transaction() as session:
            ops.check_executor(session, operation.id, fence, shared=True)
            items = ops.write_items(session, [(w.item, w.changes) for w in writes], now=now)
            moved = [w.item.id for w, item in zip(writes, items, strict=True) if item is None]
            if moved:
                raise StaleWrite(f"items {moved} changed since they were read")
            changes = {
                w.item.id: ops.directive_change(w.job, w.job_write.directive, message=w.message)
                if isinstance(w.job_write, SetDirective)
                else ops.switch_change(
                    w.job,
                    w.job_write.target,
                    w.job_write.directive,
                    reason=w.job_write.reason,
                    now=now,
                )
                for w in writes
                if w.job is not None and w.job_write is not None
            }
            # the jobs in one statement, as the owners' batched writes are
            node = self._node_id
            jobs_after = ops.write_jobs(session, [*changes.values()], now=now, node_id=node)
            after = dict(zip(changes, jobs_after, strict=True))
        return [
            Written(item, after.get(w.item.id))
            for w, item in zip(writes, items, strict=True)
            if item is not None
        ]

    def note(
        self,
        fence: Fence,
        operation: OperationRecord,
        notes: Sequence[tuple[ItemRecord, Sequence[ItemChange]]],
    ) -> list[ItemRecord]:
        if not notes:
            return []
        now = self._clock()
        with self._store.transaction() as session:
            ops.check_executor(session, operation.id, fence, shared=True)
            written = ops.write_items(session, notes, now=now)
        return [w for w in written if w is not None]

    def apply_command(
        self,
        fence: Fence,
        operation: OperationRecord,
        item: ItemRecord,
        command: Command,
        note: str,
    ) -> Written:
        now = self._clock()
        with self._store.transaction() as session:
            ops.check_executor(session, operation.id, fence, shared=True)
            try:
                row = jobs_store.load_job(session, item.job_name, for_update=True)
            except NotFound:
                row = None
            if row is None or row.id != item.job_id:
                gone = "the job was deleted"
                change = ItemChange(
                    bulk.Step.FAILED.value, gone, error=gone, detail={"waiting": ""}
                )
                return Written(ops.advance_item(session, item, [change], now=now))
            before = jobs_store.with_run(session, row)
            skip = bulk.recheck(command, before)
            if skip is not None:
                change = ItemChange(bulk.Step.SKIPPED.value, skip, detail={"waiting": ""})
                return Written(ops.advance_item(session, item, [change], now=now), before)
            effect = command_effect(command, before.desired_state, before.state)
            grace = operation.options.get("grace_seconds")
            waiting = ItemChange(
                bulk.Step.WAITING.value,
                note,
                detail={"waiting": "", "run_before": before.current_run_id},
            )
            written = ops.advance_item(session, item, [waiting], now=now)
            after = jobs_store.apply_command(
                session,
                before.name,
                effect,
                expected_version=None,
                cause=f"operation:{operation.id}",
                node_id=self._node_id,
                message=f"{command} by bulk operation {operation.id} of {operation.created_by}"
                + (f" (grace {grace:g} s)" if grace is not None else ""),
                grace_seconds=grace,
            )
            journal.add_audit(
                session,
                actor=operation.created_by,
                action=f"job.{command}",
                target_kind="job",
                target_name=before.name,
                detail={"operation": operation.id, "item": item.id},
                node_id=self._node_id,
                team=before.team,
                before={"desired_state": before.desired_state.value, "state": before.state.value},
                after={"desired_state": after.desired_state.value, "state": after.state.value},
            )
            return Written(written, after)

    def finish(self, fence: Fence, operation: OperationRecord, state: OperationState) -> None:
        now = self._clock()
        with self._store.transaction() as session:
            ops.set_operation_state(session, operation, fence, state, now=now)
            self._audit(
                session, operation, "finish", {"state": state.value, "items": operation.counts()}
            )

    def _audit(
        self, session: Session, operation: OperationRecord, verb: str, detail: dict[str, Any]
    ) -> None:
        """The audit entry of this node's executor starting or finishing ``operation``."""
        journal.add_audit(
            session,
            actor=f"node:{self._node_id}",
            action=f"{audit_prefix(operation.kind)}.{verb}",
            target_kind="operation",
            target_name=str(operation.id),
            detail={**detail, "kind": operation.kind},
            node_id=self._node_id,
            team=operation.team or "",
        )
