"""Incremental checkpoint replication, so a failed-over job resumes from its state even when the
source's storage is gone: copy what a checkpoint copy lacks, make a checkpoint available to a
failover, and the replicator's round over a node's jobs.

- :func:`sync` brings a copy of a checkpoint to the source's newest complete batch through
  :mod:`scheduler.storage.base`, following the pure plan of
  :func:`scheduler.decisions.checkpoints.plan_sync`: only files the copy lacks or that changed, a
  batch's offsets and commit after everything they need, each file written under a temporary name
  and renamed, the locations inside transformWithState metadata rewritten for the copy's place.
- :func:`make_available` is what a failover calls (the seam with the failover executor, which
  gets it as :class:`ReplicaCheckpoints`: ``scheduler.core.operations_ledger.Checkpoints``).
- :class:`Replicator` is one round of the replication loop a node runs for the jobs it owns
  (hosted by the node supervisor: ``scheduler.actors.replicator``).

Everything here blocks (file and database I/O): call it from a worker thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from scheduler.core import faults
from scheduler.core.clock import utcnow
from scheduler.core.errors import DroverError, InvalidInput, StaleWrite, StorageError
from scheduler.core.operations_ledger import Availability as Availability  # its word too
from scheduler.core.operations_ledger import CheckpointMove
from scheduler.core.ownership import Claim
from scheduler.core.records import ClusterRecord, GroupRecord, JobRecord
from scheduler.decisions import storage
from scheduler.decisions.checkpoints import (
    Files,
    Kind,
    Lag,
    classify,
    lag,
    last_complete_batch,
    plan_sync,
    relocatable,
    relocate,
)
from scheduler.decisions.replication import (
    ReplicaRecord,
    ReplicaState,
    ReplicaTarget,
    due,
    observed_state,
    replica_target,
)
from scheduler.storage.base import CheckpointStorage, reading
from scheduler.storage.schemes import storage_for
from scheduler.store import catalog as catalog_store
from scheduler.store import jobs as jobs_store
from scheduler.store import journal
from scheduler.store import replicas as replicas_store
from scheduler.store.db import Store

log = logging.getLogger("drover.replication")

#: the fault point hit after each state file of a batch the copy does not hold yet
#: (``DROVER_FAULTS=replica-mid-batch``): a copy killed right there
MID_BATCH_FAULT: Final = "replica-mid-batch"

#: a replica whose figures did not change is recorded again at least this often (seconds)
HEARTBEAT_SECONDS: Final = 60.0

#: where make_available found the checkpoint it made available
SOURCE: Final = "source"
REPLICA: Final = "replica"
FRESH_START: Final = "fresh start"


# --------------------------------------------------------------------------- sync


@dataclass(frozen=True)
class SyncResult:
    """What one :func:`sync` did."""

    #: the batch the copy was brought to (the source's newest complete batch when it started)
    wanted: int | None
    #: the copy's newest complete batch afterwards (``wanted`` when ``complete``)
    batch: int | None
    files: int
    bytes: int
    removed: int
    #: every step of the plan ran (False: stopped at the deadline or because the source moved)
    complete: bool
    seconds: float
    #: the source's files as listed when the sync started (for the lag)
    source_files: Files = field(repr=False, default_factory=dict)
    note: str = ""


def sync(
    source: str,
    target: str,
    *,
    batch: int | None = None,
    source_files: Files | None = None,
    target_files: Files | None = None,
    deadline: float | None = None,
    storage_of: Callable[[str], CheckpointStorage] = storage_for,
    clock: Callable[[], float] = time.monotonic,
    guard: Callable[[], object] | None = None,
) -> SyncResult:
    """Make the checkpoint at ``target`` the source's at ``batch`` (default: its newest complete
    batch; none: ``target`` is emptied). Stops before the next file once ``clock()`` passes
    ``deadline``; whenever it stops, ``target`` holds a complete batch (or none), never a part of
    one that Spark would read. Raises StorageError when a location cannot be read or written.
    ``guard`` is called before every file written or removed and raises to stop at once (a
    failover's executor whose claim ran out: a node frozen mid-copy and thawed must not touch
    a checkpoint that the job, moved on meanwhile, writes now)."""
    check = guard or (lambda: None)
    started = clock()
    src, dst = storage_of(source), storage_of(target)
    if source_files is None:
        source_files = src.list(source)
    if target_files is None:
        target_files = dst.list(target)
    plan = plan_sync(source_files, target_files, batch, preserves_mtime=dst.preserves_mtime)
    present = set(target_files)
    for path in plan.retract:
        check()
        dst.remove(target, path)
        present.discard(path)
    files = size = removed = 0
    note = ""
    complete = True
    for path in plan.copy:
        if deadline is not None and clock() >= deadline:
            complete, note = False, "stopped at the round's deadline"
            break
        check()
        try:
            size += _copy_file(
                src,
                source,
                dst,
                target,
                path,
                source_files[path].mtime_ns,
                deadline=deadline,
                clock=clock,
            )
        except _OutOfTime:
            complete, note = False, f"stopped at the round's deadline (in {path})"
            break
        except StorageError as exc:
            if not isinstance(exc.__cause__, FileNotFoundError):
                raise
            # Spark purged or replaced it after we listed: the next round sees the new state
            complete, note = False, f"the source changed while copying ({path} is gone)"
            break
        files += 1
        present.add(path)
        if classify(path).kind is Kind.STATE:
            faults.hit(MID_BATCH_FAULT)
    if complete:
        for path in plan.remove:
            check()
            dst.remove(target, path)
            present.discard(path)
            removed += 1
    return SyncResult(
        wanted=plan.batch,
        batch=last_complete_batch(present),
        files=files,
        bytes=size,
        removed=removed + len(plan.retract),
        complete=complete,
        seconds=clock() - started,
        source_files=source_files,
        note=note,
    )


class _OutOfTime(Exception):
    """A file copy passed the deadline (the partial write is thrown away)."""


def _copy_file(
    src: CheckpointStorage,
    source: str,
    dst: CheckpointStorage,
    target: str,
    path: str,
    mtime_ns: int,
    *,
    deadline: float | None,
    clock: Callable[[], float],
) -> int:
    with reading(src, source, path) as chunks:
        if relocatable(path):  # small JSON: rewrite the source's location into the target's
            data = relocate(b"".join(chunks), source, target)
            return dst.write(target, path, [data], mtime_ns=mtime_ns)
        return dst.write(target, path, _until(chunks, deadline, clock), mtime_ns=mtime_ns)


def _until(
    chunks: Iterator[bytes], deadline: float | None, clock: Callable[[], float]
) -> Iterator[bytes]:
    """``chunks``, stopping a big file's copy at the deadline (a round's lease must not run out
    while it still writes)."""
    for chunk in chunks:
        if deadline is not None and clock() >= deadline:
            raise _OutOfTime
        yield chunk


# --------------------------------------------------------------------------- make_available


def make_available(
    job: str,
    *,
    source: str | None,
    target: str,
    replica: str | None = None,
    target_root: str | None = None,
    store: Store | None = None,
    holder: str = "failover",
    hold_seconds: float = 3600.0,
    wait_seconds: float = 120.0,
    deadline_seconds: float | None = None,
    storage_of: Callable[[str], CheckpointStorage] = storage_for,
    known: tuple[JobRecord, Iterable[ClusterRecord]] | None = None,
    guard: Callable[[], object] | None = None,
) -> Availability:
    """Make ``job``'s checkpoint available at ``target`` (its checkpoint location on the target
    cluster, ``storage.checkpoint_location(target_cluster, job, clusters)``) and say from where.

    1. The source checkpoint (``source``, under the failed cluster's root; None: none known),
       when it can be read and holds a complete batch: an incremental sync of its newest
       complete batch (only what ``target`` lacks: usually little, as the replica is normally
       already there).
    2. Else the replica (``replica``; by default it *is* ``target``), else a checkpoint already
       at ``target``: its newest complete batch, anything past that removed (copied first
       when ``replica`` is elsewhere).
    3. Else a fresh start: ``target`` is emptied (the job starts without a checkpoint).

    ``target_root``: refuse a ``target`` that is not strictly inside it. ``store``: take the
    replica over first -- wait up to ``wait_seconds`` for a replicator round that is writing it
    to end (StaleWrite if it does not), keep the replicator away for ``hold_seconds`` (state
    PROMOTED; :func:`release` ends it sooner) and record the outcome on the job's replica.
    Idempotent: a second call (the executor's retry, another node resuming the failover, same
    ``holder``) finds the work done. Blocking; StorageError when ``target`` cannot be written.
    ``known``: the job and the clusters as the caller just read them (not read again).
    ``guard``: called before every write (each file, the replica's record) and raises to stop
    (see :func:`sync`).
    """
    started = time.monotonic()
    target = storage.normalise_location(target, "target checkpoint location")
    if source is not None:
        source = storage.normalise_location(source, "source checkpoint location")
    if replica is not None:
        replica = storage.normalise_location(replica, "replica location")
    if target_root is not None:
        root = storage.parse_location(target_root, "target storage root")
        if not storage.parse_location(target).strictly_within(root):
            raise InvalidInput(f"target {target} is not inside the target's storage root {root}")
    if target == source:
        raise InvalidInput(f"job {job!r}: the target checkpoint is the source itself ({source})")
    deadline = None if deadline_seconds is None else started + deadline_seconds
    record = None
    if store is not None:
        record = _promote(
            store, job, source or "", target, holder, hold_seconds, wait_seconds, known
        )
    result = _make_available(job, source, replica, target, deadline, storage_of, guard)
    result = Availability(**{**result.__dict__, "seconds": round(time.monotonic() - started, 3)})
    if store is not None and record is not None:
        if guard is not None:
            guard()
        _record_promoted(store, record, holder, result, hold_seconds)
    log.info(
        "job %s: checkpoint available at %s from %s (batch %s; %d files, %d bytes): %s",
        job,
        result.location,
        result.origin,
        result.batch,
        result.files_copied,
        result.bytes_copied,
        result.detail,
    )
    return result


def _make_available(
    job: str,
    source: str | None,
    replica: str | None,
    target: str,
    deadline: float | None,
    storage_of: Callable[[str], CheckpointStorage],
    guard: Callable[[], object] | None = None,
) -> Availability:
    why_not_source = ""
    try:
        source_files = storage_of(source).list(source) if source is not None else {}
    except StorageError as exc:
        why_not_source = f"the source checkpoint cannot be read ({exc.message})"
    else:
        batch = last_complete_batch(source_files)
        if batch is not None and source is not None:
            done = _finish(
                sync(
                    source,
                    target,
                    source_files=source_files,
                    deadline=deadline,
                    storage_of=storage_of,
                    guard=guard,
                ),
                job,
                "the source",
            )
            return Availability(
                target,
                done.batch,
                SOURCE,
                f"synced from the source checkpoint {source}: resumes after batch {done.batch}",
                done.files,
                done.bytes,
            )
        why_not_source = (
            "no source checkpoint is known"
            if source is None
            else f"the source checkpoint {source} holds no complete batch"
            if source_files
            else f"there is no source checkpoint at {source}"
        )
    for candidate in dict.fromkeys(c for c in (replica, target) if c is not None):
        try:
            files = storage_of(candidate).list(candidate)
        except StorageError as exc:
            why_not_source += f"; the replica {candidate} cannot be read ({exc.message})"
            continue
        batch = last_complete_batch(files)
        if batch is None:
            continue
        done = _finish(
            sync(
                candidate,
                target,
                batch=batch,
                source_files=files,
                target_files=files if candidate == target else None,
                deadline=deadline,
                storage_of=storage_of,
                guard=guard,
            ),
            job,
            "the replica",
        )
        where = "in place" if candidate == target else f"copied from {candidate}"
        return Availability(
            target,
            done.batch,
            REPLICA,
            f"{why_not_source}: the replica ({where}) resumes after batch {done.batch}",
            done.files,
            done.bytes,
        )
    # whatever is at the target is not a checkpoint Spark could resume: start clean
    _finish(
        sync(
            target,
            target,
            source_files={},
            deadline=deadline,
            storage_of=storage_of,
            guard=guard,
        ),
        job,
        "the target",
    )
    return Availability(
        target,
        None,
        FRESH_START,
        f"{why_not_source}, and no replica holds a complete batch: starts without a checkpoint",
    )


def _finish(result: SyncResult, job: str, origin: str) -> SyncResult:
    if not result.complete:
        raise StorageError(
            f"job {job!r}: making the checkpoint available from {origin} did not finish "
            f"({result.note or 'stopped'}; {result.files} files copied): try again"
        )
    return result


def _clusters_of(clusters: Iterable[ClusterRecord], *locations: str) -> list[ClusterRecord | None]:
    """The cluster whose storage root holds each location (None: none)."""
    known = list(clusters)
    found: list[ClusterRecord | None] = []
    for location in locations:
        parsed = storage.parse_location(location)
        found.append(
            next(
                (
                    c
                    for c in known
                    if parsed.within(storage.parse_location(c.storage_root, "storage_root"))
                ),
                None,
            )
        )
    return found


def _promote(
    store: Store,
    job_name: str,
    source: str,
    target: str,
    holder: str,
    hold_seconds: float,
    wait_seconds: float,
    known: tuple[JobRecord, Iterable[ClusterRecord]] | None = None,
) -> JobRecord:
    if known is None:
        with store.session() as session:
            known = (jobs_store.get_job(session, job_name), catalog_store.list_clusters(session))
    job, clusters = known
    source_cluster, target_cluster = _clusters_of(clusters, source or target, target)
    where = ReplicaTarget(
        source_cluster.name if source_cluster is not None else "",
        source,
        target_cluster.name if target_cluster is not None else "",
        target,
    )
    waited_until = time.monotonic() + wait_seconds
    while True:
        now = utcnow()
        with store.transaction() as session:
            if replicas_store.acquire(
                session,
                job,
                where,
                holder=holder,
                until=now + timedelta(seconds=hold_seconds),
                now=now,
                promote=True,
            ):
                return job
            current = replicas_store.replica_of(session, job_name)
        if time.monotonic() >= waited_until:
            holder_now = current.lease_holder if current is not None else None
            until = current.lease_until if current is not None else None
            raise StaleWrite(
                f"job {job_name!r}: its replica is being written by {holder_now} (until "
                f"{until}); try again"
            )
        time.sleep(0.5)


def _record_promoted(
    store: Store, job: JobRecord, holder: str, result: Availability, hold_seconds: float
) -> None:
    at_source = result.batch if result.origin == SOURCE else None
    figures = Lag(at_source, None, result.batch, None, 0, None)
    with store.transaction() as session:
        replicas_store.record_look(
            session,
            job,
            holder=holder,
            lag=figures,
            node_id=holder,
            copied=(result.files_copied, result.bytes_copied, result.seconds),
            keep_lease=True,
            state=ReplicaState.PROMOTED,
        )
        journal.add_job_event(
            session,
            job,
            cause=replicas_store.CAUSE,
            message=f"checkpoint made available for {holder} at {result.location} "
            f"({result.origin}): {result.detail}",
            node_id=holder,
        )


def release(store: Store, job: str, *, holder: str) -> bool:
    """Let the replicator write the job's replica again before the hold taken by
    :func:`make_available` runs out (a cancelled failover)."""
    with store.transaction() as session:
        return replicas_store.release(session, job, holder=holder)


class ReplicaCheckpoints:
    """:func:`make_available` and :func:`release` on ``store``, as the operations executor needs
    them (``scheduler.core.operations_ledger.Checkpoints``)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def make_available(
        self, job: JobRecord, move: CheckpointMove, guard: Callable[[], object] | None = None
    ) -> Availability:
        return make_available(
            job.name,
            source=move.source,
            target=move.target,
            target_root=move.target_root,
            store=self._store,
            holder=move.holder,
            known=(job, move.clusters),
            guard=guard,
        )

    def release(self, jobs: Sequence[str], *, holder: str) -> None:
        """Several jobs' replicas in one transaction."""
        with self._store.transaction() as session:
            for job in jobs:
                replicas_store.release(session, job, holder=holder)


# --------------------------------------------------------------------------- the replicator


@dataclass
class RoundStats:
    """What one replicator round did."""

    jobs: int = 0
    looked: int = 0
    copied_files: int = 0
    copied_bytes: int = 0
    errors: int = 0
    #: held by someone else (a failover) or not finished by the round's end
    skipped: int = 0
    unfinished: int = 0
    seconds: float = 0.0
    problems: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Work:
    job: JobRecord
    target: ReplicaTarget
    replica: ReplicaRecord | None


class Replicator:
    """Mirrors the checkpoints of the jobs a node owns into their other cluster's root.

    One :meth:`round`: for each claim (group, pool slot), the owned jobs that are replicated
    and due (``scheduler.decisions.replication.due``), least recently looked at first, in a small
    pool of threads, until the round's deadline. Per job: list source and replica; nothing to copy
    -> record the figures (when they changed, or once a minute); else take the replica's lease,
    :func:`sync` (stopping at the deadline), record what was copied and give the lease back.
    A job's failure is recorded on its replica (state ERROR) and never stops the others.
    """

    def __init__(
        self,
        store: Store,
        *,
        node_id: str,
        round_seconds: float,
        parallelism: int = 2,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        storage_of: Callable[[str], CheckpointStorage] = storage_for,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._store = store
        self._node_id = node_id
        self._round_seconds = round_seconds
        self._heartbeat = timedelta(seconds=heartbeat_seconds)
        self._storage_of = storage_of
        self._clock = clock
        self._pool = ThreadPoolExecutor(max(1, parallelism), thread_name_prefix="replicate")
        #: jobs a thread of this node is replicating now (a copy may outlast its round; the
        #: lease is the node's, so the node itself must not start a second one)
        self._busy: set[int] = set()
        self._busy_lock = threading.Lock()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    @property
    def lease_seconds(self) -> float:
        """A round's lease: twice the round (nodes' clocks may disagree by up to a round)."""
        return 2 * self._round_seconds

    def round(self, claims: Collection[Claim]) -> RoundStats:
        started = time.monotonic()
        deadline = started + self._round_seconds
        stats = RoundStats()
        work = self.work(claims)
        stats.jobs = len(work)
        futures: list[tuple[_Work, Future[tuple[int, int, str]]]] = [
            (w, self._pool.submit(self._guarded, w, deadline)) for w in work
        ]
        for item, future in futures:
            remaining = deadline + 5.0 - time.monotonic()
            try:
                files, size, problem = future.result(timeout=max(remaining, 0.0))
            except FutureTimeout:
                future.cancel()
                stats.unfinished += 1
                continue
            except Exception as exc:  # noqa: BLE001 - recorded per job; the round goes on
                log.exception("job %s: replication failed", item.job.name)
                stats.errors += 1
                stats.problems[item.job.name] = f"{type(exc).__name__}: {exc}"
                continue
            stats.looked += 1
            stats.copied_files += files
            stats.copied_bytes += size
            if problem:
                stats.problems[item.job.name] = problem
                if problem.startswith(("held by", "unfinished")):
                    stats.skipped += 1
                else:
                    stats.errors += 1
        stats.seconds = round(time.monotonic() - started, 3)
        return stats

    def work(self, claims: Collection[Claim]) -> list[_Work]:
        """The owned, replicated, due jobs of ``claims``, least recently looked at first."""
        work: list[_Work] = []
        with self._store.session() as session:
            groups = {g.name: g for g in catalog_store.list_groups(session)}
            clusters = {c.name: c for c in catalog_store.list_clusters(session)}
            for claim in claims:
                group = groups.get(claim.group)
                if group is None:
                    continue
                jobs = replicas_store.candidates(
                    session, claim.group, index=claim.index, size=claim.size
                )
                replicas = replicas_store.replicas_of(session, jobs)
                work.extend(self._due(jobs, replicas, group, clusters))
        oldest = datetime.min.replace(tzinfo=self._clock().tzinfo)
        work.sort(key=lambda w: (w.replica.observed_at or oldest) if w.replica else oldest)
        return work

    @staticmethod
    def _due(
        jobs: list[JobRecord],
        replicas: dict[str, ReplicaRecord],
        group: GroupRecord,
        clusters: dict[str, ClusterRecord],
    ) -> Iterator[_Work]:
        for job in jobs:
            target = replica_target(job, group, clusters)
            if isinstance(target, str):
                continue  # no replica possible (no failover cluster): nothing to report
            replica = replicas.get(job.name)
            if due(job, replica, target=target):
                yield _Work(job, target, replica)

    # -- one job ---------------------------------------------------------------------------------

    def _guarded(self, work: _Work, deadline: float) -> tuple[int, int, str]:
        with self._busy_lock:
            if work.job.id in self._busy:
                return 0, 0, "unfinished: still being copied by an earlier round"
            self._busy.add(work.job.id)
        try:
            return self._replicate(work, deadline)
        finally:
            with self._busy_lock:
                self._busy.discard(work.job.id)

    def _replicate(self, work: _Work, deadline: float) -> tuple[int, int, str]:
        """(files, bytes copied, a problem or "") for one job."""
        job, target = work.job, work.target
        if time.monotonic() >= deadline:
            return 0, 0, "unfinished: the round ended first"
        for cluster, root in (
            (target.source_cluster, target.source_root),
            (target.target_cluster, target.target_root),
        ):
            if root and not self._storage_of(root).reachable(root):
                return self._failed(
                    work, f"the storage root of cluster {cluster} ({root}) cannot be reached"
                )
        try:
            source_files = self._storage_of(target.source_location).list(target.source_location)
        except StorageError as exc:
            return self._failed(work, f"cannot read the source checkpoint: {exc.message}")
        try:
            replica_files = self._storage_of(target.location).list(target.location)
        except StorageError as exc:
            return self._failed(work, f"cannot read the replica: {exc.message}")
        source_batch = last_complete_batch(source_files)
        replica_batch = last_complete_batch(replica_files)
        if source_batch is None and replica_batch is not None:
            return self._failed(
                work,
                f"the source checkpoint {target.source_location} holds no complete batch (gone, "
                f"or not written yet); the replica keeps batch {replica_batch}",
            )
        if source_batch is not None and replica_batch is not None and source_batch < replica_batch:
            return self._failed(
                work,
                f"the source is at batch {source_batch}, behind the replica's batch "
                f"{replica_batch}: the job's checkpoint was reset or replaced. The replica is "
                f"kept; delete {target.location} to replicate the new checkpoint",
            )
        plan = plan_sync(
            source_files,
            replica_files,
            source_batch,
            preserves_mtime=self._storage_of(target.location).preserves_mtime,
        )
        if source_batch is None or plan.empty:
            figures = lag(source_files, replica_batch)
            if self._unchanged(work, figures.batches, replica_batch, source_batch):
                return 0, 0, ""
            self._record(work, figures)
            return 0, 0, ""
        if not self._take(work):
            holder = work.replica.lease_holder if work.replica else "another node"
            return 0, 0, f"held by {holder}"
        lease_end = time.monotonic() + self._round_seconds
        try:
            result = sync(
                target.source_location,
                target.location,
                batch=source_batch,
                source_files=source_files,
                target_files=replica_files,
                deadline=min(deadline, lease_end),
                storage_of=self._storage_of,
            )
        except DroverError as exc:
            return self._failed(work, f"copy failed: {exc.message}")
        figures = lag(source_files, result.batch)
        self._record(work, figures, copied=(result.files, result.bytes, result.seconds))
        if result.files or result.removed:
            log.info(
                "job %s: replica %s at batch %s (source %s): %d files, %d bytes in %.2fs%s",
                job.name,
                target.location,
                result.batch,
                source_batch,
                result.files,
                result.bytes,
                result.seconds,
                f" ({result.note})" if result.note else "",
            )
        return result.files, result.bytes, (f"unfinished: {result.note}" if result.note else "")

    def _unchanged(
        self, work: _Work, lag_batches: int, replica_batch: int | None, source_batch: int | None
    ) -> bool:
        replica = work.replica
        if replica is None or replica.error or replica.observed_at is None:
            return False
        if (replica.target_cluster, replica.location) != (
            work.target.target_cluster,
            work.target.location,
        ):
            return False
        if replica.state is not observed_state(replica_batch, lag_batches):
            return False
        if (replica.source_batch, replica.replica_batch) != (source_batch, replica_batch):
            return False
        if not work.job.state.has_live_run and replica.observed_at < work.job.updated_at:
            return False  # recorded once more, so that the job at rest is not due any more
        return self._clock() - replica.observed_at < self._heartbeat

    def _take(self, work: _Work) -> bool:
        now = self._clock()
        try:
            with self._store.transaction() as session:
                return replicas_store.acquire(
                    session,
                    work.job,
                    work.target,
                    holder=self._node_id,
                    until=now + timedelta(seconds=self.lease_seconds),
                    now=now,
                )
        except StaleWrite:
            return False

    def _record(
        self,
        work: _Work,
        figures: Lag | None,
        *,
        error: str = "",
        copied: tuple[int, int, float] | None = None,
    ) -> bool:
        """Record a look on the job's replica (creating its record first if need be)."""
        with self._store.transaction() as session:
            if work.replica is None or (
                work.replica.target_cluster,
                work.replica.location,
                work.replica.source_location,
            ) != (work.target.target_cluster, work.target.location, work.target.source_location):
                if copied is None and not replicas_store.acquire(
                    session,
                    work.job,
                    work.target,
                    holder=self._node_id,
                    until=self._clock() + timedelta(seconds=self.lease_seconds),
                ):
                    return False
            return replicas_store.record_look(
                session,
                work.job,
                holder=self._node_id,
                lag=figures,
                error=error,
                node_id=self._node_id,
                copied=copied,
            )

    def _failed(self, work: _Work, problem: str) -> tuple[int, int, str]:
        log.warning("job %s: replication: %s", work.job.name, problem)
        try:
            self._record(work, None, error=problem)
        except (DroverError, StaleWrite):
            log.exception("job %s: cannot record the replication problem", work.job.name)
        return 0, 0, problem


def stale_after(interval: float, round_seconds: float) -> float:
    """Seconds without a look after which a running job's replica figures count as stale: two
    heartbeats and a round (a round may be skipped while a failover holds the replica)."""
    return 2 * HEARTBEAT_SECONDS + round_seconds + interval
