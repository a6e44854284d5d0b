"""The journal: job events (what happened to a job, and why) and the audit log (who changed
what)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Required, TypedDict, Unpack

from sqlalchemy import func, insert, select
from sqlalchemy.orm import Session

from scheduler.core.paging import KeyPart, Window
from scheduler.core.records import (
    AuditRecord,
    EventRecord,
    JobRecord,
)
from scheduler.core.states import JobState
from scheduler.store import paging
from scheduler.store.models import AuditEntry, Job, JobEvent


def add_event(
    session: Session,
    job: Job,
    run_id: int | None,
    from_state: JobState | None,
    to_state: JobState | None = None,
    *,
    cause: str,
    message: str,
    node_id: str,
) -> None:
    session.add(
        JobEvent(
            job_id=job.id,
            run_id=run_id,
            from_state=from_state.value if from_state else None,
            to_state=to_state.value if to_state else None,
            cause=cause,
            message=message,
            node_id=node_id,
        )
    )


def add_job_event(
    session: Session,
    job: JobRecord,
    *,
    cause: str,
    message: str,
    node_id: str,
    run_id: int | None = None,
) -> None:
    """An event that is not a state change (a warning, a retry, an adopted application)."""
    session.add(
        JobEvent(
            job_id=job.id,
            run_id=run_id if run_id is not None else job.current_run_id,
            cause=cause,
            message=message,
            node_id=node_id,
        )
    )


def list_events(
    session: Session, name: str, *, limit: int = 100, offset: int = 0
) -> tuple[list[EventRecord], int]:
    job_id = paging.job_id_of(session, name)
    total = (
        session.scalar(select(func.count()).select_from(JobEvent).where(JobEvent.job_id == job_id))
        or 0
    )
    rows = session.scalars(
        select(JobEvent)
        .where(JobEvent.job_id == job_id)
        .order_by(JobEvent.id.desc())
        .limit(limit)
        .offset(offset)
    )
    return [
        EventRecord(
            e.id, name, e.run_id, e.at, e.from_state, e.to_state, e.cause, e.message, e.node_id
        )
        for e in rows
    ], total


def _event_record(e: JobEvent, name: str) -> EventRecord:
    return EventRecord(
        e.id, name, e.run_id, e.at, e.from_state, e.to_state, e.cause, e.message, e.node_id
    )


def page_events(
    session: Session, name: str, window: Window
) -> tuple[list[EventRecord], tuple[KeyPart, ...] | None]:
    """One page of the job's events by id (``-id``: newest first)."""
    return paging.read_job_page(session, name, JobEvent, JobEvent.id, window, _event_record)


def count_events(session: Session, name: str) -> int:
    return paging.count_job_rows(session, name, JobEvent)


_INSERT_AUDIT = insert(AuditEntry)


class AuditFields(TypedDict, total=False):
    """What an audit row says: who did what to what, the request's detail, the target before
    and after (JSON documents), the node that did it and the team the target belongs to."""

    actor: Required[str]
    action: Required[str]
    target_kind: Required[str]
    target_name: Required[str]
    detail: Mapping[str, Any] | None
    node_id: str
    team: str
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None


def add_audit(session: Session, **fields: Unpack[AuditFields]) -> None:
    """One audit row, in the caller's transaction (so it commits, or not, with the change).

    Inserted at once on the session's connection (an audit row refers to nothing by key, so it
    need not wait for the ORM's flush; a statement built once, no ORM object)."""
    add_audits(session, [audit_values(**fields)])


def audit_values(**fields: Unpack[AuditFields]) -> dict[str, Any]:
    """An audit row, as :func:`add_audits` inserts it."""
    detail, before, after = fields.get("detail"), fields.get("before"), fields.get("after")
    return {
        "actor": fields["actor"],
        "action": fields["action"],
        "target_kind": fields["target_kind"],
        "target_name": fields["target_name"],
        "detail": dict(detail or {}),
        "node_id": fields.get("node_id", ""),
        "team": fields.get("team", ""),
        "before": None if before is None else dict(before),
        "after": None if after is None else dict(after),
    }


def add_audits(session: Session, rows: list[dict[str, Any]]) -> None:
    """Audit rows (of :func:`audit_values`) in one statement, in the caller's transaction."""
    if rows:
        session.connection().execute(_INSERT_AUDIT, rows[0] if len(rows) == 1 else rows)


def list_audit(
    session: Session,
    *,
    limit: int = 100,
    offset: int = 0,
    before_id: int | None = None,
    actor: str | None = None,
    action: str | None = None,
    target_kind: str | None = None,
    target_name: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    teams: frozenset[str] | None = None,
) -> list[AuditRecord]:
    """Newest first. ``before_id`` is the cursor (entries older than that id); ``teams`` keeps
    only entries of those teams (None: every entry)."""
    query = select(AuditEntry)
    if before_id is not None:
        query = query.where(AuditEntry.id < before_id)
    if actor is not None:
        query = query.where(AuditEntry.actor == actor)
    if action is not None:
        query = query.where(AuditEntry.action == action)
    if target_kind is not None:
        query = query.where(AuditEntry.target_kind == target_kind)
    if target_name is not None:
        query = query.where(AuditEntry.target_name == target_name)
    if since is not None:
        query = query.where(AuditEntry.at >= since)
    if until is not None:
        query = query.where(AuditEntry.at < until)
    if teams is not None:
        query = query.where(AuditEntry.team.in_(sorted(teams)))
    rows = session.scalars(query.order_by(AuditEntry.id.desc()).limit(limit).offset(offset))
    return [
        AuditRecord(
            a.id,
            a.at,
            a.actor,
            a.action,
            a.target_kind,
            a.target_name,
            dict(a.detail),
            a.node_id,
            a.team,
            None if a.before is None else dict(a.before),
            None if a.after is None else dict(a.after),
        )
        for a in rows
    ]
