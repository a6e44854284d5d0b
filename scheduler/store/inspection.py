"""Store-wide figures for tests and benches."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from scheduler.store.models import AuditEntry, Cluster, Group, Job, JobEvent, Run


def table_counts(session: Session) -> dict[str, int]:
    """Row counts of the main tables (used by tests to prove bad input changed nothing)."""
    return {
        model.__tablename__: session.scalar(select(func.count()).select_from(model)) or 0
        for model in (Cluster, Group, Job, Run, JobEvent, AuditEntry)
    }
