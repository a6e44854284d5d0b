"""The replication loop: every ``replication_interval`` (±20 % jitter) one
:meth:`scheduler.replication.Replicator.round` over the jobs this node owns, with the claims
Membership hands out (a node replicates exactly the jobs it owns: ``crc32(name) % pool``). The
loop never dies; a round is bounded by ``replication_round_seconds``.

Like the cluster monitor it is an asynchronous component hosted by the NodeSupervisor in the node
process, not a Ray actor of its own (a Ray worker process costs a node about 140 MiB resident).
Its file copies and store writes run in worker threads (``asyncio.to_thread`` and the
replicator's pool), so the supervisor's event loop only waits.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import asdict
from typing import Any

from scheduler.actors.common import MEMBERSHIP, PING_TIMEOUT, ray
from scheduler.config import Settings
from scheduler.ownership import Claim
from scheduler.replication import Replicator
from scheduler.store.db import Store

log = logging.getLogger("drover.actors.replicator")

#: each round waits the interval times a factor drawn from this range
JITTER = (0.8, 1.2)


class ReplicationLoop:
    """Mirrors the checkpoints of this node's replicated jobs into their other cluster's root."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._replicator = Replicator(
            Store(settings.resolved_database_url),
            node_id=settings.node_id,
            round_seconds=settings.replication_round_seconds,
            parallelism=settings.replication_parallelism,
        )
        self._groups: list[str] = []
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._rounds = 0
        self._last_round: dict[str, Any] = {}

    async def ensure(self, groups: list[str]) -> dict[str, Any]:
        """The supervisor's ping: the groups to serve; (re)starts the loop; returns the status."""
        self._groups = sorted(groups)
        if not self._stopping and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._loop())
        return await self.status()

    async def status(self) -> dict[str, Any]:
        return {"alive": True, "rounds": self._rounds, "last_round": dict(self._last_round)}

    async def drain(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
        self._replicator.close()

    async def _loop(self) -> None:
        interval = self._settings.replication_interval
        await asyncio.sleep(random.uniform(0, interval * (JITTER[1] - JITTER[0])))
        while not self._stopping:
            started = time.monotonic()
            try:
                await self._round()
            except Exception:  # the loop never dies
                log.exception("replication round failed")
            elapsed = time.monotonic() - started
            await asyncio.sleep(max(0.0, interval * random.uniform(*JITTER) - elapsed))

    async def _round(self) -> None:
        started = time.monotonic()
        claims = await self._claims()
        if not claims:
            self._last_round = {"at": time.time(), "seconds": 0.0, "claims": 0}
            return
        # the round stops copying at its own deadline; the margin covers the last store writes
        limit = self._settings.replication_round_seconds + 30.0
        stats = await asyncio.wait_for(
            asyncio.to_thread(self._replicator.round, claims), timeout=limit
        )
        self._rounds += 1
        self._last_round = {
            "at": time.time(),
            "seconds": round(time.monotonic() - started, 3),
            "claims": len(claims),
            **asdict(stats),
        }

    async def _claims(self) -> list[Claim]:
        """This node's current claims in its groups (a group without one is skipped)."""
        try:
            membership = ray.get_actor(MEMBERSHIP)
        except ValueError:
            return []
        claims: list[Claim] = []
        for group in self._groups:
            try:
                answer: tuple[Claim | None, tuple[str, ...]] = await asyncio.wait_for(
                    membership.claim.remote(group), timeout=PING_TIMEOUT
                )
            except Exception as exc:  # noqa: BLE001 - no claim, nothing replicated this round
                log.info("no claim for group %s this round (%s)", group, exc)
                continue
            claim = answer[0]
            if claim is not None and claim.valid(time.monotonic()):
                claims.append(claim)
        return claims
