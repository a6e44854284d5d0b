"""The operations executor's loop (failovers), hosted by the NodeSupervisor.

A loop hosted by the NodeSupervisor in the node process (:mod:`scheduler.actors.hosted`).
Every ``DROVER_FAILOVER_INTERVAL`` seconds it asks Membership for this node's claim in each group
(an operation is executed by the node holding the slot ``crc32(str(id)) % len(pool)`` of its home
group's pool: :mod:`scheduler.loops.operations`), runs one
:meth:`~scheduler.loops.operations.Executor.round` in a worker thread, and meanwhile (every
``NUDGE_EVERY`` seconds, and at its end) wakes the owners of the jobs the round wrote to: this
node's reconcile loop of their group, or the owning node's over ``POST /v1/internal/nudge``, once
per group and node.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from scheduler.actors.common import MEMBERSHIP, PING_TIMEOUT, RECONCILER, forward_nudge, ray
from scheduler.actors.hosted import HostedLoop, current_claims
from scheduler.backends.registry import ClusterProbe
from scheduler.config import Settings
from scheduler.core.ownership import Claim
from scheduler.decisions.membership import MembershipSnapshot
from scheduler.loops.operations import ADVANCE_THREADS, Executor
from scheduler.loops.replication import ReplicaCheckpoints
from scheduler.store.db import Store
from scheduler.store.operations_ledger import SqlOperationsLedger

log = logging.getLogger("drover.actors.operations")

#: how often the owners of the jobs a round wrote to are woken while it runs (seconds)
NUDGE_EVERY = 0.1


class OperationsExecutor(HostedLoop):
    """Executes this node's operations (failovers) and starts the automatic ones."""

    kind = "operations"
    min_pause = 0.05
    drain_grace = 30.0  # stop after the current round (its writes are whole steps)

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.failover_interval, log)
        self._settings = settings
        # the round's thread and its advancing threads use the store at once
        self._store = Store(settings.resolved_database_url, pool_size=ADVANCE_THREADS + 1)
        self._probe = ClusterProbe(settings)
        self._pending_nudges: set[tuple[str, str]] = set()
        self._nudge_lock = threading.Lock()
        self._executor = Executor(
            SqlOperationsLedger(self._store, node_id=settings.node_id),
            node_id=settings.node_id,
            timing=settings.failover_timing,
            checkpoints=ReplicaCheckpoints(self._store),
            parallelism=settings.failover_parallelism,
            nudge=self._note_nudge,
            probe=self._probe.reachable,
            renew=_fetch_claim,
            auto_cooldown=settings.failover_auto_cooldown,
        )
        self._forwarder = ThreadPoolExecutor(2, thread_name_prefix="operations-nudge")

    async def _close(self) -> None:
        await asyncio.to_thread(self._release)

    def _release(self) -> None:
        self._executor.close()
        self._probe.close()
        self._forwarder.shutdown(wait=False)
        self._store.dispose()

    def _note_nudge(self, group: str, job: str) -> None:
        with self._nudge_lock:
            self._pending_nudges.add((group, job))

    async def _round(self) -> dict[str, Any]:
        claims = await current_claims(self._groups, log)
        running = asyncio.ensure_future(asyncio.to_thread(self._executor.round, claims))
        while not running.done():  # the owners hear of a write while the round goes on
            await asyncio.wait({running}, timeout=NUDGE_EVERY)
            await self._deliver_nudges()
        stats = running.result()
        finished = {
            "at": time.time(),
            "seconds": round(stats.seconds, 4),
            "groups": sorted(claims),
            "operations": stats.executing,
            "advanced": stats.advanced,
            "created": stats.created,
            "errors": stats.errors,
        }
        await self._deliver_nudges()
        return finished

    async def _deliver_nudges(self) -> None:
        with self._nudge_lock:
            nudges, self._pending_nudges = self._pending_nudges, set()
        if not nudges:
            return
        snapshot: MembershipSnapshot | None
        try:
            snapshot = await asyncio.wait_for(
                ray.get_actor(MEMBERSHIP).snapshot.remote(), timeout=PING_TIMEOUT
            )
        except Exception as exc:  # noqa: BLE001 - the owners' next ticks act
            log.info("no membership snapshot for nudges (%s)", exc)
            snapshot = None
        remote: dict[tuple[str, str], str] = {}
        local: set[str] = set()
        for group, job in sorted(nudges):
            url = snapshot.owner_url(group, job) if snapshot is not None else None
            if url is None:
                local.add(group)
            else:
                remote.setdefault((url, group), job)
        if local:
            try:
                reconciler = ray.get_actor(RECONCILER)
                for group in local:
                    reconciler.nudge.remote(group)
            except Exception as exc:  # noqa: BLE001 - its next tick acts
                log.info("cannot nudge this node's reconciler (%s)", exc)
        secret = self._settings.resolved_deployment_secret
        for (url, group), job in remote.items():
            self._forwarder.submit(forward_nudge, url, group, job, secret)


def _fetch_claim(group: str) -> Claim | None:
    """This node's current claim in ``group`` from Membership, for a round whose claim ran out
    (called from the round's worker thread, while the supervisor's event loop goes on); None when
    Membership does not answer."""
    try:
        reply: Any = ray.get_actor(MEMBERSHIP).claim.remote(group)
        answer = cast(
            tuple[Claim | None, tuple[str, ...]], reply.future().result(timeout=PING_TIMEOUT)
        )
    except Exception as exc:  # noqa: BLE001 - the round stops; the next one asks again
        log.info("no claim for group %s: membership not answering (%s)", group, exc)
        return None
    return answer[0]
