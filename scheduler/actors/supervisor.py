"""The NodeSupervisor actor: starts the node's other actors and keeps them alive."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ray.exceptions import ActorUnavailableError, RayActorError

from scheduler.actors.common import (
    MEMBERSHIP,
    MONITOR,
    PING_TIMEOUT,
    RECONCILER,
    SUPERVISE_INTERVAL,
    managed_groups,
    ray,
)
from scheduler.actors.membership import Membership
from scheduler.actors.monitor import ClusterMonitor
from scheduler.actors.reconcilers import JobReconciler
from scheduler.config import Settings
from scheduler.epochs import Incarnation
from scheduler.logs import configure_logging
from scheduler.membership import MembershipSnapshot
from scheduler.store import catalog as catalog_store
from scheduler.store.db import Store
from scheduler.store.generations import GenerationResolver

log = logging.getLogger("drover.actors.supervisor")


@ray.remote(max_restarts=-1, max_task_retries=-1, num_cpus=0)
class NodeSupervisor:
    """Starts and watches the node's other actors (membership, reconciler), hosts the cluster
    monitor's loop; drains them all on stop."""

    def __init__(self, settings: Settings) -> None:
        configure_logging()
        self._settings = settings
        self._store = Store(settings.resolved_database_url)
        self._generations = GenerationResolver(self._store, settings.node_id)
        self._reconciler: Any = None
        self._membership: Any = None
        self._monitor: ClusterMonitor | None = None
        self._health: dict[str, dict[str, Any]] = {}
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def _ensure_loop(self) -> None:
        if not self._stopping and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._loop())

    def _groups(self) -> list[str]:
        """The groups this node manages: configured, or else every group in the store."""
        configured = managed_groups(self._settings)
        if configured:
            return sorted(configured)
        with self._store.session() as session:
            return [g.name for g in catalog_store.list_groups(session)]

    async def _loop(self) -> None:
        while not self._stopping:
            try:
                await self._supervise()
            except Exception:  # the loop never dies
                log.exception("supervision round failed")
            await asyncio.sleep(SUPERVISE_INTERVAL)

    async def _supervise(self) -> None:
        try:
            self._health[MEMBERSHIP] = await asyncio.wait_for(
                self._membership.status.remote(), timeout=PING_TIMEOUT
            )
            self._health[MEMBERSHIP]["alive"] = True
        except (RayActorError, TimeoutError) as exc:
            log.warning("membership is not answering (%s)", exc)
            self._health[MEMBERSHIP] = {"alive": False, "error": str(exc)}
        groups = await asyncio.to_thread(self._groups)
        try:
            loops = await asyncio.wait_for(
                self._reconciler.ensure.remote(groups), timeout=PING_TIMEOUT
            )
            self._health[RECONCILER] = {"alive": True, "groups": loops}
        except (RayActorError, TimeoutError) as exc:
            log.warning("the reconciler is not answering (%s)", exc)
            self._health[RECONCILER] = {
                "alive": False,
                "error": str(exc),
                "groups": {g: {"group": g, "alive": False} for g in groups},
            }
            if isinstance(exc, RayActorError) and not isinstance(exc, ActorUnavailableError):
                self._reconciler = self._spawn_reconciler()  # restart budget spent: a new one
        if self._monitor is not None:
            await self._supervise_monitor(groups)

    async def _supervise_monitor(self, groups: list[str]) -> None:
        """The cluster monitor runs in this process: hand it the groups, (re)start its loop."""
        assert self._monitor is not None
        try:
            self._health[MONITOR] = await self._monitor.ensure(groups)
        except Exception as exc:  # supervision never dies with it
            log.exception("the cluster monitor could not be (re)started")
            self._health[MONITOR] = {"alive": False, "error": str(exc)}

    def _spawn_reconciler(self) -> Any:
        return JobReconciler.options(  # type: ignore[attr-defined]
            name=RECONCILER, get_if_exists=True
        ).remote(self._settings)

    async def start(self) -> None:
        """Membership first (raises DuplicateNode), then the reconcile loops."""
        self._membership = Membership.options(  # type: ignore[attr-defined]
            name=MEMBERSHIP, get_if_exists=True
        ).remote(self._settings)
        await self._membership.start.remote()
        self._reconciler = self._spawn_reconciler()
        if self._settings.health_monitor:
            self._monitor = ClusterMonitor(self._settings)
        self._ensure_loop()
        await self._supervise()

    async def nudge(self, group: str) -> None:
        self._ensure_loop()
        loops = self._health.get(RECONCILER, {}).get("groups", {})
        if group not in loops:  # a group created since the last round
            await self._supervise()
        if self._reconciler is not None:
            self._reconciler.nudge.remote(group)

    async def status(self) -> dict[str, Any]:
        """Membership's status, and per group its reconcile loop's ticks and last tick."""
        self._ensure_loop()
        reconciler = self._health.get(RECONCILER, {})
        return {
            "reconcilers": dict(reconciler.get("groups", {})),
            "membership": self._health.get(MEMBERSHIP, {}),
            "monitor": self._health.get(MONITOR, {"alive": False, "error": "not started"}),
        }

    async def resolve_generation(self, group: str, incarnation: Incarnation, cversion: int) -> int:
        """The membership generation of one incarnation of ``group``'s members znode, recorded
        first if no node has yet (asked by Membership's coordinator, whose worker process does
        not load the store)."""
        return await asyncio.to_thread(self._generations, group, incarnation, cversion)

    async def snapshot(self) -> MembershipSnapshot:
        return await self._membership.snapshot.remote()  # type: ignore[no-any-return]

    async def drain(self) -> None:
        """Stop acting (loops finish their tick), then leave ZooKeeper: hand-over."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
        if self._reconciler is not None:
            await asyncio.gather(self._reconciler.drain.remote(), return_exceptions=True)
        if self._monitor is not None:
            await asyncio.gather(self._monitor.drain(), return_exceptions=True)
        if self._membership is not None:
            await asyncio.gather(self._membership.stop.remote(), return_exceptions=True)
