"""The fleet at a glance (``GET /v1/overview``, the console's state strip): jobs counted by state
and desired state in one grouped query, clusters counted by health; and its recent activity
(``GET /v1/overview/history``, the console's charts): runs started, restarts, failed runs and
failovers counted per time bucket, one query per table.

Each function takes a session; the caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, and_, case, func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from scheduler.store.jobs import JobFilter
from scheduler.store.models import Cluster, Job, Operation, Run


@dataclass(frozen=True)
class JobCounts:
    #: (state, desired state) -> jobs
    by_state_and_desire: dict[tuple[str, str], int]

    @property
    def total(self) -> int:
        return sum(self.by_state_and_desire.values())

    def by_state(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for (state, _), n in self.by_state_and_desire.items():
            out[state] = out.get(state, 0) + n
        return out

    def by_desired(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for (_, desired), n in self.by_state_and_desire.items():
            out[desired] = out.get(desired, 0) + n
        return out


def count_jobs(
    session: Session,
    *,
    teams: frozenset[str] | None = None,
    team: str | None = None,
    group: str | None = None,
    cluster: str | None = None,
    search: str | None = None,
) -> JobCounts:
    """Jobs by (state, desired state); ``teams`` is the caller's visibility (None = every team),
    the others filter as ``GET /v1/jobs`` does."""
    conditions = JobFilter(
        teams=teams, team=team, group=group, cluster=cluster, search=search
    ).conditions()
    rows = session.execute(
        select(Job.state, Job.desired_state, func.count())
        .where(*conditions)
        .group_by(Job.state, Job.desired_state)
    ).all()
    return JobCounts({(str(s), str(d)): int(n) for s, d, n in rows})


def clusters_by_health(session: Session) -> dict[str, list[str]]:
    """health -> the names of the clusters in it."""
    out: dict[str, list[str]] = {}
    for name, health in session.execute(
        select(Cluster.name, Cluster.health).order_by(Cluster.name)
    ):
        out.setdefault(str(health), []).append(str(name))
    return out


@dataclass(frozen=True)
class Activity:
    """Counts per time bucket (``edges`` has one more entry than each count list)."""

    edges: tuple[datetime, ...]
    runs_started: list[int]
    restarts: list[int]
    failures: list[int]
    failovers: list[int] | None


def _per_bucket(
    column: InstrumentedAttribute[datetime] | InstrumentedAttribute[datetime | None],
    edges: Sequence[datetime],
    *also: ColumnElement[bool],
) -> list[ColumnElement[int]]:
    """One ``SUM(CASE ...)`` per bucket: rows whose ``column`` falls in it (and meet ``also``)."""
    return [
        func.coalesce(func.sum(case((and_(column >= lo, column < hi, *also), 1), else_=0)), 0)
        for lo, hi in zip(edges, edges[1:], strict=False)
    ]


def activity(
    session: Session,
    edges: Sequence[datetime],
    *,
    teams: frozenset[str] | None = None,
    failovers: bool = True,
) -> Activity:
    """Runs created (a run after a job's first is a restart: a restart command, a restart after
    a failure, a failover's move), runs ended as failures (those counted against the restart
    budget) and failovers created, per bucket ``[edges[i], edges[i+1])``, for the jobs of
    ``teams`` (None = every team). Two grouped queries, whatever the number of buckets."""
    n = len(edges) - 1
    since, until = edges[0], edges[-1]
    runs = (
        select(
            *_per_bucket(Run.created_at, edges),
            *_per_bucket(Run.created_at, edges, Run.attempt > 1),
            *_per_bucket(Run.ended_at, edges, Run.counts_as_failure.is_(True)),
        )
        .join(Job, Job.id == Run.job_id)
        .where(
            ((Run.created_at >= since) & (Run.created_at < until))
            | ((Run.ended_at >= since) & (Run.ended_at < until))
        )
    )
    if teams is not None:
        runs = runs.where(Job.team.in_(sorted(teams)))
    row = [int(x) for x in session.execute(runs).one()]
    moved: list[int] | None = None
    if failovers:
        ops = select(*_per_bucket(Operation.created_at, edges)).where(
            Operation.kind == "failover",
            Operation.created_at >= since,
            Operation.created_at < until,
        )
        moved = [int(x) for x in session.execute(ops).one()]
    return Activity(
        edges=tuple(edges),
        runs_started=row[:n],
        restarts=row[n : 2 * n],
        failures=row[2 * n :],
        failovers=moved,
    )
