"""Operations (failovers, bulk operations) in the store: creation, reads, the executor's fenced
writes, cancel, job directives and switches, groups' automatic failover policies.

Every write an executor makes is conditional on its claim on the operation (``executor = :me AND
executor_epoch = :epoch``: NotOwner otherwise) and, for an item or a job, on the version it read
(StaleWrite otherwise); nothing changes when a condition fails. An executor's job writes
(directive, switch) bump the job's ``version`` and ``updated_at`` like any other write, so the
job's owner re-reads the job and acts on it, and a write of the owner decided on an older
version is refused (the owner's ledger checks the version too). Each function takes a session;
the caller owns the transaction (the executor's transactions:
``scheduler.store.operations_ledger``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import and_, case, func, insert, literal, or_, select, update
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from scheduler.core.clock import utcnow
from scheduler.core.directive import Directive
from scheduler.core.errors import Conflict, NotFound, NotOwner, StaleWrite
from scheduler.core.operations import (
    ACTIVE_STATES,
    FINAL_STEP_NAMES,
    ItemChange,
    ItemRecord,
    NewOperation,
    OperationKind,
    OperationRecord,
    OperationState,
    StepEntry,
    audit_prefix,
    transition_operation,
)
from scheduler.core.operations import NewItem as NewItem  # the store's word for it too
from scheduler.core.ownership import Fence
from scheduler.core.records import JobRecord, RunRecord
from scheduler.core.states import DesiredState, JobState, Priority, transition
from scheduler.store import journal
from scheduler.store.db import add_new
from scheduler.store.jobs import with_current_runs
from scheduler.store.mapping import from_row, run_record, values_of
from scheduler.store.models import (
    ClusterHealthEvent,
    GroupFailoverPolicy,
    Job,
    JobEvent,
    Operation,
    OperationItem,
    Run,
)

CAUSE = "failover"
_ACTIVE = [s.value for s in ACTIVE_STATES]


# -- records -------------------------------------------------------------------------------------


def _item_record(row: OperationItem) -> ItemRecord:
    return from_row(
        ItemRecord,
        row,
        history=tuple(StepEntry.from_json(h) for h in row.history or ()),
        detail=dict(row.detail or {}),
    )


def _operation_record(row: Operation, items: Sequence[OperationItem] = ()) -> OperationRecord:
    return from_row(
        OperationRecord,
        row,
        kind=OperationKind(row.kind),
        state=OperationState(row.state),
        selector=dict(row.selector or {}),
        options=dict(row.options or {}),
        items=tuple(_item_record(i) for i in items),
    )


# -- create and read -----------------------------------------------------------------------------


def create_operation(
    session: Session,
    *,
    kind: OperationKind,
    home_group: str,
    source_cluster: str | None,
    target_cluster: str | None,
    selector: Mapping[str, Any],
    options: Mapping[str, Any],
    reason: str,
    created_by: str,
    plan_digest: str,
    items: Sequence[NewItem],
    incident: str | None = None,
    now: datetime | None = None,
    team: str | None = None,
) -> OperationRecord:
    """A new operation with its items, PENDING (SUCCEEDED at once when no item is left to run).
    AlreadyExists when ``incident`` already has an operation (automatic failovers)."""
    now = now or utcnow()
    pending = any(not _final_step(i.step) for i in items)
    row = Operation(
        kind=kind.value,
        state=(OperationState.PENDING if pending else OperationState.SUCCEEDED).value,
        home_group=home_group,
        source_cluster=source_cluster,
        target_cluster=target_cluster,
        selector=dict(selector),
        options=dict(options),
        reason=reason,
        created_by=created_by,
        team=team,
        incident=incident,
        plan_digest=plan_digest,
        executor=None,
        executor_epoch=0,
        version=1,
        created_at=now,
        updated_at=now,
        finished_at=None if pending else now,
    )
    add_new(session, row, f"incident {incident!r} already has an operation")
    rows = [
        OperationItem(
            **values_of(
                item,
                operation_id=row.id,
                position=position,
                history=[StepEntry(item.step, now, item.why).to_json()],
                attempts=0,
                last_error="",
                detail=dict(item.detail),
                version=1,
                updated_at=now,
            )
        )
        for position, item in enumerate(items)
    ]
    session.add_all(rows)
    session.flush()
    return _operation_record(row, rows)


def _final_step(step: str) -> bool:
    return step in FINAL_STEP_NAMES


def persist(session: Session, new: NewOperation, *, node_id: str, now: datetime) -> OperationRecord:
    """Store a plan as a PENDING operation (failover or bulk), with its audit entry as its
    creator. AlreadyExists when its incident already has an operation."""
    op = create_operation(
        session,
        kind=new.kind,
        home_group=new.home_group,
        source_cluster=new.source_cluster,
        target_cluster=new.target_cluster,
        selector=new.selector,
        options=new.options,
        reason=new.reason,
        created_by=new.created_by,
        plan_digest=new.plan_digest,
        items=new.items,
        incident=new.incident,
        now=now,
        team=new.team,
    )
    journal.add_audit(
        session,
        actor=new.created_by,
        action=f"{audit_prefix(new.kind)}.create",
        target_kind="operation",
        target_name=str(op.id),
        detail=dict(new.audit),
        node_id=node_id,
        team=new.team or "",
        after={"state": op.state.value, "items": [[i.job_name, i.action] for i in op.items]},
    )
    return op


def get_operation(session: Session, operation_id: int, *, items: bool = True) -> OperationRecord:
    """The operation, with its items in plan order unless ``items`` is False (NotFound)."""
    row = session.get(Operation, operation_id, populate_existing=True)
    if row is None:
        raise NotFound(f"no operation {operation_id}")
    if not items:
        return _operation_record(row)
    rows = session.scalars(
        select(OperationItem)
        .where(OperationItem.operation_id == operation_id)
        .order_by(OperationItem.position)
        .execution_options(populate_existing=True)
    ).all()
    return _operation_record(row, rows)


def list_operations(
    session: Session,
    *,
    kind: OperationKind | None = None,
    kinds: Iterable[OperationKind] = (),
    states: Iterable[OperationState] = (),
    source_cluster: str | None = None,
    before_id: int | None = None,
    limit: int = 50,
    visible_to: tuple[frozenset[str], str] | None = None,
) -> list[OperationRecord]:
    """Newest first, without their items (see :func:`step_counts`). ``visible_to``: ``(teams,
    subject)`` -- only the operations of those teams or created by that subject (None: all)."""
    stmt = select(Operation)
    if kind is not None:
        stmt = stmt.where(Operation.kind == kind.value)
    wanted_kinds = sorted(k.value for k in kinds)
    if wanted_kinds:
        stmt = stmt.where(Operation.kind.in_(wanted_kinds))
    if visible_to is not None:
        teams, subject = visible_to
        stmt = stmt.where(
            or_(Operation.team.in_(sorted(teams)), Operation.created_by == subject)
            if teams
            else Operation.created_by == subject
        )
    wanted = [s.value for s in states]
    if wanted:
        stmt = stmt.where(Operation.state.in_(wanted))
    if source_cluster is not None:
        stmt = stmt.where(Operation.source_cluster == source_cluster)
    if before_id is not None:
        stmt = stmt.where(Operation.id < before_id)
    rows = session.scalars(stmt.order_by(Operation.id.desc()).limit(limit)).all()
    return [_operation_record(r) for r in rows]


def step_counts(session: Session, operation_ids: Sequence[int]) -> dict[int, dict[str, int]]:
    """Per operation: its items per step (one query)."""
    if not operation_ids:
        return {}
    rows = session.execute(
        select(OperationItem.operation_id, OperationItem.step, func.count())
        .where(OperationItem.operation_id.in_(list(operation_ids)))
        .group_by(OperationItem.operation_id, OperationItem.step)
    )
    out: dict[int, dict[str, int]] = {}
    for op_id, step, count in rows:
        out.setdefault(int(op_id), {})[str(step)] = int(count)
    return out


def active_operations(session: Session, home_groups: Iterable[str]) -> list[OperationRecord]:
    """PENDING and RUNNING operations of ``home_groups``, oldest first, without items."""
    groups = sorted(set(home_groups))
    if not groups:
        return []
    rows = session.scalars(
        select(Operation)
        .where(Operation.state.in_(_ACTIVE), Operation.home_group.in_(groups))
        .order_by(Operation.id)
    ).all()
    return [_operation_record(r) for r in rows]


# -- the executor's claim and fenced writes ------------------------------------------------------


def claim_operation(session: Session, operation_id: int, fence: Fence) -> bool:
    """Take the operation under ``fence`` (an epoch of its home group); False when another node
    holds it under a newer epoch, or it is over. Never taken back by an older epoch."""
    result = session.execute(
        update(Operation)
        .where(
            Operation.id == operation_id,
            Operation.state.in_(_ACTIVE),
            Operation.executor_epoch <= fence.epoch,
            or_(
                Operation.executor_epoch < fence.epoch,
                Operation.executor.is_(None),
                Operation.executor == fence.node_id,
            ),
        )
        .values(
            executor=fence.node_id,
            executor_epoch=fence.epoch,
            executor_since=utcnow(),
            version=Operation.version + 1,
            updated_at=utcnow(),
        )
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def check_executor(
    session: Session, operation_id: int, fence: Fence, *, shared: bool = False
) -> None:
    """Prove in this transaction that ``fence`` still executes the operation (NotOwner). On MySQL
    it also locks the operation's row until the transaction ends, so a concurrent claim by
    another node waits for this transaction: ``shared``, a shared lock (the executor's own
    transactions on several items of the operation go on side by side); else an exclusive one
    (a no-op UPDATE: before a change of the operation's row)."""
    owned = (
        Operation.id == operation_id,
        Operation.executor == fence.node_id,
        Operation.executor_epoch == fence.epoch,
    )
    if shared:
        held = session.execute(select(Operation.id).where(*owned).with_for_update(read=True))
        proven = held.first() is not None
    else:
        result = session.execute(
            update(Operation)
            .where(*owned)
            .values(executor_epoch=Operation.executor_epoch)
            .execution_options(synchronize_session=False)
        )
        proven = result.rowcount == 1  # type: ignore[attr-defined]
    if not proven:
        raise NotOwner(
            f"operation {operation_id} is no longer executed by {fence.node_id} under epoch "
            f"{fence.epoch}"
        )


def set_operation_state(
    session: Session,
    operation: OperationRecord,
    fence: Fence,
    state: OperationState,
    *,
    now: datetime,
) -> OperationRecord:
    check_executor(session, operation.id, fence)
    row = session.get(Operation, operation.id, populate_existing=True)
    assert row is not None
    current = OperationState(row.state)
    transition_operation(current, state)
    if state == current:
        return _operation_record(row)
    row.state = state.value
    row.version += 1
    row.updated_at = now
    if state == OperationState.RUNNING and row.started_at is None:
        row.started_at = now
    if state.is_final:
        row.finished_at = now
    session.flush()
    return _operation_record(row)


def _item_values(before: ItemRecord, after: ItemRecord) -> dict[str, Any]:
    """The columns that make ``before`` into ``after`` (:meth:`ItemRecord.after`)."""
    values: dict[str, Any] = {
        "history": [h.to_json() for h in after.history],
        "version": after.version,
        "updated_at": after.updated_at,
        "not_before": after.not_before,
    }
    for column in (
        "step",
        "started_at",
        "finished_at",
        "source_run_id",
        "target_run_id",
        "last_error",
        "attempts",
    ):
        if getattr(after, column) != getattr(before, column):
            values[column] = getattr(after, column)
    if after.detail != before.detail:
        values["detail"] = dict(after.detail)
    return values


def write_item(
    session: Session, item: ItemRecord, changes: Sequence[ItemChange], *, now: datetime
) -> ItemRecord | None:
    """Write ``changes`` of the item (one after the other: :meth:`ItemRecord.after`) in one
    statement, conditional on the version ``item`` was read at. The item as written; None when
    its version moved (nothing written). The caller proves the executor's claim
    (:func:`check_executor`)."""
    after = item
    for change in changes:
        after = after.after(change, now)
    result = session.execute(
        update(OperationItem)
        .where(OperationItem.id == item.id, OperationItem.version == item.version)
        .values(**_item_values(item, after))
        .execution_options(synchronize_session=False)
    )
    return after if result.rowcount == 1 else None  # type: ignore[attr-defined]


#: items one statement of :func:`write_items` writes at most
ITEM_BATCH = 200


def write_items(
    session: Session,
    writes: Sequence[tuple[ItemRecord, Sequence[ItemChange]]],
    *,
    now: datetime,
) -> list[ItemRecord | None]:
    """:func:`write_item` for many items in a few statements: per :data:`ITEM_BATCH` items, one
    read of their versions (locking their rows on MySQL) and one UPDATE of those still at the
    version they were read at (each row its own values). Per write, in order: the item as
    written, or None when its version moved (nothing written for it). StaleWrite (nothing of the
    batch to keep: the caller's transaction rolls back) when a row moved between the read and the
    UPDATE, which the row locks rule out on MySQL. The caller proves the executor's claim
    (:func:`check_executor`)."""
    if len({item.id for item, _ in writes}) != len(writes):
        raise ValueError("write_items: one write per item")
    out: list[ItemRecord | None] = []
    for start in range(0, len(writes), ITEM_BATCH):
        out.extend(_write_batch(session, writes[start : start + ITEM_BATCH], now))
    return out


def _write_batch(
    session: Session, writes: Sequence[tuple[ItemRecord, Sequence[ItemChange]]], now: datetime
) -> list[ItemRecord | None]:
    if len(writes) < 3:  # a statement each costs no more than the version read
        return [write_item(session, item, changes, now=now) for item, changes in writes]
    stored = {
        int(item_id): int(version)
        for item_id, version in session.execute(
            select(OperationItem.id, OperationItem.version)
            .where(OperationItem.id.in_([item.id for item, _ in writes]))
            .with_for_update()
        )
    }
    out: list[ItemRecord | None] = []
    rows: list[tuple[ItemRecord, dict[str, Any]]] = []
    for item, changes in writes:
        if stored.get(item.id) != item.version:
            out.append(None)
            continue
        after = item
        for change in changes:
            after = after.after(change, now)
        out.append(after)
        rows.append((item, _item_values(item, after)))
    if not rows:
        return out
    table = OperationItem.__table__
    columns = sorted({column for _, values in rows for column in values})
    assignments = {
        column: case(
            {
                item.id: literal(values[column], table.c[column].type)
                for item, values in rows
                if column in values
            },
            value=OperationItem.id,
            else_=table.c[column],
        )
        for column in columns
    }
    result = session.execute(
        update(OperationItem)
        .where(
            or_(
                *(
                    and_(OperationItem.id == item.id, OperationItem.version == item.version)
                    for item, _ in rows
                )
            )
        )
        .values(assignments)
        .execution_options(synchronize_session=False)
    )
    matched: int = result.rowcount  # type: ignore[attr-defined]
    if matched != len(rows):
        raise StaleWrite(f"{len(rows) - matched} of {len(rows)} items moved meanwhile")
    return out


def advance_item(
    session: Session, item: ItemRecord, changes: Sequence[ItemChange], *, now: datetime
) -> ItemRecord:
    """:func:`write_item`, StaleWrite when the item's version moved."""
    written = write_item(session, item, changes, now=now)
    if written is None:
        raise StaleWrite(f"item {item.id} changed since version {item.version}")
    return written


def request_cancel(
    session: Session, operation_id: int, *, by: str, now: datetime | None = None
) -> OperationRecord:
    """Ask the executor to stop after the current steps. An operation no executor has started
    yet is CANCELLED at once, with all its items. Conflict when it is over."""
    now = now or utcnow()
    row = session.get(Operation, operation_id)
    if row is None:
        raise NotFound(f"no operation {operation_id}")
    state = OperationState(row.state)
    if state.is_final:
        raise Conflict(f"operation {operation_id} is {state}: there is nothing to cancel")
    unclaimed = session.execute(
        update(Operation)
        .where(
            Operation.id == operation_id,
            Operation.state == OperationState.PENDING.value,
            Operation.executor.is_(None),
        )
        .values(
            state=OperationState.CANCELLED.value,
            cancel_requested_at=now,
            cancel_requested_by=by,
            finished_at=now,
            version=Operation.version + 1,
            updated_at=now,
        )
        .execution_options(synchronize_session=False)
    )
    if unclaimed.rowcount:  # type: ignore[attr-defined]
        for item in session.scalars(
            select(OperationItem).where(OperationItem.operation_id == operation_id)
        ):
            if not _final_step(item.step):
                item.history = [
                    *(item.history or []),
                    StepEntry("CANCELLED", now, f"cancelled by {by} before it started").to_json(),
                ]
                item.step = "CANCELLED"
                item.version += 1
                item.updated_at = now
                item.finished_at = now
    else:
        session.execute(
            update(Operation)
            .where(Operation.id == operation_id, Operation.cancel_requested_at.is_(None))
            .values(
                cancel_requested_at=now,
                cancel_requested_by=by,
                version=Operation.version + 1,
                updated_at=now,
            )
            .execution_options(synchronize_session=False)
        )
    session.flush()
    return get_operation(session, operation_id)


# -- jobs: what the executor reads and writes ----------------------------------------------------


def jobs_by_id(session: Session, ids: Iterable[int]) -> dict[int, JobRecord]:
    wanted = sorted(set(ids))
    if not wanted:
        return {}
    rows = list(session.scalars(select(Job).where(Job.id.in_(wanted))))
    return {j.id: j for j in with_current_runs(session, rows)}


def runs_by_id(session: Session, ids: Iterable[int]) -> dict[int, RunRecord]:
    wanted = sorted({i for i in ids if i is not None})
    if not wanted:
        return {}
    rows = session.execute(
        select(Run, Job.name).join(Job, Job.id == Run.job_id).where(Run.id.in_(wanted))
    ).all()
    return {run.id: run_record(run, name) for run, name in rows}


def candidate_jobs(session: Session, source_cluster: str) -> list[JobRecord]:
    """The jobs that may be on ``source_cluster``: its own, its groups' jobs without a cluster,
    and those whose current run is there (the plan decides by where each job is)."""
    from scheduler.store.models import Group

    primary_of = select(Group.name).where(Group.primary_cluster == source_cluster)
    on_it = select(Run.id).where(Run.cluster_name == source_cluster)
    rows = list(
        session.scalars(
            select(Job)
            .where(
                (Job.cluster_name == source_cluster)
                | (Job.cluster_name.is_(None) & Job.group_name.in_(primary_of))
                | Job.current_run_id.in_(on_it)
            )
            .order_by(Job.id)
        )
    )
    return with_current_runs(session, rows)


@dataclass(frozen=True)
class JobChange:
    """A write of the executor on one job: its ``values`` (columns), ``written`` (the record's
    fields they set), the message of its event and the state it moves the job to (if any)."""

    job: JobRecord
    values: dict[str, Any]
    written: dict[str, Any]
    message: str
    to_state: JobState | None = None


def directive_change(job: JobRecord, directive: Directive | None, *, message: str) -> JobChange:
    """Write (or clear) the job's directive."""
    return JobChange(
        job,
        {"directive": directive.to_json() if directive is not None else None},
        {"directive": directive},
        message,
    )


def switch_change(
    job: JobRecord, target: str, directive: Directive | None, *, reason: str, now: datetime
) -> JobChange:
    """Switch the job to ``target`` (its open run must be closed: StaleWrite otherwise). A job
    that should run and is at rest is queued to run there, its restart budget reset."""
    current = job.current_run
    if current is not None and not current.state.is_final:
        raise StaleWrite(f"job {job.name!r} still has an open run ({current.id})")
    values: dict[str, Any] = {
        "cluster_name": target,
        "directive": directive.to_json() if directive is not None else None,
        "not_before": None,
    }
    written: dict[str, Any] = {"cluster": target, "directive": directive, "not_before": None}
    to_state = None
    if job.desired_state == DesiredState.RUNNING:
        values["attempts_reset_at"] = written["attempts_reset_at"] = now
        values["state_reason"] = written["state_reason"] = reason
        if job.state != JobState.QUEUED:
            transition(job.state, JobState.QUEUED)
            values["state"] = JobState.QUEUED.value
            written["state"] = to_state = JobState.QUEUED
    return JobChange(job, values, written, reason, to_state)


def write_jobs(
    session: Session, changes: Sequence[JobChange], *, now: datetime, node_id: str
) -> list[JobRecord]:
    """The changes' jobs written in one statement, each conditional on the version its job was
    read at (StaleWrite when one moved: nothing of the caller's transaction to keep), version and
    ``updated_at`` bumped, and their events in one more. The jobs as written, in order."""
    if not changes:
        return []
    if len({c.job.id for c in changes}) != len(changes):
        raise ValueError("write_jobs: one change per job")
    table = Job.__table__
    if len(changes) == 1:
        values: dict[str, Any] = dict(changes[0].values)
    else:
        columns = sorted({column for c in changes for column in c.values})
        values = {
            column: case(
                {
                    c.job.id: literal(c.values[column], table.c[column].type)
                    for c in changes
                    if column in c.values
                },
                value=Job.id,
                else_=table.c[column],
            )
            for column in columns
        }
    result = session.execute(
        update(Job)
        .where(or_(*(and_(Job.id == c.job.id, Job.version == c.job.version) for c in changes)))
        .values(**values, version=Job.version + 1, updated_at=now)
        .execution_options(synchronize_session=False)
    )
    matched: int = result.rowcount  # type: ignore[attr-defined]
    if matched != len(changes):
        if len(changes) == 1:
            job = changes[0].job
            raise StaleWrite(f"job {job.name!r} changed since version {job.version}")
        raise StaleWrite(f"{len(changes) - matched} of {len(changes)} jobs changed meanwhile")
    session.execute(
        insert(JobEvent),
        [
            {
                "job_id": c.job.id,
                "run_id": c.job.current_run_id,
                "at": now,
                "from_state": c.job.state.value if c.to_state is not None else None,
                "to_state": c.to_state.value if c.to_state is not None else None,
                "cause": CAUSE,
                "message": c.message,
                "node_id": node_id,
            }
            for c in changes
        ],
    )
    return [replace(c.job, **c.written, version=c.job.version + 1, updated_at=now) for c in changes]


def set_directive(
    session: Session,
    job: JobRecord,
    directive: Directive | None,
    *,
    now: datetime,
    node_id: str,
    message: str,
) -> JobRecord:
    """Write (or clear) the job's directive, conditional on the version ``job`` was read at;
    the job as written."""
    [written] = write_jobs(
        session, [directive_change(job, directive, message=message)], now=now, node_id=node_id
    )
    return written


def switch_cluster(
    session: Session,
    job: JobRecord,
    target: str,
    directive: Directive | None,
    *,
    reason: str,
    now: datetime,
    node_id: str,
) -> JobRecord:
    """Switch the job to ``target`` (:func:`switch_change`), conditional on the version ``job``
    was read at; the job as written."""
    change = switch_change(job, target, directive, reason=reason, now=now)
    [written] = write_jobs(session, [change], now=now, node_id=node_id)
    return written


# -- fence checks --------------------------------------------------------------------------------


def record_superseded_check(session: Session, job_name: str, run_id: int, at: datetime) -> bool:
    """A fence check of one of the job's runs (``run_id``, which the check's fencing token
    proved: ``identities.run_of_fencing_token``) that is not current (closed, or replaced) was
    answered "superseded": note it on that run, once (the failover's fence step waits for it)."""
    job_id = select(Job.id).where(Job.name == job_name).scalar_subquery()
    current = select(Job.current_run_id).where(Job.name == job_name).scalar_subquery()
    result = session.execute(
        update(Run)
        .where(
            Run.job_id == job_id,
            Run.id == run_id,
            Run.fence_superseded_at.is_(None),
            or_(Run.ended_at.is_not(None), Run.id != current),
        )
        .values(fence_superseded_at=at)
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


# -- incidents and automatic failover policies ---------------------------------------------------


def incident_start(session: Session, cluster: str) -> tuple[int, datetime] | None:
    """The event that began the cluster's current abnormal period (its last transition out of
    NORMAL): its id and time; None when there is none."""
    row = session.execute(
        select(ClusterHealthEvent.id, ClusterHealthEvent.at)
        .where(
            ClusterHealthEvent.cluster_name == cluster,
            ClusterHealthEvent.from_state == "NORMAL",
            ClusterHealthEvent.to_state != "NORMAL",
        )
        .order_by(ClusterHealthEvent.id.desc())
        .limit(1)
    ).first()
    return (int(row[0]), row[1]) if row is not None else None


@dataclass(frozen=True)
class PolicyRecord:
    group: str
    enabled: bool
    after_seconds: float
    min_priority: Priority
    version: int
    updated_by: str
    updated_at: datetime | None


def _policy_record(row: GroupFailoverPolicy) -> PolicyRecord:
    return PolicyRecord(
        row.group_name,
        row.enabled,
        row.after_seconds,
        Priority(row.min_priority),
        row.version,
        row.updated_by,
        row.updated_at,
    )


DEFAULT_AFTER_SECONDS = 120.0


def get_policy(session: Session, group: str) -> PolicyRecord:
    """The group's policy (off by default: a group without a row has it disabled)."""
    from scheduler.store.catalog import load_group

    load_group(session, group)
    row = session.get(GroupFailoverPolicy, group)
    if row is None:
        return PolicyRecord(group, False, DEFAULT_AFTER_SECONDS, Priority.HIGH, 0, "", None)
    return _policy_record(row)


def put_policy(
    session: Session,
    group: str,
    *,
    enabled: bool,
    after_seconds: float,
    min_priority: Priority,
    by: str,
    expected_version: int | None = None,
) -> PolicyRecord:
    from scheduler.core.errors import PreconditionFailed
    from scheduler.store.catalog import load_group

    load_group(session, group)
    row = session.get(GroupFailoverPolicy, group, with_for_update=True)
    version = row.version if row is not None else 0
    if expected_version is not None and expected_version != version:
        raise PreconditionFailed(
            f"the failover policy of group {group!r} is at version {version}, not "
            f"{expected_version}"
        )
    now = utcnow()
    if row is None:
        row = GroupFailoverPolicy(group_name=group, version=0)
        session.add(row)
    row.enabled = enabled
    row.after_seconds = after_seconds
    row.min_priority = min_priority.value
    row.version = version + 1
    row.updated_by = by
    row.updated_at = now
    session.flush()
    return _policy_record(row)


def enabled_policies(session: Session, groups: Iterable[str]) -> list[PolicyRecord]:
    wanted = sorted(set(groups))
    if not wanted:
        return []
    rows = session.scalars(
        select(GroupFailoverPolicy).where(
            GroupFailoverPolicy.group_name.in_(wanted), GroupFailoverPolicy.enabled.is_(True)
        )
    )
    return [_policy_record(r) for r in rows]


# -- bulk operations: the jobs a selector may pick -----------------------------------------------


def bulk_candidates(
    session: Session,
    *,
    teams: Iterable[str] = (),
    businesses: Iterable[str] = (),
    groups: Iterable[str] = (),
    states: Iterable[str] = (),
    priorities: Iterable[str] = (),
    jobs: Iterable[str] = (),
    name_prefix: str = "",
    visible_teams: frozenset[str] | None = None,
) -> list[JobRecord]:
    """The jobs that may match a bulk selector (a superset: the selector's pure match decides;
    clusters and labels are matched there only), in id order. ``visible_teams``: only jobs of
    these teams (None: every team)."""
    conditions: list[ColumnElement[bool]] = []
    for column, values in (
        (Job.team, teams),
        (Job.business, businesses),
        (Job.group_name, groups),
        (Job.state, states),
        (Job.priority, priorities),
        (Job.name, jobs),
    ):
        wanted = sorted(set(values))
        if wanted:
            conditions.append(column.in_(wanted))
    if visible_teams is not None:
        conditions.append(Job.team.in_(sorted(visible_teams)))
    if name_prefix:
        conditions.append(Job.name.startswith(name_prefix, autoescape=True))
    rows = list(session.scalars(select(Job).where(*conditions).order_by(Job.id)))
    return with_current_runs(session, rows)
