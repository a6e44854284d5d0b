"""The node's actors (DESIGN §4). Every Ray call of the scheduler is in this module.

    NodeSupervisor           one per node; starts one JobReconciler per group the node manages,
     └── JobReconciler × G   pings them every second and re-creates any that died; drains on stop.

Actors are restartable (``max_restarts=-1``): a restarted actor reruns its constructor with no
state and recovers everything it needs from the store. Their loops are started lazily by the
first call (``ping``/``nudge``), so a supervisor ping after a restart brings the loop back.
Blocking work (store, clusters) runs in a worker thread; the event loop only waits and wakes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from scheduler.config import Settings
from scheduler.logs import configure_logging

log = logging.getLogger("drover.actors")

# Ray must bind to loopback only; it reads this before it starts (see RUNTIME-NOTES).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import ray  # noqa: E402  (after the environment is set)
from ray.exceptions import RayActorError  # noqa: E402

PING_TIMEOUT = 5.0
SUPERVISE_INTERVAL = 1.0


@ray.remote(max_restarts=-1, max_task_retries=-1, num_cpus=0)
class JobReconciler:
    """Runs ``Reconciler.tick`` for one group every interval, and at once when nudged."""

    def __init__(self, settings: Settings, group: str) -> None:
        configure_logging()
        from scheduler.backends.registry import BackendRegistry
        from scheduler.planning import RestartPolicy
        from scheduler.reconciler import Reconciler
        from scheduler.store.db import Store

        self._group = group
        self._interval = settings.reconcile_interval
        self._reconciler = Reconciler(
            Store(settings.resolved_database_url),
            BackendRegistry(settings),
            node_id=settings.node_id,
            groups=lambda: [group],
            policy=RestartPolicy(
                max_attempts=settings.restart_max_attempts,
                validity_interval=settings.restart_validity_interval,
                backoff_initial=settings.restart_backoff_initial,
                backoff_max=settings.restart_backoff_max,
            ),
        )
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._ticks = 0
        self._last_tick: dict[str, Any] = {}

    def _ensure_loop(self) -> asyncio.Event:
        if self._wake is None:
            self._wake = asyncio.Event()
        if not self._stopping and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._loop())
        return self._wake

    async def _loop(self) -> None:
        wake = self._ensure_loop()
        log.info("reconciler of group %s started", self._group)
        while not self._stopping:
            wake.clear()
            try:
                stats = await asyncio.to_thread(self._reconciler.tick)
                self._ticks += 1
                self._last_tick = {
                    "at": time.time(),
                    "jobs": stats.jobs,
                    "actions": stats.actions,
                    "errors": stats.errors,
                    "seconds": round(stats.seconds, 4),
                }
            except Exception:  # the loop never dies
                log.exception("reconcile tick of group %s failed", self._group)
            # an action usually changes state the next tick should see at once
            timeout = 0.2 if self._last_tick.get("actions") else self._interval
            try:
                await asyncio.wait_for(wake.wait(), timeout=timeout)
            except TimeoutError:
                pass

    async def ping(self) -> dict[str, Any]:
        self._ensure_loop()
        return {"group": self._group, "ticks": self._ticks, "last_tick": self._last_tick}

    async def nudge(self) -> None:
        self._ensure_loop().set()

    async def drain(self) -> None:
        """Stop the loop after the current tick; applications keep running."""
        self._stopping = True
        if self._wake is not None:
            self._wake.set()
        if self._task is not None:
            await asyncio.wait_for(asyncio.shield(self._task), timeout=30)


@ray.remote(max_restarts=-1, max_task_retries=-1, num_cpus=0)
class NodeSupervisor:
    """Starts and watches the node's other actors."""

    def __init__(self, settings: Settings) -> None:
        configure_logging()
        from scheduler.store.db import Store

        self._settings = settings
        self._store = Store(settings.resolved_database_url)
        self._reconcilers: dict[str, Any] = {}
        self._health: dict[str, dict[str, Any]] = {}
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def _ensure_loop(self) -> None:
        if not self._stopping and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._loop())

    def _groups(self) -> list[str]:
        configured = self._settings.group_roles
        if configured:
            return sorted(configured)
        from scheduler.store import repo

        with self._store.session() as session:
            return [g.name for g in repo.list_groups(session)]

    async def _loop(self) -> None:
        while not self._stopping:
            try:
                await self._supervise()
            except Exception:  # the loop never dies
                log.exception("supervision round failed")
            await asyncio.sleep(SUPERVISE_INTERVAL)

    async def _supervise(self) -> None:
        groups = await asyncio.to_thread(self._groups)
        for group in groups:
            if group not in self._reconcilers:
                self._reconcilers[group] = self._spawn(group)
        for group, handle in list(self._reconcilers.items()):
            try:
                self._health[group] = await asyncio.wait_for(
                    handle.ping.remote(), timeout=PING_TIMEOUT
                )
                self._health[group]["alive"] = True
            except (RayActorError, TimeoutError) as exc:
                log.warning("reconciler of group %s is not answering (%s)", group, exc)
                self._health[group] = {"group": group, "alive": False, "error": str(exc)}
                if isinstance(exc, RayActorError) and not _restarting(exc):
                    self._reconcilers[group] = self._spawn(group)

    def _spawn(self, group: str) -> Any:
        log.info("starting the reconciler of group %s", group)
        return JobReconciler.options(  # type: ignore[attr-defined]
            name=f"reconciler:{group}", get_if_exists=True
        ).remote(self._settings, group)

    async def start(self) -> None:
        self._ensure_loop()
        await self._supervise()

    async def nudge(self, group: str) -> None:
        self._ensure_loop()
        handle = self._reconcilers.get(group)
        if handle is None:  # a group created since the last round
            await self._supervise()
            handle = self._reconcilers.get(group)
        if handle is not None:
            handle.nudge.remote()

    async def status(self) -> dict[str, Any]:
        self._ensure_loop()
        return {"reconcilers": dict(self._health)}

    async def drain(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
        await asyncio.gather(
            *(h.drain.remote() for h in self._reconcilers.values()), return_exceptions=True
        )


def _restarting(exc: RayActorError) -> bool:
    from ray.exceptions import ActorUnavailableError

    return isinstance(exc, ActorUnavailableError)


class NodeRuntime:
    """The Ray side of one node process, as the API and the CLI see it."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._supervisor: Any = None

    def start(self) -> None:
        ray.init(
            address="local",
            include_dashboard=False,
            namespace=f"drover-{self._settings.node_id}",
            logging_level=logging.WARNING,
            log_to_driver=True,
        )
        self._supervisor = NodeSupervisor.options(name="supervisor").remote(  # type: ignore[attr-defined]
            self._settings
        )
        ray.get(self._supervisor.start.remote(), timeout=60)

    def nudge(self, group: str) -> None:
        """Fire and forget: the reconciler of ``group`` runs a tick now."""
        if self._supervisor is not None:
            self._supervisor.nudge.remote(group)

    def readiness(self) -> tuple[bool, str]:
        if self._supervisor is None:
            return False, "actors not started"
        try:
            status = ray.get(self._supervisor.status.remote(), timeout=PING_TIMEOUT)
        except Exception as exc:
            return False, f"supervisor not answering: {type(exc).__name__}"
        reconcilers = status["reconcilers"]
        down = sorted(g for g, h in reconcilers.items() if not h.get("alive"))
        if down:
            return False, f"reconcilers down: {', '.join(down)}"
        return True, f"{len(reconcilers)} reconciler(s) up"

    def stop(self) -> None:
        if self._supervisor is not None:
            try:
                ray.get(self._supervisor.drain.remote(), timeout=40)
            except Exception:
                log.exception("drain failed")
        if ray.is_initialized():
            ray.shutdown()
