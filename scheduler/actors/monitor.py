"""The ClusterMonitor: every probe interval (±20 % jitter, so the nodes do not probe in step)
one :meth:`scheduler.monitor.HealthMonitor.round` over the clusters of this node's groups, with
the live nodes membership sees (see :mod:`scheduler.monitor`). The loop never dies.

It is an asynchronous component hosted by the NodeSupervisor (in the node process, on the
supervisor's loop), not a Ray actor of its own: a Ray worker process costs a node about 140 MiB
resident. The supervisor starts it, hands it the groups every round, reports its status and
drains it; its probes and store writes run in worker threads, so the supervisor's event loop only
waits.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import asdict
from typing import Any

from scheduler.actors.common import MEMBERSHIP, PING_TIMEOUT, ray
from scheduler.backends.registry import BackendRegistry
from scheduler.config import Settings
from scheduler.membership import MembershipSnapshot
from scheduler.metrics import MonitorMetrics
from scheduler.monitor import HealthMonitor
from scheduler.store.db import Store

log = logging.getLogger("drover.actors.monitor")

#: each round waits the interval times a factor drawn from this range
JITTER = (0.8, 1.2)
#: old votes are pruned once every this many rounds
PRUNE_EVERY = 20


class ClusterMonitor:
    """Probes the clusters of this node's groups, records votes and decides their health."""

    def __init__(self, settings: Settings, metrics: MonitorMetrics | None = None) -> None:
        self._settings = settings
        self._metrics = metrics
        self._backends = BackendRegistry(settings)
        self._monitor = HealthMonitor(
            Store(settings.resolved_database_url),
            self._backends.for_cluster,
            node_id=settings.node_id,
            policy=settings.health_policy,
            probe_timeout=settings.health_probe_timeout,
        )
        self._groups: list[str] = []
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._rounds = 0
        self._last_round: dict[str, Any] = {}

    async def ensure(self, groups: list[str]) -> dict[str, Any]:
        """The supervisor's ping: the groups to watch; (re)starts the loop; returns the status."""
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
        self._monitor.close()
        self._backends.close()

    async def _loop(self) -> None:
        interval = self._settings.health_probe_interval
        await asyncio.sleep(random.uniform(0, interval * (JITTER[1] - JITTER[0])))
        while not self._stopping:
            started = time.monotonic()
            try:
                await self._round()
            except Exception:  # the loop never dies
                log.exception("health round failed")
            elapsed = time.monotonic() - started
            await asyncio.sleep(max(0.0, interval * random.uniform(*JITTER) - elapsed))

    async def _round(self) -> None:
        started = time.monotonic()
        live = await self._live_nodes()
        clusters = await asyncio.to_thread(self._monitor.round, self._groups, live)
        if self._metrics is not None:
            for name, result in clusters.items():
                self._metrics.observe(name, result.ok, result.latency_s)
        self._rounds += 1
        if self._rounds % PRUNE_EVERY == 1:
            try:
                await asyncio.to_thread(self._monitor.prune)
            except Exception:
                log.exception("cannot prune old votes")
        self._last_round = {
            "at": time.time(),
            "seconds": round(time.monotonic() - started, 3),
            "deciding": live is not None,
            "clusters": {name: asdict(r) for name, r in clusters.items()},
        }

    async def _live_nodes(self) -> frozenset[str] | None:
        """The node ids membership sees alive; None when this node cannot tell (no decisions)."""
        try:
            membership = ray.get_actor(MEMBERSHIP)
            snapshot: MembershipSnapshot = await asyncio.wait_for(
                membership.snapshot.remote(), timeout=PING_TIMEOUT
            )
        except Exception as exc:
            log.info("membership is not answering (%s): voting without deciding", exc)
            return None
        return snapshot.live_node_ids()
