"""A fleet of jobs in a store, in bulk: what the console's browser tests and previews look at.

:func:`seed_fleet` inserts thousands of jobs at once (1,000 rows a statement, no API round trip,
no audit: set-up only) spread over teams, businesses and priorities, in states the reconciler
leaves alone (``STOPPED`` wanted stopped, ``FINISHED`` wanted stopped, ``FAILED`` after giving up),
so a node can run beside them without submitting anything for them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import timedelta

import sqlalchemy as sa

from scheduler.core.clock import utcnow
from scheduler.core.states import DesiredState, JobState
from scheduler.decisions.planning import GAVE_UP
from scheduler.store.db import Store
from scheduler.store.models import Job

CHUNK = 1000
TEAMS = ("orders", "ads", "payments", "search", "risk", "growth")
PRIORITIES = ("high", "normal", "normal", "normal", "low")


@dataclass(frozen=True)
class Fleet:
    names: list[str]
    teams: tuple[str, ...]


def fleet_names(count: int, prefix: str = "fleet") -> list[str]:
    return [f"{prefix}-{i:05d}" for i in range(count)]


def seed_fleet(
    store: Store,
    count: int,
    *,
    group: str,
    entrypoint: str,
    cluster: str | None = None,
    prefix: str = "fleet",
    teams: tuple[str, ...] = TEAMS,
    seed: int = 12,
) -> Fleet:
    """Insert ``count`` jobs named ``<prefix>-00000``... into ``group``: 80 % STOPPED, 12 %
    FINISHED, 8 % FAILED (gave up: the reconciler waits for an operator)."""
    rng = random.Random(seed)
    now = utcnow()
    names = fleet_names(count, prefix)
    rows = []
    for i, name in enumerate(names):
        roll = rng.random()
        if roll < 0.08:
            desired, state, reason = DesiredState.RUNNING, JobState.FAILED, f"{GAVE_UP}3 failures"
        elif roll < 0.20:
            desired, state, reason = DesiredState.STOPPED, JobState.FINISHED, "the pipeline ended"
        else:
            desired, state, reason = DesiredState.STOPPED, JobState.STOPPED, ""
        team = teams[i % len(teams)]
        rows.append(
            {
                "name": name,
                "group_name": group,
                "team": team,
                "business": f"{team}-bu",
                "priority": rng.choice(PRIORITIES),
                "entrypoint": entrypoint,
                "args": ["--window", f"{rng.choice((10, 30, 60))}s"],
                "conf": {"spark.sql.shuffle.partitions": str(rng.choice((4, 8, 16)))},
                "checkpoint_location": "",
                "desired_state": desired.value,
                "state": state.value,
                "state_reason": reason,
                "cluster_name": cluster if state != JobState.STOPPED else None,
                "generation": 0,
                "attempts_reset_at": now - timedelta(hours=1),
                "owner_epoch": 0,
                "version": 1,
                "created_at": now - timedelta(minutes=rng.randrange(10, 60 * 24 * 30)),
                "updated_at": now - timedelta(seconds=rng.randrange(5, 86400)),
            }
        )
    with store.transaction() as session:
        for start in range(0, len(rows), CHUNK):
            session.execute(sa.insert(Job), rows[start : start + CHUNK])
    return Fleet(names=names, teams=teams)
