"""Checkpoint replicas in the store: one row per replicated job, its figures and its lease.

The lease says who may write into the replica's location right now: the replicator of the
job's owner for one round (its node id), or a failover that took the replica over
(``failover:<id>``, state PROMOTED, see :func:`scheduler.loops.replication.make_available`). It is
taken by one conditional write -- free, already ours, expired, or a PROMOTED replica at another
location than the one asked for -- and given back by the write that records what was done.
Each function takes a session; the caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Row, Select, and_, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from scheduler.core.clock import utcnow
from scheduler.core.errors import NotFound, StaleWrite
from scheduler.core.paging import KeyPart, Window
from scheduler.core.records import JobRecord
from scheduler.core.states import Priority
from scheduler.decisions.checkpoints import Lag
from scheduler.decisions.replication import (
    ReplicaRecord,
    ReplicaState,
    ReplicaTarget,
    observed_state,
    replica_transition,
)
from scheduler.store import journal, paging
from scheduler.store.jobs import with_current_runs
from scheduler.store.mapping import from_row
from scheduler.store.models import CheckpointReplica, Job

#: the longest error text kept
MAX_ERROR_LENGTH = 2000
#: the cause of the job events about its replica
CAUSE = "replication"


def _record(row: CheckpointReplica, job_name: str) -> ReplicaRecord:
    return from_row(ReplicaRecord, row, job_name=job_name, state=ReplicaState(row.state))


def _job_id(session: Session, job_name: str) -> int:
    job_id = session.scalar(select(Job.id).where(Job.name == job_name))
    if job_id is None:
        raise NotFound(f"no job named {job_name!r}", job=job_name)
    return int(job_id)


# --------------------------------------------------------------------------- reads


def replica_of(session: Session, job_name: str) -> ReplicaRecord | None:
    """The job's replica (None: it has none yet); NotFound if there is no such job."""
    job_id = _job_id(session, job_name)
    row = session.get(CheckpointReplica, job_id)
    return _record(row, job_name) if row is not None else None


def replicas_of(session: Session, jobs: Iterable[JobRecord]) -> dict[str, ReplicaRecord]:
    """job name -> its replica, for those of ``jobs`` that have one (one query)."""
    names = {j.id: j.name for j in jobs}
    if not names:
        return {}
    rows = session.scalars(
        select(CheckpointReplica).where(CheckpointReplica.job_id.in_(sorted(names)))
    )
    return {names[r.job_id]: _record(r, names[r.job_id]) for r in rows}


def page_replicas(
    session: Session,
    window: Window,
    *,
    cluster: str | None = None,
    state: ReplicaState | None = None,
    team: str | None = None,
    teams: frozenset[str] | None = None,
) -> tuple[list[tuple[JobRecord, ReplicaRecord]], tuple[KeyPart, ...] | None]:
    """One page of the replicas with their jobs, by job name; and the key the next page starts
    after. ``cluster``: replicas from or to that cluster; ``teams``: only jobs of these teams (a
    caller's visibility; None = every team)."""
    query = _joined(CheckpointReplica, Job).where(*_replica_conditions(cluster, state, team, teams))
    rows, next_key = paging.read_page(
        session, query, (Job.name,), window, lambda row: (row[1].name,), scalars=False
    )
    return _with_jobs(session, rows), next_key


def count_replicas(
    session: Session,
    *,
    cluster: str | None = None,
    state: ReplicaState | None = None,
    team: str | None = None,
    teams: frozenset[str] | None = None,
) -> int:
    query = _joined(CheckpointReplica.job_id).where(
        *_replica_conditions(cluster, state, team, teams)
    )
    return paging.count(session, query)


def _joined(*columns: Any) -> Select[Any]:
    """``SELECT columns`` over the replicas joined to their jobs."""
    return (
        select(*columns)
        .select_from(CheckpointReplica)
        .join(Job, Job.id == CheckpointReplica.job_id)
    )


def _with_jobs(
    session: Session, rows: Sequence[Row[CheckpointReplica, Job]]
) -> list[tuple[JobRecord, ReplicaRecord]]:
    """(job, replica) records of (replica, job) rows, the jobs with their current runs."""
    records = with_current_runs(session, [job for _, job in rows])
    return [(job, _record(row, job.name)) for (row, _), job in zip(rows, records, strict=True)]


