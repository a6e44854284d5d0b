"""The fleet at a glance (``GET /v1/overview``, the console's state strip): jobs counted by state
and desired state in one grouped query, clusters counted by health.

Each function takes a session; the caller owns the transaction.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from scheduler.store.models import Cluster, Job


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
    conditions: list[ColumnElement[bool]] = []
    if teams is not None:
        conditions.append(Job.team.in_(sorted(teams)))
    if team is not None:
        conditions.append(Job.team == team)
    if group is not None:
        conditions.append(Job.group_name == group)
    if cluster is not None:
        conditions.append(Job.cluster_name == cluster)
    if search:
        conditions.append(func.lower(Job.name).contains(search.lower(), autoescape=True))
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
