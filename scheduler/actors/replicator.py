"""The replication loop: every ``replication_interval`` (±20 % jitter) one
:meth:`scheduler.loops.replication.Replicator.round` over the jobs this node owns, with the claims
Membership hands out (a node replicates exactly the jobs it owns: ``crc32(name) % pool``). The
loop never dies; a round is bounded by ``replication_round_seconds``.

A loop hosted by the NodeSupervisor in the node process (:mod:`scheduler.actors.hosted`). Its
file copies and store writes run in worker threads (``asyncio.to_thread`` and the
replicator's pool), so the supervisor's event loop only waits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import asdict
from typing import Any

from scheduler.actors.hosted import HostedLoop, current_claims
from scheduler.config import Settings
from scheduler.loops.replication import Replicator
from scheduler.store.db import Store

log = logging.getLogger("drover.actors.replicator")

#: each round waits the interval times a factor drawn from this range
JITTER = (0.8, 1.2)


class ReplicationLoop(HostedLoop):
    """Mirrors the checkpoints of this node's replicated jobs into their other cluster's root."""

    kind = "replication"
    jitter = JITTER

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.replication_interval, log)
        self._settings = settings
        self._replicator = Replicator(
            Store(settings.resolved_database_url),
            node_id=settings.node_id,
            round_seconds=settings.replication_round_seconds,
            parallelism=settings.replication_parallelism,
        )

    async def _close(self) -> None:
        self._replicator.close()

    async def _round(self) -> dict[str, Any] | None:
        started = time.monotonic()
        held = await current_claims(self._groups, log)
        claims = [claim for claim in held.values() if claim.valid(time.monotonic())]
        if not claims:  # not counted: nothing of this node's to replicate
            self._last_round = {"at": time.time(), "seconds": 0.0, "claims": 0}
            return None
        # the round stops copying at its own deadline; the margin covers the last store writes
        limit = self._settings.replication_round_seconds + 30.0
        stats = await asyncio.wait_for(
            asyncio.to_thread(self._replicator.round, claims), timeout=limit
        )
        return {
            "at": time.time(),
            "seconds": round(time.monotonic() - started, 3),
            "claims": len(claims),
            **asdict(stats),
        }