def _replica_conditions(
    cluster: str | None,
    state: ReplicaState | None,
    team: str | None,
    teams: frozenset[str] | None,
) -> list[ColumnElement[bool]]:
    conditions: list[ColumnElement[bool]] = []
    if cluster is not None:
        conditions.append(
            or_(
                CheckpointReplica.source_cluster == cluster,
                CheckpointReplica.target_cluster == cluster,
            )
        )
    if state is not None:
        conditions.append(CheckpointReplica.state == state.value)
    if team is not None:
        conditions.append(Job.team == team)
    if teams is not None:
        conditions.append(Job.team.in_(sorted(teams)))
    return conditions


def candidates(session: Session, group: str, *, index: int, size: int) -> list[JobRecord]:
    """The jobs of ``group`` the pool slot ``index`` of ``size`` owns that are replicated:
    ``replicate`` set, or unset and high priority
    (``scheduler.decisions.replication.replicates``)."""
    jobs = list(
        session.scalars(
            select(Job)
            .where(
                Job.group_name == group,
                func.crc32(Job.name) % size == index,
                or_(
                    Job.replicate.is_(True),
                    and_(Job.replicate.is_(None), Job.priority == Priority.HIGH.value),
                ),
            )
            .order_by(Job.name)
        )
    )
    return with_current_runs(session, jobs)


# --------------------------------------------------------------------------- writes


def _free_for(holder: str, location: str, now: datetime) -> ColumnElement[bool]:
    return or_(
        CheckpointReplica.lease_holder.is_(None),
        CheckpointReplica.lease_holder == holder,
        CheckpointReplica.lease_until < now,
        and_(
            CheckpointReplica.state == ReplicaState.PROMOTED.value,
            CheckpointReplica.location != location,
        ),
    )


def acquire(
    session: Session,
    job: JobRecord,
    target: ReplicaTarget,
    *,
    holder: str,
    until: datetime,
    now: datetime | None = None,
    promote: bool = False,
) -> bool:
    """Take the lease on ``job``'s replica at ``target`` for ``holder`` until ``until``; False
    when someone else holds it (StaleWrite when another node created the record at the same
    moment: the transaction is over). A record at another target starts over (PENDING, no
    figures). ``promote``: a failover takes the replica over (state PROMOTED)."""
    now = now or utcnow()
    row = session.get(CheckpointReplica, job.id)
    if row is None:
        state = ReplicaState.PROMOTED if promote else ReplicaState.PENDING
        session.add(
            CheckpointReplica(
                job_id=job.id,
                state=state.value,
                source_cluster=target.source_cluster,
                source_location=target.source_location,
                target_cluster=target.target_cluster,
                location=target.location,
                lag_batches=0,
                error="",
                files_copied=0,
                bytes_copied=0,
                last_copy_files=0,
                last_copy_bytes=0,
                last_copy_seconds=0.0,
                node_id="",
                lease_holder=holder,
                lease_until=until,
                created_at=now,
                updated_at=now,
            )
        )
        try:
            session.flush()
        except IntegrityError as exc:  # another node created it first (the transaction ends)
            raise StaleWrite(f"job {job.name!r}: its replica record was created meanwhile") from exc
        return True
    values: dict[str, object] = {
        "lease_holder": holder,
        "lease_until": until,
        "source_cluster": target.source_cluster,
        "source_location": target.source_location,
        "updated_at": now,
    }
    old = ReplicaState(row.state)
    moved = (row.target_cluster, row.location) != (target.target_cluster, target.location)
    if moved:
        values |= {
            "target_cluster": target.target_cluster,
            "location": target.location,
            "replica_batch": None,
            "replica_batch_at": None,
            "lag_batches": 0,
            "oldest_missing_at": None,
            "observed_at": None,
        }
    if promote:
        values["state"] = replica_transition(old, ReplicaState.PROMOTED).value
    elif old is ReplicaState.PROMOTED:
        values["state"] = replica_transition(old, ReplicaState.PENDING).value
    elif moved:
        values["state"] = ReplicaState.PENDING.value
    result = session.execute(
        update(CheckpointReplica)
        .where(
            CheckpointReplica.job_id == job.id,
            CheckpointReplica.state == row.state,
            _free_for(holder, target.location, now),
        )
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    session.expire(row)
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]


