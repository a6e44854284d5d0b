"""The ClusterMonitor actor: probes the clusters this node's groups use, votes, decides health.

Every round (``DROVER_HEALTH_PROBE_INTERVAL``, jittered by ±20 % so the nodes do not probe in
step) the monitor:

1. observe — reads the clusters of its groups (primary and failover) and membership's snapshot
   (the live nodes: the members of this node's groups; standalone: this node alone);
2. probes every cluster at once, each bounded by ``DROVER_HEALTH_PROBE_TIMEOUT`` (a probe that
   does not answer in time is a failed vote; ``backend.probe()`` never raises);
3. per cluster, in one transaction: records its vote, reads the votes of the decision's history
   and the stored health, and lets :func:`scheduler.health.decide` say whether the health
   changes; a change is written only if the cluster is still in the state decided from
   (``scheduler.store.health.record_decision``), so two nodes deciding at once record it once.

Votes are always recorded; decisions are made only while this node's view of membership is
trustworthy (standalone, or registered and CONNECTED): a node cut off from ZooKeeper does not
know who is alive. One cluster's failing probe or store write never stops the others, and the
loop never dies.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from datetime import timedelta
from typing import Any

from scheduler.actors.common import MEMBERSHIP, PING_TIMEOUT, ray
from scheduler.backends.base import ProbeResult
from scheduler.backends.registry import BackendRegistry
from scheduler.config import Settings
from scheduler.health import Vote, decide
from scheduler.logs import configure_logging
from scheduler.membership import MembershipSnapshot
from scheduler.records import ClusterRecord
from scheduler.store import catalog as catalog_store
from scheduler.store import health as health_store
from scheduler.store.db import Store
from scheduler.store.models import utcnow

log = logging.getLogger("drover.actors.monitor")

#: each round waits the interval times a factor drawn from this range
JITTER = (0.8, 1.2)
#: votes are pruned once every this many rounds
PRUNE_EVERY = 20
#: votes are kept at least this long (seconds), whatever the policy looks at
KEEP_VOTES_MIN = 600.0


@ray.remote(max_restarts=-1, max_task_retries=-1, num_cpus=0)
class ClusterMonitor:
    """Probes the clusters of this node's groups, records votes and decides their health."""

    def __init__(self, settings: Settings) -> None:
        configure_logging()
        self._settings = settings
        self._node_id = settings.node_id
        self._policy = settings.health_policy
        self._store = Store(settings.resolved_database_url)
        self._backends = BackendRegistry(settings)
        self._groups: list[str] = []
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.rounds = 0
        self._last_round: dict[str, Any] = {}

    # -- lifecycle --------------------------------------------------------------------------

    async def ensure(self, groups: list[str]) -> dict[str, Any]:
        """The supervisor's ping: the groups to watch; (re)starts the loop; returns the status."""
        self._groups = sorted(groups)
        if not self._stopping and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._loop())
        return await self.status()

    async def status(self) -> dict[str, Any]:
        return {"alive": True, "rounds": self.rounds, "last_round": dict(self._last_round)}

    async def drain(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
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

    # -- one round --------------------------------------------------------------------------

    async def _round(self) -> None:
        started = time.monotonic()
        clusters = await asyncio.to_thread(self._clusters)
        live = await self._live_nodes()
        results = await asyncio.gather(*(self._probe(c) for c in clusters))
        decided: dict[str, str] = {}
        for cluster, result in zip(clusters, results, strict=True):
            try:
                decided[cluster.name] = await asyncio.to_thread(self._vote, cluster, result, live)
            except Exception:  # one cluster's store error never stops the others
                log.exception("cluster %s: cannot record the vote", cluster.name)
                decided[cluster.name] = "error"
        self.rounds += 1
        if self.rounds % PRUNE_EVERY == 1:
            await asyncio.to_thread(self._prune)
        self._last_round = {
            "at": time.time(),
            "seconds": round(time.monotonic() - started, 3),
            "deciding": live is not None,
            "clusters": {
                c.name: {"ok": r.ok, "latency_s": round(r.latency_s, 3), "health": decided[c.name]}
                for c, r in zip(clusters, results, strict=True)
            },
        }

    def _clusters(self) -> list[ClusterRecord]:
        """The primary and failover clusters of this node's groups."""
        with self._store.session() as session:
            groups = [g for g in catalog_store.list_groups(session) if g.name in self._groups]
            names = {g.primary_cluster for g in groups}
            names |= {g.failover_cluster for g in groups if g.failover_cluster is not None}
            return [c for c in catalog_store.list_clusters(session) if c.name in names]

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

    async def _probe(self, cluster: ClusterRecord) -> ProbeResult:
        timeout = self._settings.health_probe_timeout
        started = time.monotonic()
        try:
            backend = self._backends.for_cluster(cluster)
            return await asyncio.wait_for(asyncio.to_thread(backend.probe), timeout=timeout)
        except TimeoutError:
            return ProbeResult(False, f"no answer within {timeout:g}s", time.monotonic() - started)
        except Exception as exc:  # e.g. a cluster record no backend can be built from
            return ProbeResult(False, f"cannot probe: {exc}", time.monotonic() - started)

    def _vote(
        self, cluster: ClusterRecord, result: ProbeResult, live: frozenset[str] | None
    ) -> str:
        """Record the vote and, with a trustworthy membership view, decide; the health after."""
        now = utcnow()
        vote = Vote(self._node_id, now, result.ok, result.latency_s, result.detail)
        with self._store.transaction() as session:
            health_store.record_vote(session, cluster.name, vote)
            session.flush()
            current, _, _ = health_store.health_of(session, cluster.name)
            if live is None:
                return str(current)
            since = now - timedelta(seconds=self._policy.history_seconds)
            votes = health_store.votes_since(session, cluster.name, since)
            decision = decide(current, votes, live, now=now, policy=self._policy)
            if decision is None:
                return str(current)
            event = health_store.record_decision(
                session, cluster.name, decision, node_id=self._node_id, now=now
            )
        if event is None:
            log.info("cluster %s: another node changed its health first", cluster.name)
            return str(current)
        log.warning(
            "cluster %s: %s -> %s: %s", cluster.name, decision.old, decision.new, event.reason
        )
        return str(decision.new)

    def _prune(self) -> None:
        keep = max(2 * self._policy.history_seconds, KEEP_VOTES_MIN)
        try:
            with self._store.transaction() as session:
                removed = health_store.prune_votes(session, utcnow() - timedelta(seconds=keep))
            log.debug("pruned %d old votes", removed)
        except Exception:
            log.exception("cannot prune old votes")
