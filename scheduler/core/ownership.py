"""Who manages which job: the one rule every node computes alike. Pure functions, no I/O.

``owner(job) = pool[crc32(utf8(job.name)) % len(pool)]`` where ``pool`` is the sorted ids of the
live ``active`` members of the job's group, or of the live ``backup`` members when no active one
is alive. ``zlib.crc32`` equals MySQL's ``CRC32()`` on utf8mb4 text, so a node can select its own
jobs in SQL. Python's built-in string hashing differs between processes: never use it here.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable
from dataclasses import dataclass


def name_crc32(name: str) -> int:
    return zlib.crc32(name.encode("utf-8")) & 0xFFFFFFFF


def owner_index(name: str, pool_size: int) -> int:
    if pool_size <= 0:
        raise ValueError("an empty pool owns nothing")
    return name_crc32(name) % pool_size


@dataclass(frozen=True)
class Member:
    node_id: str
    role: str  # "active" | "backup"


def pool_of(members: Iterable[Member]) -> tuple[str, ...]:
    """The nodes that share a group's jobs: active members if any is alive, else backups."""
    members = list(members)
    active = sorted({m.node_id for m in members if m.role == "active"})
    if active:
        return tuple(active)
    return tuple(sorted({m.node_id for m in members if m.role == "backup"}))


def owner_of(name: str, pool: tuple[str, ...]) -> str | None:
    """The owner of job ``name`` for a sorted pool, or None when the pool is empty."""
    if not pool:
        return None
    return pool[owner_index(name, len(pool))]


@dataclass(frozen=True)
class Fence:
    """A node's claim on jobs under one membership epoch; every store write on a job checks it."""

    node_id: str
    epoch: int


@dataclass(frozen=True)
class Claim:
    """What one node may act on in one group right now: its slot in the pool under an epoch."""

    group: str
    fence: Fence
    #: this node's position in the sorted pool, and the pool's size
    index: int
    size: int
    #: acting on a last known view while ZooKeeper is unreachable (explicitly configured)
    degraded: bool = False
    #: ``time.monotonic()`` after which the claim may no longer be acted on (a lease: the last
    #: confirmed ZooKeeper round trip plus part of the session timeout; monotonic time keeps
    #: running while a process is frozen, so a thawed node finds its lease expired)
    valid_until: float = math.inf

    def valid(self, now: float) -> bool:
        return now < self.valid_until


def claim_for(
    group: str,
    node_id: str,
    members: Iterable[Member],
    epoch: int,
    *,
    degraded: bool = False,
    valid_until: float = math.inf,
) -> Claim | None:
    """This node's claim in ``group`` for a membership view, or None when it is not in the pool."""
    pool = pool_of(members)
    if node_id not in pool:
        return None
    return Claim(
        group, Fence(node_id, epoch), pool.index(node_id), len(pool), degraded, valid_until
    )
