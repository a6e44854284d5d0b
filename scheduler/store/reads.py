"""The API's hot reads as prebuilt Core statements: the same records, a fraction of the cost.

``GET /v1/jobs/{name}``, a page of ``GET /v1/jobs`` and every authenticated request's token
check run these. An ORM query builds its statement, runs the ORM's execution path and makes an
ORM object per row (~100 µs for one row, most of it Python); a statement built once at import,
run on the session's connection with its parameters, makes plain rows (~20 µs). The rows carry
the mapped classes' column names, so ``scheduler.store.mapping`` turns them into the same
records as the ORM objects.

Each function takes a session or a plain connection (``Store.connection()``: cheaper still).
These statements skip the ORM's autoflush: call them in a session whose ORM objects have no
pending changes (a read's own session), never in the middle of a write.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Connection, Row, bindparam, select
from sqlalchemy.orm import Session

from scheduler.paging import KeyPart, Window
from scheduler.records import ClusterRecord, GroupRecord, JobRecord
from scheduler.replicas import ReplicaRecord
from scheduler.store.mapping import cluster_record, group_record, job_record
from scheduler.store.models import CheckpointReplica, Cluster, Group, Job, QueueEntry, Run
from scheduler.store.models_observe import RunProgress

_JOBS = Job.__table__
_RUNS = Run.__table__

TEAM_OF_JOB = select(_JOBS.c.team).where(_JOBS.c.name == bindparam("name"))
JOB_BY_NAME = select(*_JOBS.c).where(_JOBS.c.name == bindparam("name"))
RUN_BY_ID = select(*_RUNS.c).where(_RUNS.c.id == bindparam("id"))
RUNS_BY_IDS = select(*_RUNS.c).where(_RUNS.c.id.in_(bindparam("ids", expanding=True)))
PROGRESS_BY_RUN_IDS = select(*RunProgress.__table__.c).where(
    RunProgress.__table__.c.run_id.in_(bindparam("ids", expanding=True))
)
REPLICA_BY_JOB_ID = select(*CheckpointReplica.__table__.c).where(
    CheckpointReplica.__table__.c.job_id == bindparam("job_id")
)
GROUP_BY_NAME = select(*Group.__table__.c).where(Group.__table__.c.name == bindparam("name"))
ALL_CLUSTERS = select(*Cluster.__table__.c).order_by(Cluster.__table__.c.name)
QUEUE_BY_JOB_IDS = select(*QueueEntry.__table__.c).where(
    QueueEntry.__table__.c.job_id.in_(bindparam("ids", expanding=True))
)


#: what the reads take: a session, or a connection of ``Store.connection()``
Reader = Session | Connection


def connection_of(reader: Reader) -> Connection:
    return reader.connection() if isinstance(reader, Session) else reader


def _rows(reader: Reader, statement: Any, params: dict[str, Any]) -> Sequence[Row[Any]]:
    return connection_of(reader).execute(statement, params).all()


def team_of_job(session: Reader, name: str) -> str | None:
    """The team of the job named ``name``, None when there is no such job."""
    rows = _rows(session, TEAM_OF_JOB, {"name": name})
    return str(rows[0][0]) if rows else None


def job_row(session: Reader, name: str) -> Row[Any] | None:
    rows = _rows(session, JOB_BY_NAME, {"name": name})
    return rows[0] if rows else None


def job(session: Reader, name: str) -> JobRecord | None:
    """The job named ``name`` with its current run and that run's progress (what
    ``jobs.get_job`` answers), None when there is no such job."""
    row = job_row(session, name)
    if row is None:
        return None
    return with_runs(session, [row])[0]


def _plain(row: Row[Any]) -> SimpleNamespace:
    """The row's columns as plain attributes: a record reads each of ~35 of them, and an
    attribute of a namespace is several times cheaper to read than one of a row."""
    return SimpleNamespace(**row._asdict())


def with_runs(session: Reader, rows: Sequence[Row[Any]]) -> list[JobRecord]:
    """Records of these job rows with their current runs and the runs' progress (one query
    each for all of them)."""
    run_ids = sorted({r.current_run_id for r in rows if r.current_run_id is not None})
    runs: dict[int, Row[Any]] = {}
    if len(run_ids) == 1:
        runs = {r.id: r for r in _rows(session, RUN_BY_ID, {"id": run_ids[0]})}
    elif run_ids:
        runs = {r.id: r for r in _rows(session, RUNS_BY_IDS, {"ids": run_ids})}
    records = [
        job_record(
            _plain(r),  # type: ignore[arg-type]
            _plain(runs[r.current_run_id]) if r.current_run_id in runs else None,  # type: ignore[arg-type]
        )
        for r in rows
    ]
    if not runs:
        return records
    from scheduler.store.progress import progress_record

    known = {
        p.run_id: progress_record(p)  # type: ignore[arg-type]
        for p in _rows(session, PROGRESS_BY_RUN_IDS, {"ids": sorted(runs)})
    }
    if not known:
        return records
    return [
        replace(j, progress=known[j.current_run_id])
        if j.current_run_id is not None and j.current_run_id in known
        else j
        for j in records
    ]


def replica_of(session: Reader, job: JobRecord) -> ReplicaRecord | None:
    from scheduler.store.replicas import _record

    rows = _rows(session, REPLICA_BY_JOB_ID, {"job_id": job.id})
    return _record(rows[0], job.name) if rows else None  # type: ignore[arg-type]


def group(session: Reader, name: str) -> GroupRecord | None:
    rows = _rows(session, GROUP_BY_NAME, {"name": name})
    return group_record(rows[0]) if rows else None  # type: ignore[arg-type]


def clusters(session: Reader) -> list[ClusterRecord]:
    return [cluster_record(r) for r in _rows(session, ALL_CLUSTERS, {})]  # type: ignore[arg-type]


def queue_of(session: Reader, job_ids: Iterable[int]) -> dict[int, Any]:
    """``quotas.queue_of`` (the queue rows of the jobs the gate holds back), as Core."""
    from scheduler.store.quotas import QueueRow

    ids = sorted(set(job_ids))
    found: dict[int, QueueRow] = {}
    for start in range(0, len(ids), 500):
        for e in _rows(session, QUEUE_BY_JOB_IDS, {"ids": ids[start : start + 500]}):
            found[e.job_id] = QueueRow(e.position, e.kind, e.reason, e.since)
    return found


#: a job listing's sort keys as Core columns (``jobs.JOB_SORTS`` names the ORM attributes)
JOB_SORT_COLUMNS: dict[str, tuple[Any, ...]] = {
    "name": (_JOBS.c.name,),
    "state": (_JOBS.c.state, _JOBS.c.name),
    "updated_at": (_JOBS.c.updated_at, _JOBS.c.name),
}


def page_jobs(
    session: Reader, selector: Any, window: Window
) -> tuple[list[JobRecord], tuple[KeyPart, ...] | None]:
    """``jobs.page_jobs`` (one page of the jobs ``selector`` keeps, with their current runs and
    the next page's key) from plain rows."""
    from scheduler.store import paging

    columns = JOB_SORT_COLUMNS[window.sort.field]
    query = select(*_JOBS.c).where(*selector.conditions())
    fields = [c.name for c in columns]
    rows, next_key = paging.read_page(
        session,
        query,
        columns,
        window,
        lambda row: tuple(getattr(row, f) for f in fields),
        scalars=False,
        connection=connection_of(session),
    )
    return with_runs(session, rows), next_key
