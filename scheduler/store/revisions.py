"""Job revisions in SQL: every spec change of a job is kept (``scheduler.decisions.revisions``).

Each function takes a session; the caller owns the transaction (a revision is written in the
spec change's own transaction, so the history never misses or invents one).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from scheduler.core.clock import utcnow
from scheduler.core.errors import NotFound
from scheduler.core.paging import KeyPart, Window
from scheduler.core.records import RevisionRecord
from scheduler.store import paging
from scheduler.store.models import JobRevision


def _record(row: JobRevision, job_name: str) -> RevisionRecord:
    return RevisionRecord(
        job_name=job_name,
        revision=row.revision,
        spec=dict(row.spec or {}),
        cause=row.cause,
        message=row.message,
        rollback_of=row.rollback_of,
        created_at=row.created_at,
    )


_INSERT_REVISION = insert(JobRevision)


def add_revision(session: Session, values: dict[str, Any]) -> None:
    """A revision row (of :func:`revision_values`) through the ORM, flushed: the caller's job
    is an ORM object whose changes go first."""
    session.add(JobRevision(**values))
    session.flush()


def revision_values(
    job_id: int,
    revision: int,
    spec: dict[str, Any],
    *,
    cause: str,
    message: str = "",
    rollback_of: int | None = None,
) -> dict[str, Any]:
    """A revision's row, as :func:`add_revision` and :func:`add_revisions` insert it."""
    return {
        "job_id": job_id,
        "revision": revision,
        "spec": spec,
        "cause": cause[:300],
        "message": message,
        "rollback_of": rollback_of,
        "created_at": utcnow(),
    }


def add_revisions(session: Session, rows: list[dict[str, Any]]) -> None:
    """Revision rows (of :func:`revision_values`) in one statement, at once on the session's
    connection (a batch of creations)."""
    if rows:
        session.connection().execute(_INSERT_REVISION, rows[0] if len(rows) == 1 else rows)


def get_revision(session: Session, name: str, revision: int) -> RevisionRecord:
    job_id = paging.job_id_of(session, name)
    return revision_of(session, job_id, name, revision)


def revision_of(session: Session, job_id: int, name: str, revision: int) -> RevisionRecord:
    row = session.scalars(
        select(JobRevision).where(JobRevision.job_id == job_id, JobRevision.revision == revision)
    ).first()
    if row is None:
        raise NotFound(f"job {name!r} has no revision {revision}")
    return _record(row, name)


def page_revisions(
    session: Session, name: str, window: Window
) -> tuple[list[RevisionRecord], tuple[KeyPart, ...] | None]:
    """One page of the job's revisions by number (newest first: ``-revision``, the default)."""
    return paging.read_job_page(
        session, name, JobRevision, JobRevision.revision, window, _record
    )


def count_revisions(session: Session, name: str) -> int:
    job_id = paging.job_id_of(session, name)
    return paging.count(session, select(JobRevision.id).where(JobRevision.job_id == job_id))
