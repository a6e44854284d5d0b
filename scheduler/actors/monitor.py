"""The ClusterMonitor: every probe interval (±20 % jitter, so the nodes do not probe in step)
one :meth:`scheduler.loops.monitor.HealthMonitor.round` over the clusters of this node's groups,
with the live nodes membership sees (see :mod:`scheduler.loops.monitor`). The loop never dies.

A loop hosted by the NodeSupervisor in the node process (:mod:`scheduler.actors.hosted`); its
probes and store writes run in worker threads, so the supervisor's event loop only waits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import asdict
from typing import Any

from scheduler.actors.common import MEMBERSHIP, PING_TIMEOUT, ray
from scheduler.actors.hosted import HostedLoop
from scheduler.backends.registry import BackendRegistry
from scheduler.config import Settings
from scheduler.core.metrics import MonitorMetrics
from scheduler.decisions.membership import MembershipSnapshot
from scheduler.loops.monitor import HealthMonitor
from scheduler.store.db import Store

log = logging.getLogger("drover.actors.monitor")

#: each round waits the interval times a factor drawn from this range
JITTER = (0.8, 1.2)
#: old votes are pruned once every this many rounds
PRUNE_EVERY = 20


class ClusterMonitor(HostedLoop):
    """Probes the clusters of this node's groups, records votes and decides their health."""

    kind = "health"
    jitter = JITTER

    def __init__(self, settings: Settings, metrics: MonitorMetrics | None = None) -> None:
        super().__init__(settings.health_probe_interval, log)
        self._metrics = metrics
        self._backends = BackendRegistry(settings)
        self._monitor = HealthMonitor(
            Store(settings.resolved_database_url),
            self._backends.for_cluster,
            node_id=settings.node_id,
            policy=settings.health_policy,
            probe_timeout=settings.health_probe_timeout,
        )

    async def _close(self) -> None:
        self._monitor.close()
        self._backends.close()

    async def _round(self) -> dict[str, Any]:
        started = time.monotonic()
        live = await self._live_nodes()
        clusters = await asyncio.to_thread(self._monitor.round, self._groups, live)
        if self._metrics is not None:
            for name, result in clusters.items():
                self._metrics.observe(name, result.ok, result.latency_s)
        if self._rounds % PRUNE_EVERY == 0:
            try:
                await asyncio.to_thread(self._monitor.prune)
            except Exception:
                log.exception("cannot prune old votes")
        return {
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
