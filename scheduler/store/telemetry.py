"""What ``/metrics`` reads from the store: aggregates only, never a row per job.

Each function is one aggregate query (GROUP BY over indexed columns); the API caches the result
for ``DROVER_METRICS_STORE_TTL`` seconds, so a scrape costs at most a handful of queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from scheduler.store.models import CheckpointReplica, Cluster, Group, Job


@dataclass(frozen=True)
class JobCount:
    group: str
    cluster: str
    state: str
    count: int


def owned_job_counts(session: Session, node_id: str) -> list[JobCount]:
    """Jobs ``node_id`` owns by group, cluster and state; a job that never ran counts on its
    group's primary cluster (where it would run)."""
    cluster = func.coalesce(Job.cluster_name, Group.primary_cluster)
    rows = session.execute(
        select(Job.group_name, cluster, Job.state, func.count())
        .join(Group, Group.name == Job.group_name)
        .where(Job.owner == node_id)
        .group_by(Job.group_name, cluster, Job.state)
    ).all()
    return [JobCount(str(g), str(c or ""), str(s), int(n)) for g, c, s, n in rows]


def stalled_jobs(session: Session, node_id: str) -> list[tuple[str, str, int]]:
    """``(group, cluster, count)`` of the jobs ``node_id`` owns whose current run is stalled."""
    from scheduler.store.progress import stalled_counts

    return stalled_counts(session, node_id)


def alert_figures(session: Session) -> tuple[list[tuple[str, str, int]], int, int]:
    """Alerts firing by kind and severity; messages pending and given up in the outbox."""
    from scheduler.store.alerts import firing_counts, outbox_counts

    pending, given_up = outbox_counts(session)
    return firing_counts(session), pending, given_up


def cluster_health(session: Session) -> list[tuple[str, str]]:
    """``(cluster, health)`` of every cluster."""
    rows = session.execute(select(Cluster.name, Cluster.health).order_by(Cluster.name)).all()
    return [(str(name), str(health)) for name, health in rows]


@dataclass(frozen=True)
class ReplicaFigures:
    """The replicas of one (source, target, state) of the jobs a node owns."""

    source_cluster: str
    target_cluster: str
    state: str
    count: int
    #: the largest lag in batches among them
    lag_batches: int
    #: the oldest committed source batch any of them lacks (None: none lacks one)
    oldest_missing_at: datetime | None


def replica_figures(session: Session, node_id: str) -> list[ReplicaFigures]:
    """Replicas of the jobs ``node_id`` owns by source cluster, target cluster and state."""
    lagging = CheckpointReplica.lag_batches > 0
    rows = session.execute(
        select(
            CheckpointReplica.source_cluster,
            CheckpointReplica.target_cluster,
            CheckpointReplica.state,
            func.count(),
            func.max(CheckpointReplica.lag_batches),
            func.min(case((lagging, CheckpointReplica.oldest_missing_at), else_=None)),
        )
        .join(Job, Job.id == CheckpointReplica.job_id)
        .where(Job.owner == node_id)
        .group_by(
            CheckpointReplica.source_cluster,
            CheckpointReplica.target_cluster,
            CheckpointReplica.state,
        )
    ).all()
    return [
        ReplicaFigures(str(s), str(t), str(state), int(n), int(lag or 0), _aware(oldest))
        for s, t, state, n, lag, oldest in rows
    ]


def _aware(value: object) -> datetime | None:
    """A timestamp from an aggregate (the column type's conversion does not apply to it)."""
    if value is None:
        return None
    if isinstance(value, str):  # SQLite returns aggregates of datetimes as text
        value = datetime.fromisoformat(value)
    assert isinstance(value, datetime)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
