"""The API's hot reads as prebuilt Core statements: the same records, a fraction of the cost.

``GET /v1/jobs/{name}``, a page of ``GET /v1/jobs`` and every authenticated request's token
check run these. An ORM query builds its statement, runs the ORM's execution path and makes an
ORM object per row (~100 µs for one row, most of it Python); a statement built once at import,
run on the session's connection with its parameters, makes plain rows (~20 µs). The rows carry
the mapped classes' column names, so ``scheduler.store.mapping`` turns them into the same
records as the ORM objects.

One statement where one can do: a statement costs far more in SQLAlchemy and the driver (and,
under load, in the hand-overs of the GIL around it) than the database spends on a join by
primary key. A job is read with its current run, that run's progress, its queue row, its
replica and its group joined (:func:`job_view`), a page of jobs with their runs, progress and
queue rows (:func:`page_job_rows`).

Each function takes a session or a plain connection (``Store.connection()``: cheaper still).
These statements skip the ORM's autoflush: call them in a session whose ORM objects have no
pending changes (a read's own session), never in the middle of a write.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Connection, Dialect, FromClause, Row, bindparam, select
from sqlalchemy.orm import Session

from scheduler.core.paging import KeyPart, Window
from scheduler.core.records import ClusterRecord, GroupRecord, JobRecord
from scheduler.decisions.gate import QueueRow
from scheduler.decisions.replication import ReplicaRecord
from scheduler.store.mapping import cluster_record, group_record, job_record
from scheduler.store.models import (
    CheckpointReplica,
    Cluster,
    Group,
    Job,
    QueueEntry,
    Run,
    RunProgress,
)
from scheduler.store.rowcodec import RowCodec, Statements

_JOBS = Job.__table__
_RUNS = Run.__table__
_PROGRESS = RunProgress.__table__
_QUEUE = QueueEntry.__table__
_REPLICAS = CheckpointReplica.__table__
_GROUPS = Group.__table__

TEAM_OF_JOB = select(_JOBS.c.team).where(_JOBS.c.name == bindparam("name"))
RUN_BY_ID = select(*_RUNS.c).where(_RUNS.c.id == bindparam("id"))
RUNS_BY_IDS = select(*_RUNS.c).where(_RUNS.c.id.in_(bindparam("ids", expanding=True)))
PROGRESS_BY_RUN_IDS = select(*_PROGRESS.c).where(
    _PROGRESS.c.run_id.in_(bindparam("ids", expanding=True))
)
ALL_CLUSTERS = select(*Cluster.__table__.c).order_by(Cluster.__table__.c.name)


class _Joined:
    """Tables' columns in one select list (all but the first labelled ``<prefix>__<column>``),
    and each table's columns back out of a result row."""

    def __init__(self, first: FromClause, **others: FromClause) -> None:
        self.columns: list[Any] = []
        #: per table: where its columns start and end, their names, and where its primary key
        #: is (None there: the outer join found no row)
        self._parts: list[tuple[int, int, list[str], int]] = []
        for prefix, table in (("", first), *others.items()):
            names = [c.name for c in table.c]
            start = len(self.columns)
            key = start + names.index(next(iter(table.primary_key)).name)
            self._parts.append((start, start + len(names), names, key))
            self.columns += [c.label(f"{prefix}__{c.name}") if prefix else c for c in table.c]

    def index(self, part: int, column: str) -> int:
        """Where column ``column`` of the ``part``-th table is in the select list."""
        start, _end, names, _key = self._parts[part]
        return start + names.index(column)

    def key_index(self, part: int) -> int:
        """Where the ``part``-th table's primary key is (None there: no row of it)."""
        return self._parts[part][3]

    def split(self, row: Row[Any] | tuple[Any, ...]) -> list[SimpleNamespace | None]:
        """Each table's columns of ``row`` as plain attributes (see :func:`_plain`), None for a
        table the join found no row of."""
        values = tuple(row)
        return [
            None
            if values[key] is None
            else SimpleNamespace(**dict(zip(names, values[start:end], strict=True)))
            for start, end, names, key in self._parts
        ]


