"""One round of the cluster monitor, without Ray: probe, vote, decide
(``scheduler.decisions.health``).

:class:`ClusterMonitor <scheduler.actors.monitor.ClusterMonitor>` (the actor) runs
:meth:`HealthMonitor.round` every probe interval with the live nodes membership sees. A round:

1. observe — the primary and failover clusters of this node's groups;
2. probe every cluster at once in a pool of threads, each bounded by the probe timeout (a probe
   that does not answer in time is a failed vote; ``backend.probe()`` never raises);
3. per cluster: commit this node's vote, then — only when ``live`` is known (standalone, or
   registered and CONNECTED: a node cut off from ZooKeeper does not know who is alive) — read
   the votes of the decision's history and the stored health, let
   :func:`scheduler.decisions.health.decide` say whether the health changes, and write the change
   conditionally on the state decided from (another node that won the race: StaleWrite, decided
   again next round).

One cluster's failing probe or store write never stops the others.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler.core.backend import ClusterBackend, ProbeResult
from scheduler.core.clock import utcnow
from scheduler.core.errors import StaleWrite
from scheduler.core.records import ClusterRecord
from scheduler.decisions.health import HealthPolicy, Vote, decide
from scheduler.store import catalog as catalog_store
from scheduler.store import health as health_store
from scheduler.store.db import Store

log = logging.getLogger("drover.monitor")

#: threads probing clusters at once (a probe mostly waits on the network)
PROBE_THREADS = 16
#: votes are kept at least this long (seconds), whatever the policy looks at
KEEP_VOTES_MIN = 600.0


@dataclass(frozen=True)
class ClusterRound:
    """What one round did for one cluster."""

    ok: bool
    latency_s: float
    detail: str
    #: the cluster's health after the round (``"error"``: the vote could not be recorded)
    health: str
    #: the transition this node recorded, if any (``"NORMAL -> VOTE_ABNORMAL"``)
    changed: str | None = None


class HealthMonitor:
    """Probes the clusters of some groups, records this node's votes, decides their health."""

    def __init__(
        self,
        store: Store,
        backend_for: Callable[[ClusterRecord], ClusterBackend],
        *,
        node_id: str,
        policy: HealthPolicy,
        probe_timeout: float,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._store = store
        self._backend_for = backend_for
        self._node_id = node_id
        self._policy = policy
        self._probe_timeout = probe_timeout
        self._clock = clock
        self._pool = ThreadPoolExecutor(PROBE_THREADS, thread_name_prefix="probe")

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def round(
        self, groups: Collection[str], live: frozenset[str] | None
    ) -> dict[str, ClusterRound]:
        """Probe, vote and (with ``live`` known) decide, for every cluster of ``groups``."""
        clusters = self.clusters(groups)
        results = self.probe_all(clusters)
        done: dict[str, ClusterRound] = {}
        for cluster, result in zip(clusters, results, strict=True):
            try:
                health, changed = self.vote(cluster, result, live)
            except Exception:  # one cluster's store error never stops the others
                log.exception("cluster %s: cannot record the vote", cluster.name)
                health, changed = "error", None
            done[cluster.name] = ClusterRound(
                result.ok, round(result.latency_s, 3), result.detail, health, changed
            )
        return done

    def clusters(self, groups: Collection[str]) -> list[ClusterRecord]:
        """The primary and failover clusters of ``groups``."""
        with self._store.session() as session:
            rows = [g for g in catalog_store.list_groups(session) if g.name in groups]
            names = {g.primary_cluster for g in rows}
            names |= {g.failover_cluster for g in rows if g.failover_cluster is not None}
            return [c for c in catalog_store.list_clusters(session) if c.name in names]

    def groups_of_clusters(self, groups: Collection[str]) -> dict[str, list[str]]:
        """Every group using each cluster of ``groups`` (as primary or failover cluster)."""
        with self._store.session() as session:
            rows = catalog_store.list_groups(session)
        mine = {
            c for g in rows if g.name in groups for c in (g.primary_cluster, g.failover_cluster)
        }
        using: dict[str, list[str]] = {}
        for g in rows:
            for cluster in (g.primary_cluster, g.failover_cluster):
                if cluster is not None and cluster in mine:
                    using.setdefault(cluster, []).append(g.name)
        return using

    def probe_all(self, clusters: list[ClusterRecord]) -> list[ProbeResult]:
        """Every cluster probed at once; each answer waited for at most the probe timeout."""
        started = time.monotonic()
        futures: list[Future[ProbeResult] | Exception] = []
        for cluster in clusters:
            try:
                futures.append(self._pool.submit(self._backend_for(cluster).probe))
            except Exception as exc:  # e.g. a record no backend can be built from
                futures.append(exc)
        results = []
        for future in futures:
            if isinstance(future, Exception):
                results.append(ProbeResult(False, f"cannot probe: {future}", 0.0))
                continue
            remaining = self._probe_timeout - (time.monotonic() - started)
            try:
                results.append(future.result(timeout=max(remaining, 0.0)))
            except FutureTimeout:
                future.cancel()
                elapsed = time.monotonic() - started
                results.append(
                    ProbeResult(False, f"no answer within {self._probe_timeout:g}s", elapsed)
                )
            except Exception as exc:  # a probe never raises; if one does, it failed
                results.append(ProbeResult(False, f"probe failed: {exc!r}", 0.0))
        return results

    def vote(
        self, cluster: ClusterRecord, result: ProbeResult, live: frozenset[str] | None
    ) -> tuple[str, str | None]:
        """Commit the vote, then decide; returns the health after and the change recorded.

        The vote is committed on its own first: a decision that loses the race to another node
        (StaleWrite) never loses the vote with it."""
        now = self._clock()
        vote = Vote(self._node_id, now, result.ok, result.latency_s, result.detail)
        with self._store.transaction() as session:
            health_store.record_vote(session, cluster.name, vote)
        try:
            with self._store.transaction() as session:
                current, _, _ = health_store.health_of(session, cluster.name)
                if live is None:
                    return str(current), None
                since = now - timedelta(seconds=self._policy.history_seconds)
                votes = health_store.votes_since(session, cluster.name, since)
                decision = decide(current, votes, live, now=now, policy=self._policy)
                if decision is None:
                    return str(current), None
                event = health_store.record_decision(
                    session, cluster.name, decision, node_id=self._node_id, now=now
                )
        except StaleWrite as exc:
            log.info(
                "cluster %s: %s; decided again next round",
                cluster.name,
                exc,
                extra={"cluster": cluster.name},
            )
            with self._store.session() as session:
                return str(health_store.health_of(session, cluster.name)[0]), None
        change = f"{decision.old} -> {decision.new}"
        log.warning(
            "cluster %s: %s: %s",
            cluster.name,
            change,
            event.reason,
            extra={
                "cluster": cluster.name,
                "from_state": str(decision.old),
                "to_state": str(decision.new),
            },
        )
        return str(decision.new), change

    def prune(self) -> int:
        """Forget the votes no decision looks at any more."""
        keep = max(2 * self._policy.history_seconds, KEEP_VOTES_MIN)
        with self._store.transaction() as session:
            return health_store.prune_votes(session, self._clock() - timedelta(seconds=keep))