def record_look(
    session: Session,
    job: JobRecord,
    *,
    holder: str,
    lag: Lag | None,
    error: str = "",
    node_id: str,
    copied: tuple[int, int, float] | None = None,
    keep_lease: bool = False,
    state: ReplicaState | None = None,
    now: datetime | None = None,
) -> bool:
    """Record what a look at source and replica found (``lag``; None with ``error``: the look
    failed, the last figures stay) and, with ``copied`` (files, bytes, seconds), what was
    copied. Gives the lease back unless ``keep_lease``. Only for the lease's holder, or anyone
    when nobody holds it; False when someone else does."""
    now = now or utcnow()
    row = session.get(CheckpointReplica, job.id)
    if row is None:
        return False
    old = ReplicaState(row.state)
    stored = row.state
    values: dict[str, object] = {"node_id": node_id, "updated_at": now}
    if lag is not None:
        values |= {
            "source_batch": lag.source_batch,
            "source_batch_at": lag.source_batch_at,
            "replica_batch": lag.replica_batch,
            "replica_batch_at": lag.replica_batch_at,
            "lag_batches": lag.batches,
            "oldest_missing_at": lag.oldest_missing_at,
            "observed_at": now,
        }
    new = state or (
        ReplicaState.ERROR
        if error
        else observed_state(lag.replica_batch, lag.batches)
        if lag is not None
        else old
    )
    if old is ReplicaState.PROMOTED and new is not ReplicaState.PROMOTED:
        replica_transition(old, ReplicaState.PENDING)  # the hold is over: replicated again
        old = ReplicaState.PENDING
    values["state"] = replica_transition(old, new).value
    values["error"] = error[:MAX_ERROR_LENGTH]
    if error and not row.error:
        values["error_since"] = now
    elif not error:
        values["error_since"] = None
    if copied is not None:
        files, size, seconds = copied
        values |= {
            "files_copied": CheckpointReplica.files_copied + files,
            "bytes_copied": CheckpointReplica.bytes_copied + size,
            "last_copy_at": now,
            "last_copy_files": files,
            "last_copy_bytes": size,
            "last_copy_seconds": round(seconds, 3),
        }
    if not keep_lease:
        values |= {"lease_holder": None, "lease_until": None}
    result = session.execute(
        update(CheckpointReplica)
        .where(
            CheckpointReplica.job_id == job.id,
            CheckpointReplica.state == stored,
            or_(
                CheckpointReplica.lease_holder.is_(None),
                CheckpointReplica.lease_holder == holder,
                CheckpointReplica.lease_until < now,
            ),
        )
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    written = bool(result.rowcount == 1)  # type: ignore[attr-defined]
    if written:
        message = _event_message(
            ReplicaState(stored), ReplicaState(str(values["state"])), row, lag, error
        )
        if message:
            journal.add_job_event(session, job, cause=CAUSE, message=message, node_id=node_id)
    session.expire(row)
    return written


def _event_message(
    old: ReplicaState,
    new: ReplicaState,
    row: CheckpointReplica,
    lag: Lag | None,
    error: str,
) -> str:
    """The job event a change of its replica's state makes (only the ones an operator cares
    about: the replica failing and recovering; ``make_available`` says what a failover did)."""
    where = f"checkpoint replica on {row.target_cluster} ({row.location})"
    batch = lag.replica_batch if lag is not None else row.replica_batch
    if new is ReplicaState.ERROR and old is not ReplicaState.ERROR:
        return f"{where} is not kept any more: {error} (it holds batch {batch})"
    if old is ReplicaState.ERROR and new is not ReplicaState.ERROR:
        return f"{where} is kept again: batch {batch}, state {new}"
    return ""


def release(session: Session, job_name: str, *, holder: str) -> bool:
    """Give back ``holder``'s lease on the job's replica (a PROMOTED replica stays PROMOTED
    until the replicator looks at it again). False when ``holder`` does not hold it."""
    job_id = _job_id(session, job_name)
    result = session.execute(
        update(CheckpointReplica)
        .where(CheckpointReplica.job_id == job_id, CheckpointReplica.lease_holder == holder)
        .values(lease_holder=None, lease_until=None, updated_at=utcnow())
        .execution_options(synchronize_session=False)
    )
    return bool(result.rowcount == 1)  # type: ignore[attr-defined]
