"""The ClusterMonitor: every probe interval (±20 % jitter, so the nodes do not probe in step)
one :meth:`scheduler.loops.monitor.HealthMonitor.round` over the clusters of this node's groups,
with the live nodes membership sees (see :mod:`scheduler.loops.monitor`). The loop never dies.

After each round, on the clusters this node sweeps (one live node per cluster,
:func:`scheduler.decisions.strays.sweeper`) and whose probe succeeded, a stray sweep
(:mod:`scheduler.loops.strays`): live applications of runs Drover has closed -- brought back by a
ResourceManager that recovered them -- are killed again, and second applications of open runs --
a submission whose outcome was unknown that reached the cluster late -- are killed, each recorded
on its job.

A loop hosted by the NodeSupervisor in the node process (:mod:`scheduler.actors.hosted`); its
probes and store writes run in worker threads, so the supervisor's event loop only waits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import asdict
from typing import Any

from scheduler.actors.common import PING_TIMEOUT, membership_actor
from scheduler.actors.hosted import HostedLoop
from scheduler.backends.registry import BackendRegistry
from scheduler.config import Settings
from scheduler.core.metrics import MonitorMetrics
from scheduler.decisions.membership import MembershipSnapshot
from scheduler.decisions.strays import sweeper
from scheduler.loops.monitor import ClusterRound, HealthMonitor
from scheduler.loops.strays import StraySweep
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
        self._node_id = settings.node_id
        store = Store(settings.resolved_database_url)
        self._monitor = HealthMonitor(
            store,
            self._backends.for_cluster,
            node_id=settings.node_id,
            policy=settings.health_policy,
            probe_timeout=settings.health_probe_timeout,
        )
        self._strays = StraySweep(store, self._backends.for_cluster, node_id=settings.node_id)

    async def _close(self) -> None:
        self._monitor.close()
        self._backends.close()

    async def _round(self) -> dict[str, Any]:
        started = time.monotonic()
        snapshot = await self._snapshot()
        live = snapshot.live_node_ids() if snapshot is not None else None
        clusters = await asyncio.to_thread(self._monitor.round, self._groups, live)
        if self._metrics is not None:
            for name, result in clusters.items():
                self._metrics.observe(name, result.ok, result.latency_s)
        swept = await self._sweep(clusters, snapshot if live is not None else None)
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
            "strays": swept,
        }

    async def _sweep(
        self, results: dict[str, ClusterRound], snapshot: MembershipSnapshot | None
    ) -> dict[str, list[str]]:
        """The stray sweeps of the clusters this node sweeps: the strays killed, per cluster
        (none while this node cannot tell who is alive)."""
        if snapshot is None:
            return {}
        members = {g: [m.node_id for m in view.members] for g, view in snapshot.groups.items()}

        def run() -> dict[str, list[str]]:
            swept: dict[str, list[str]] = {}
            homes = self._monitor.groups_of_clusters(self._groups)
            if snapshot.standalone:  # the only node: every group's only member
                members.update({g: [self._node_id] for gs in homes.values() for g in gs})
            for cluster in self._monitor.clusters(self._groups):
                result = results.get(cluster.name)
                if result is None or not result.ok:
                    continue
                if sweeper(cluster.name, homes.get(cluster.name, ()), members) != self._node_id:
                    continue
                try:
                    if self._strays.sweeps(cluster):
                        swept[cluster.name] = [s.app_id for s in self._strays.sweep(cluster)]
                except Exception:  # one cluster's sweep never stops the monitor
                    log.exception("cluster %s: the stray sweep failed", cluster.name)
            return swept

        return await asyncio.to_thread(run)

    async def _snapshot(self) -> MembershipSnapshot | None:
        """What membership sees; None when it does not answer (votes without decisions, no
        sweeps)."""
        try:
            membership = membership_actor()
            snapshot: MembershipSnapshot = await asyncio.wait_for(
                membership.snapshot.remote(), timeout=PING_TIMEOUT
            )
        except Exception as exc:
            log.info("membership is not answering (%s): voting without deciding", exc)
            return None
        return snapshot