#: a job with its current run, the run's progress and its queue row: a page's rows
_JOB_ROWS = _Joined(_JOBS, run=_RUNS, progress=_PROGRESS, queue=_QUEUE)
_JOBS_JOINED = (
    _JOBS.outerjoin(_RUNS, _RUNS.c.id == _JOBS.c.current_run_id)
    .outerjoin(_PROGRESS, _PROGRESS.c.run_id == _RUNS.c.id)
    .outerjoin(_QUEUE, _QUEUE.c.job_id == _JOBS.c.id)
)
#: ... and its replica and group: ``GET /v1/jobs/{name}``
_VIEW_ROWS = _Joined(
    _JOBS, run=_RUNS, progress=_PROGRESS, queue=_QUEUE, replica=_REPLICAS, group=_GROUPS
)
_VIEW_FROM = _JOBS_JOINED.outerjoin(_REPLICAS, _REPLICAS.c.job_id == _JOBS.c.id).outerjoin(
    _GROUPS, _GROUPS.c.name == _JOBS.c.group_name
)
#: ``GET /v1/jobs/{name}``'s row, read raw (``scheduler/store/rowcodec.py``)
_VIEW_CODEC = RowCodec(_VIEW_ROWS.columns)
_JOB_VIEW = Statements(
    lambda columns: (
        select(*columns).select_from(_VIEW_FROM).where(_JOBS.c.name == bindparam("name"))
    ),
    _VIEW_CODEC,
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


@dataclass(frozen=True)
class JobView:
    """A job as ``GET /v1/jobs/{name}`` shows it: its record (with its current run and that
    run's progress, as ``jobs.get_job`` answers it), its place in the submission queue, its
    checkpoint replica and its group (None when the catalog has lost it)."""

    job: JobRecord
    queue: QueueRow | None
    replica: ReplicaRecord | None
    group: GroupRecord | None


def _queue_row(row: Any) -> QueueRow:
    return QueueRow(row.position, row.kind, row.reason, row.since)


def _job_of(job: Any, run: Any, progress: Any) -> JobRecord:
    from scheduler.store.progress import progress_record

    record = job_record(job, run)
    return replace(record, progress=progress_record(progress)) if progress is not None else record


#: where a view row holds what is read of it before (or instead of) a record
_TEAM = _VIEW_ROWS.index(0, "team")
_SPEC_VERSION = _VIEW_ROWS.index(0, "spec_version")
_REPLICA = _VIEW_ROWS.key_index(4)
_GROUP = _VIEW_ROWS.key_index(5)
_FAILOVER_CLUSTER = _VIEW_ROWS.index(5, "failover_cluster")


class ViewRow:
    """A job's ``GET`` row read raw (``scheduler/store/rowcodec.py``): its team and spec version
    read off it, its :class:`JobView` made when asked for (once)."""

    def __init__(self, name: str, raw: Hashable, dialect: Dialect) -> None:
        self.name, self.raw, self.dialect = name, raw, dialect
        self._plain = _VIEW_CODEC.plain(dialect, raw)
        self._view: JobView | None = None

    @property
    def team(self) -> str:
        return str(self._plain[_TEAM])

    @property
    def spec_version(self) -> int:
        return int(self._plain[_SPEC_VERSION])

    @property
    def self_contained(self) -> bool:
        """Everything the job's ``GET`` shows is in this row (and the time): it has no replica
        (whose lag moves with time) and its group exists with no failover cluster (whose
        replica target would come from the clusters)."""
        plain = self._plain
        return (
            plain[_REPLICA] is None
            and plain[_GROUP] is not None
            and plain[_FAILOVER_CLUSTER] is None
        )

    def view(self) -> JobView:
        if self._view is None:
            from scheduler.store.replicas import _record

            typed = _VIEW_CODEC.typed(self.dialect, self.raw)
            job, run, progress, queue, replica, group = _VIEW_ROWS.split(typed)
            self._view = JobView(
                _job_of(job, run, progress),
                _queue_row(queue) if queue is not None else None,
                _record(replica, self.name) if replica is not None else None,  # type: ignore[arg-type]
                group_record(group) if group is not None else None,  # type: ignore[arg-type]
            )
        return self._view


def job_view_row(session: Reader, name: str) -> ViewRow | None:
    """The row of the job named ``name`` with everything its ``GET`` shows (one statement),
    None when there is no such job."""
    connection = connection_of(session)
    dialect = connection.dialect
    rows = connection.execute(_JOB_VIEW.of(dialect), {"name": name}).all()
    return ViewRow(name, _VIEW_CODEC.raw(dialect, rows[0]), dialect) if rows else None


def job_view(session: Reader, name: str) -> JobView | None:
    """The job named ``name`` with everything its ``GET`` shows, None when there is none."""
    row = job_view_row(session, name)
    return row.view() if row is not None else None


def _plain(row: Row[Any]) -> SimpleNamespace:
    """The row's columns as plain attributes: a record reads each of ~35 of them, and an
    attribute of a namespace is several times cheaper to read than one of a row."""
    return SimpleNamespace(**row._asdict())


def with_runs(session: Reader, rows: Sequence[Row[Any]]) -> list[JobRecord]:
    """Records of these job rows with their current runs and the runs' progress (one query
    each for all of them: the ledger's reads, whose rows come from statements of their own)."""
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
    from scheduler.store.progress import attach, progress_record

    known = {
        p.run_id: progress_record(p)  # type: ignore[arg-type]
        for p in _rows(session, PROGRESS_BY_RUN_IDS, {"ids": sorted(runs)})
    }
    return attach(records, known)


def clusters(session: Reader) -> list[ClusterRecord]:
    return [cluster_record(r) for r in _rows(session, ALL_CLUSTERS, {})]  # type: ignore[arg-type]


#: a job listing's sort keys as Core columns (``jobs.JOB_SORTS`` names the ORM attributes)
JOB_SORT_COLUMNS: dict[str, tuple[Any, ...]] = {
    "name": (_JOBS.c.name,),
    "state": (_JOBS.c.state, _JOBS.c.name),
    "updated_at": (_JOBS.c.updated_at, _JOBS.c.name),
}


#: a page's row as read raw (``scheduler/store/rowcodec.py``): hashable, equal for equal stored
#: rows (the API memoizes its documents on it)
RawJobRow = Hashable

#: a page's rows, read raw
_PAGE_CODEC = RowCodec(_JOB_ROWS.columns)


@dataclass(frozen=True)
class JobRows:
    """A page of jobs as raw rows (:data:`RawJobRow`), and the records they stand for."""

    rows: list[RawJobRow]
    #: the key after which the next page starts (None: the last page)
    next_key: tuple[KeyPart, ...] | None
    dialect: Dialect

    def record(self, raw: RawJobRow) -> tuple[JobRecord, QueueRow | None]:
        """The job of ``raw`` (with its current run and that run's progress) and its queue
        row: what ``jobs.page_jobs`` and ``quotas.queue_of`` answer for it."""
        job, run, progress, queue = _JOB_ROWS.split(_PAGE_CODEC.typed(self.dialect, raw))
        return _job_of(job, run, progress), _queue_row(queue) if queue is not None else None


def page_job_rows(session: Reader, selector: Any, window: Window) -> JobRows:
    """One page of the jobs ``selector`` keeps (``jobs.page_jobs``) with their current runs, the
    runs' progress and the jobs' queue rows, as raw rows: a record is made of a row only when
    someone needs one (the API's documents are memoized on the raw rows).

    One statement: the filters, order, cursor and limit over the joined rows, each row's columns
    packed (``RowCodec.select_list_text``). Built anew for every page, it costs SQLAlchemy a
    cache key of a few columns and the array's text; the driver a row per job and no more."""
    from scheduler.store import paging

    connection = connection_of(session)
    dialect = connection.dialect
    columns = JOB_SORT_COLUMNS[window.sort.field]
    keys_end = 1 + len(columns)
    rows, next_key = paging.read_page(
        session,
        select(_JOBS.c.id, *columns, *_PAGE_CODEC.select_list_text(dialect))
        .select_from(_JOBS_JOINED)
        .where(*selector.conditions()),
        columns,
        window,
        lambda row: tuple(row)[1:keys_end],
        scalars=False,
        connection=connection,
    )
    return JobRows([_PAGE_CODEC.raw(dialect, row[keys_end:]) for row in rows], next_key, dialect)
