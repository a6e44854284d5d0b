"""The operations executor's loop (failovers), hosted by the NodeSupervisor.

Like the ClusterMonitor it is an asynchronous component on the supervisor's event loop in the
node process, not a Ray actor of its own (a Ray worker process costs a node ~140 MiB resident):
the supervisor creates it, hands it the groups every supervision round (:meth:`ensure`), reports
its :meth:`status` and drains it. Every ``DROVER_FAILOVER_INTERVAL`` seconds it asks Membership
for this node's claim in each group (an operation is executed by the node holding the slot
``crc32(str(id)) % len(pool)`` of its home group's pool: :mod:`scheduler.operations.executor`),
runs one :meth:`~scheduler.operations.executor.Executor.round` in a worker thread, then wakes the
owners of the jobs the round wrote to: this node's reconcile loop of their group, or the owning
node's over ``POST /v1/internal/nudge``, once per group and node. The loop never dies.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from scheduler.actors.common import MEMBERSHIP, PING_TIMEOUT, RECONCILER, ray
from scheduler.backends.registry import BackendRegistry
from scheduler.config import Settings
from scheduler.membership import MembershipSnapshot
from scheduler.operations.executor import Executor
from scheduler.ownership import Claim
from scheduler.store.db import Store

log = logging.getLogger("drover.actors.operations")


class OperationsExecutor:
    """Executes this node's operations (failovers) and starts the automatic ones."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._store = Store(settings.resolved_database_url)
        self._backends = BackendRegistry(settings)
        self._pending_nudges: set[tuple[str, str]] = set()
        self._nudge_lock = threading.Lock()
        self._executor = Executor(
            self._store,
            node_id=settings.node_id,
            timing=settings.failover_timing,
            parallelism=settings.failover_parallelism,
            nudge=self._note_nudge,
            probe=lambda cluster: self._backends.for_cluster(cluster).probe().ok,
        )
        self._forwarder = ThreadPoolExecutor(2, thread_name_prefix="operations-nudge")
        self._groups: list[str] = []
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._rounds = 0
        self._last_round: dict[str, Any] = {}

    async def ensure(self, groups: list[str]) -> dict[str, Any]:
        """The supervisor's ping: the groups to act in; (re)starts the loop; returns the status."""
        self._groups = sorted(groups)
        if not self._stopping and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._loop())
        return await self.status()

    async def status(self) -> dict[str, Any]:
        alive = self._task is not None and not self._task.done()
        return {"alive": alive, "rounds": self._rounds, "last_round": dict(self._last_round)}

    async def drain(self) -> None:
        """Stop after the current round (its writes are whole steps)."""
        self._stopping = True
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), timeout=30)
            except Exception:  # noqa: BLE001 - stopping anyway
                self._task.cancel()
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        self._executor.close()
        self._backends.close()
        self._forwarder.shutdown(wait=False)
        self._store.dispose()

    def _note_nudge(self, group: str, job: str) -> None:
        with self._nudge_lock:
            self._pending_nudges.add((group, job))

    async def _loop(self) -> None:
        interval = self._settings.failover_interval
        while not self._stopping:
            started = time.monotonic()
            try:
                claims = await self._claims()
                stats = await asyncio.to_thread(self._executor.round, claims)
                self._rounds += 1
                self._last_round = {
                    "at": time.time(),
                    "seconds": round(stats.seconds, 4),
                    "groups": sorted(claims),
                    "operations": stats.executing,
                    "advanced": stats.advanced,
                    "created": stats.created,
                    "errors": stats.errors,
                }
                await self._deliver_nudges()
            except Exception:  # the loop never dies
                log.exception("operations round failed")
            elapsed = time.monotonic() - started
            await asyncio.sleep(max(0.05, interval - elapsed))

    async def _claims(self) -> dict[str, Claim]:
        """This node's claim in each of its groups now (Membership's decision, as a reconcile
        tick takes it); a group without one is left out."""
        try:
            membership = ray.get_actor(MEMBERSHIP)
        except Exception as exc:  # noqa: BLE001 - not up (yet): no claims, nothing done
            log.info("membership is not answering (%s): no operations this round", exc)
            return {}
        claims: dict[str, Claim] = {}
        for group in self._groups:
            try:
                answer: tuple[Claim | None, tuple[str, ...]] = await asyncio.wait_for(
                    membership.claim.remote(group), timeout=PING_TIMEOUT
                )
                claim = answer[0]
            except Exception as exc:  # noqa: BLE001 - no claim this round
                log.info("no claim for group %s (%s)", group, exc)
                continue
            if claim is not None:
                claims[group] = claim
        return claims

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
            self._forwarder.submit(_forward_nudge, url, group, job, secret)


def _forward_nudge(api_url: str, group: str, job: str, secret: str) -> None:
    import httpx

    from scheduler.identity import NODE_SECRET_HEADER

    try:
        httpx.post(
            f"{api_url.rstrip('/')}/v1/internal/nudge",
            json={"group": group, "job": job},
            headers={NODE_SECRET_HEADER: secret},
            timeout=2.0,
            trust_env=False,
        ).raise_for_status()
    except httpx.HTTPError as exc:
        log.info("nudge of %s for job %s not delivered (%s); its next tick acts", api_url, job, exc)
