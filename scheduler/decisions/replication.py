"""Checkpoint replicas of jobs: which jobs are replicated, from where to where, and the state of
a replica (pure; the files are :mod:`scheduler.decisions.checkpoints`, the copying
:mod:`scheduler.loops.replication`).

A job is replicated when its ``replicate`` field says so; left unset (``null``), high priority
jobs are. Its replica lives in the storage root of *the other cluster of its group*: the
failover cluster while the job runs on the primary (or has not run yet), the primary while it
runs on the failover cluster (after a failover). The replica's location is exactly where the job
would keep its checkpoint on that cluster (``storage.checkpoint_location``:
``<root>/<job>/checkpoint`` by default): a failover to that cluster finds the checkpoint in place,
and copies at most what the replica had not caught up with yet.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler.core.errors import IllegalTransition, InvalidInput
from scheduler.core.records import ClusterRecord, GroupRecord, JobRecord
from scheduler.core.states import Priority
from scheduler.decisions import storage


class ReplicaState(enum.StrEnum):
    """Where a job's replica stands. Legal transitions (:data:`REPLICA_TRANSITIONS`):

    - ``PENDING`` (no complete batch copied yet) → ``CURRENT``, ``LAGGING``, ``ERROR``
    - ``CURRENT`` (holds the source's newest complete batch) ↔ ``LAGGING`` (behind it)
    - any of those ↔ ``ERROR`` (the last look failed; the figures are the last good one's)
    - any → ``PROMOTED``: a failover took the replica over (``make_available``); the
      replicator leaves it alone while the failover holds it
    - ``PROMOTED`` → ``PENDING``: replication starts again, towards the job's other cluster
      once the job moved, or to the same one when the failover let go of it
    """

    PENDING = "PENDING"
    CURRENT = "CURRENT"
    LAGGING = "LAGGING"
    ERROR = "ERROR"
    PROMOTED = "PROMOTED"


_OBSERVED = frozenset(
    {ReplicaState.PENDING, ReplicaState.CURRENT, ReplicaState.LAGGING, ReplicaState.ERROR}
)
REPLICA_TRANSITIONS: dict[ReplicaState, frozenset[ReplicaState]] = {
    ReplicaState.PENDING: _OBSERVED | {ReplicaState.PROMOTED},
    ReplicaState.CURRENT: _OBSERVED | {ReplicaState.PROMOTED},
    ReplicaState.LAGGING: _OBSERVED | {ReplicaState.PROMOTED},
    ReplicaState.ERROR: _OBSERVED | {ReplicaState.PROMOTED},
    ReplicaState.PROMOTED: frozenset({ReplicaState.PENDING, ReplicaState.PROMOTED}),
}


def replica_transition(old: ReplicaState, new: ReplicaState) -> ReplicaState:
    """``new`` if the table allows ``old -> new``; else IllegalTransition."""
    if new not in REPLICA_TRANSITIONS[old]:
        raise IllegalTransition(f"replica state {old} -> {new} is not allowed")
    return new


def observed_state(replica_batch: int | None, lag_batches: int) -> ReplicaState:
    """The state a successful look at source and replica leaves a replica in."""
    if replica_batch is None:
        return ReplicaState.PENDING
    return ReplicaState.CURRENT if lag_batches == 0 else ReplicaState.LAGGING


@dataclass(frozen=True)
class ReplicaRecord:
    """A job's replica as the store keeps it (one per job)."""

    job_name: str
    state: ReplicaState
    source_cluster: str
    source_location: str
    #: the cluster whose storage root holds the replica, and where in it
    target_cluster: str
    location: str
    #: the source's newest complete batch, and when the source committed it
    source_batch: int | None
    source_batch_at: datetime | None
    #: the replica's newest complete batch, and when the source committed it
    replica_batch: int | None
    replica_batch_at: datetime | None
    lag_batches: int
    #: when the source committed the oldest batch the replica lacks (None: it lacks none)
    oldest_missing_at: datetime | None
    #: the last successful look at source and replica
    observed_at: datetime | None
    #: why the last look failed ("" when it did not), and since when looks fail
    error: str
    error_since: datetime | None
    #: copied in total since the replica's record was created
    files_copied: int
    bytes_copied: int
    #: the last round that copied something: files, bytes and how long it took
    last_copy_at: datetime | None
    last_copy_files: int
    last_copy_bytes: int
    last_copy_seconds: float
    #: the node that looked last
    node_id: str
    #: who may write into the replica now (a replicator's node id, ``failover:<id>``), until when
    lease_holder: str | None
    lease_until: datetime | None
    updated_at: datetime | None

    def lag_seconds(self, now: datetime) -> float:
        """Seconds of committed source work the replica lacks, as of ``now`` (0: none)."""
        if self.oldest_missing_at is None or self.lag_batches == 0:
            return 0.0
        return max(0.0, (now - self.oldest_missing_at).total_seconds())

    def stale(self, now: datetime, after: float) -> bool:
        """No successful look for ``after`` seconds: the figures may be old."""
        return self.observed_at is None or now - self.observed_at > timedelta(seconds=after)


def replicates(job: JobRecord) -> bool:
    """The job's effective setting: its ``replicate`` field, or (unset) high priority."""
    if job.replicate is not None:
        return job.replicate
    return job.priority == Priority.HIGH


@dataclass(frozen=True)
class ReplicaTarget:
    """From where to where one job's checkpoint is mirrored."""

    source_cluster: str
    source_location: str
    target_cluster: str
    location: str
    #: the storage roots of the two clusters
    source_root: str = ""
    target_root: str = ""


def replica_target(
    job: JobRecord, group: GroupRecord, clusters: Mapping[str, ClusterRecord]
) -> ReplicaTarget | str:
    """Where ``job``'s replica goes, or why it has none (a sentence).

    The source is the job's checkpoint where it runs (its current run's location, else where it
    would run: its cluster, else its group's primary). The target is the other cluster of the
    group: the failover cluster, or the primary when the job is on the failover cluster.
    """
    if group.failover_cluster is None:
        return f"group {group.name!r} has no failover cluster"
    run = job.current_run
    source_name = (run.cluster if run is not None else None) or job.cluster or group.primary_cluster
    target_name = (
        group.primary_cluster if source_name == group.failover_cluster else group.failover_cluster
    )
    if target_name == source_name:
        return f"job runs on {source_name!r}, its group's only other cluster"
    source_cluster = clusters.get(source_name)
    target_cluster = clusters.get(target_name)
    if source_cluster is None or target_cluster is None:
        return f"cluster {source_name if source_cluster is None else target_name!r} is unknown"
    others = list(clusters.values())
    try:
        source = (
            run.checkpoint_location
            if run is not None and run.checkpoint_location
            else storage.checkpoint_location(source_cluster, job, others)
        )
        location = storage.checkpoint_location(target_cluster, job, others)
    except InvalidInput as exc:
        return exc.message
    if storage.parse_location(source) == storage.parse_location(location):
        return "the replica would be the checkpoint itself"
    return ReplicaTarget(
        source_name,
        source,
        target_name,
        location,
        storage.normalise_location(source_cluster.storage_root, "storage_root"),
        storage.normalise_location(target_cluster.storage_root, "storage_root"),
    )


def due(job: JobRecord, replica: ReplicaRecord | None, *, target: ReplicaTarget) -> bool:
    """Whether the replicator looks at ``job`` this round: while a run of it may be writing its
    checkpoint, and once more after that until the replica holds what the source has."""
    if replica is None or replica.state is ReplicaState.PROMOTED:
        return True  # the store decides whether a promoted replica may be taken back
    if (replica.target_cluster, replica.location) != (target.target_cluster, target.location):
        return True
    if replica.source_location != target.source_location:
        return True
    if job.state.has_live_run:
        return True
    if replica.state is not ReplicaState.CURRENT or replica.observed_at is None:
        return True
    # at rest and current: look again only if the job changed after the last look
    return job.updated_at > replica.observed_at
