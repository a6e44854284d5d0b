"""The NodeSupervisor: starts the node's actors, keeps them alive, and hosts the node's loops.

It is not a Ray actor: it runs in the node process itself (the API's process, the Ray driver),
on an event loop of its own in a thread (:class:`~scheduler.actors.host.LoopThread`, started by
:class:`~scheduler.actors.runtime.NodeRuntime`). A Ray worker process costs a node about 140 MiB
resident; the node process already holds the store, the settings and the backends' code, so the
supervisor and the loops it hosts cost a few MiB there (bench/node_rss.py).

**The one place that hosts the node's loops.** The cluster monitor's loop runs here, the failover
executor's (:class:`~scheduler.actors.operations.OperationsExecutor`), and so does any other
node-level loop (replicator, alert senders): an object with
``ensure(groups) -> status``, ``status()`` and ``drain()`` coroutines, created in :meth:`start`,
handed the groups every supervision round (:meth:`_supervise`), reported by :meth:`status` and
drained by :meth:`drain` -- see :class:`~scheduler.actors.monitor.ClusterMonitor`. Such a loop
never blocks the event loop (blocking work goes to ``asyncio.to_thread``) and never dies.

The node dies with this process, so nothing restarts the supervisor itself; its loop never dies
(each round guarded and logged). It re-creates an actor whose restart budget is spent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from prometheus_client import CollectorRegistry
from ray.exceptions import ActorUnavailableError, RayActorError

from scheduler.actors.alerts import AlertLoop
from scheduler.actors.common import (
    LEASE_SHARE,
    MEMBERSHIP,
    MONITOR,
    PING_TIMEOUT,
    RECONCILER,
    REPLICATION,
    SUPERVISE_INTERVAL,
    managed_groups,
)
from scheduler.actors.hosted import HostedLoop
from scheduler.actors.membership import Membership
from scheduler.actors.monitor import ClusterMonitor
from scheduler.actors.operations import OperationsExecutor
from scheduler.actors.reconcilers import JobReconciler
from scheduler.actors.replicator import ReplicationLoop
from scheduler.config import Settings
from scheduler.core.metrics import (
    ActorMetrics,
    AlertMetrics,
    MonitorMetrics,
    actor_up_family,
    families_of,
    membership_families,
)
from scheduler.decisions.membership import MembershipSnapshot
from scheduler.store import catalog as catalog_store
from scheduler.store.db import Store

log = logging.getLogger("drover.actors.supervisor")

#: the failover executor's entry in the status
OPERATIONS = "operations"
#: the alert loop's name in the supervisor's health
ALERTS = "alerts"

#: seconds a new actor may take to answer its first call (worker process start and imports)
ACTOR_START_TIMEOUT = 60.0
#: the longest Membership holds a read of its snapshot for the API (``latest_snapshot``) when
#: nothing changes (``Membership.next_snapshot``): a change is read at once, and a snapshot is
#: never older than this while Membership answers
SNAPSHOT_INTERVAL = 1.0
#: seconds before the snapshot is read again after a read that failed
SNAPSHOT_RETRY = 0.25
#: seconds for which a supervision round takes Membership's status as the snapshot loop last
#: read it (with the snapshot); older, the round asks Membership itself
STATUS_MAX_AGE = SNAPSHOT_INTERVAL + 1.0


class NodeSupervisor:
    """Starts and watches the node's actors (membership, reconciler), hosts the node's loops (the
    cluster monitor's); drains them all on stop. Its coroutines run on one event loop."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._store = Store(settings.resolved_database_url)
        self._reconciler: Any = None
        self._membership: Any = None
        self._monitor: ClusterMonitor | None = None
        self._replication: ReplicationLoop | None = None
        self._operations: OperationsExecutor | None = None
        self._health: dict[str, dict[str, Any]] = {}
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        #: the figures of this process's loops (the cluster monitor's); see collect_metrics()
        self._registry = CollectorRegistry(auto_describe=False)
        self._monitor_metrics = MonitorMetrics(self._registry)
        self._alert_metrics = AlertMetrics(self._registry)
        self._alerts: AlertLoop | None = None
        self._metrics = ActorMetrics()
        self._metrics_task: asyncio.Task[None] | None = None
        #: Membership's last snapshot and when it was read (monotonic); see latest_snapshot()
        self._snapshot: tuple[MembershipSnapshot | None, float] = (None, -float("inf"))
        #: Membership's status as the snapshot loop last read it, and when (monotonic)
        self._membership_status: tuple[dict[str, Any] | None, float] = (None, -float("inf"))
        self._snapshot_task: asyncio.Task[None] | None = None

    def _ensure_loop(self) -> None:
        if not self._stopping and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._loop())
        if not self._stopping and (self._metrics_task is None or self._metrics_task.done()):
            self._metrics_task = asyncio.get_running_loop().create_task(self._metrics_loop())
        if not self._stopping and (self._snapshot_task is None or self._snapshot_task.done()):
            self._snapshot_task = asyncio.get_running_loop().create_task(self._snapshot_loop())

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
            cached, read_at = self._membership_status
            if cached is not None and time.monotonic() - read_at <= STATUS_MAX_AGE:
                status = cached
            else:  # the snapshot loop has not read it lately: ask (and so learn why not)
                status = await asyncio.wait_for(
                    self._membership.status.remote(), timeout=PING_TIMEOUT
                )
            self._health[MEMBERSHIP] = {**status, "alive": True}
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
        hosted: list[tuple[str, HostedLoop | None, str]] = [
            (MONITOR, self._monitor, "the cluster monitor"),
            (REPLICATION, self._replication, "the replication loop"),
            (OPERATIONS, self._operations, "the operations executor"),
            (ALERTS, self._alerts, "the alert loop"),
        ]
        for key, loop, what in hosted:
            if loop is not None:
                await self._supervise_hosted(key, loop, groups, what)

    async def _supervise_hosted(
        self, key: str, loop: HostedLoop, groups: list[str], what: str
    ) -> None:
        """A loop hosted in this process: hand it the groups, (re)start it; its health under
        ``key``."""
        try:
            self._health[key] = await loop.ensure(groups)
        except Exception as exc:  # supervision never dies with it
            log.exception("%s could not be (re)started", what)
            self._health[key] = {"alive": False, "error": str(exc)}

    def _spawn_reconciler(self) -> Any:
        return JobReconciler.options(  # type: ignore[attr-defined]
            name=RECONCILER, get_if_exists=True
        ).remote(self._settings)

    async def start(self) -> None:
        """The reconciler actor (it holds the store Membership resolves generations through),
        then Membership (raises DuplicateNode), then the reconcile loops and the hosted loops."""
        self._reconciler = self._spawn_reconciler()
        # up before Membership asks it for generations (a worker process takes a few seconds to
        # start on a busy machine; the coordinator's own wait for an answer is shorter)
        await asyncio.wait_for(self._reconciler.ping.remote(), timeout=ACTOR_START_TIMEOUT)
        self._membership = Membership.options(  # type: ignore[attr-defined]
            name=MEMBERSHIP, get_if_exists=True
        ).remote(self._settings.membership_settings())
        await self._membership.start.remote()
        if self._settings.health_monitor:
            self._monitor = ClusterMonitor(self._settings, self._monitor_metrics)
        if self._settings.replication:
            self._replication = ReplicationLoop(self._settings)
        if self._settings.failover_executor:
            self._operations = OperationsExecutor(self._settings)
        if self._settings.alerts:
            self._alerts = AlertLoop(
                self._store,
                node_id=self._settings.node_id,
                interval=self._settings.alert_interval,
                metrics=self._alert_metrics,
                destinations=self._settings.alert_destinations,
            )
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
            "replication": self._health.get(REPLICATION, {"alive": False, "error": "not started"}),
            "operations": self._health.get(OPERATIONS, {"alive": False, "error": "not started"}),
            "alerts": self._health.get(ALERTS, {"alive": False, "error": "not started"}),
        }

    # -- metrics ------------------------------------------------------------------------------

    def latest_metrics(self) -> ActorMetrics:
        """The last collection of the actors' figures (any thread; never waits on an actor)."""
        return self._metrics

    async def _metrics_loop(self) -> None:
        """Collect the actors' figures every ``DROVER_METRICS_INTERVAL`` seconds, so ``/metrics``
        serves them without a call to an actor on its request path."""
        while not self._stopping:
            try:
                await self.collect_metrics()
            except Exception:  # the loop never dies
                log.exception("collecting the actors' metrics failed")
            await asyncio.sleep(self._settings.metrics_interval)

    async def collect_metrics(self) -> ActorMetrics:
        """Ask the reconciler for its figures and membership for its snapshot, at once and
        each within the ping timeout; an actor that does not answer is left out
        (``drover_actor_up`` says which)."""
        started = time.monotonic()
        errors: list[str] = []

        async def ask(what: str, call: Any) -> Any:
            if call is None:
                return None
            try:
                return await asyncio.wait_for(call, timeout=PING_TIMEOUT)
            except Exception as exc:  # noqa: BLE001 - the figures are left out, and said so
                errors.append(f"{what}: {type(exc).__name__}: {exc}")
                return None

        loops, snapshot = await asyncio.gather(
            ask("reconciler", self._reconciler.metrics.remote() if self._reconciler else None),
            ask("membership", self._membership.snapshot.remote() if self._membership else None),
        )
        lease = self._settings.zk_session_timeout * LEASE_SHARE
        families: list[Any] = [actor_up_family(self._actor_health())]
        families += membership_families(snapshot, lease_seconds=lease)
        families += loops or []
        families += families_of(self._registry)
        now = time.monotonic()
        self._metrics = ActorMetrics(families, now, now - started, "; ".join(errors) or None)
        return self._metrics

    def _actor_health(self) -> dict[str, dict[str, Any]]:
        health = {
            MEMBERSHIP: self._health.get(MEMBERSHIP, {"alive": False}),
            RECONCILER: self._health.get(RECONCILER, {"alive": False}),
        }
        if self._monitor is not None:
            health[MONITOR] = self._health.get(MONITOR, {"alive": False})
        return health

    def latest_snapshot(self) -> tuple[MembershipSnapshot | None, float]:
        """Membership's snapshot as last read, and when (``time.monotonic()``; None before the
        first read). Any thread; never waits on an actor: what the API's request paths use
        (finding a job's owner to nudge, ``/v1/nodes``), so no request waits on Ray."""
        return self._snapshot

    async def _snapshot_loop(self) -> None:
        """Keep Membership's snapshot and status read: one call at a time that Membership
        answers when they change or after ``SNAPSHOT_INTERVAL`` (``Membership.next_snapshot``);
        a read that fails leaves the last one, which then ages, and is tried again after
        ``SNAPSHOT_RETRY``."""
        failing = False
        seen: tuple[int, int] | None = None
        while not self._stopping:
            try:
                if self._membership is None:
                    await asyncio.sleep(SNAPSHOT_RETRY)
                    continue
                seen, snapshot, status = await asyncio.wait_for(
                    self._membership.next_snapshot.remote(seen, SNAPSHOT_INTERVAL),
                    timeout=SNAPSHOT_INTERVAL + PING_TIMEOUT,
                )
                now = time.monotonic()
                self._snapshot = (snapshot, now)
                self._membership_status = (status, now)
                failing = False
            except Exception as exc:  # the loop never dies; supervision reports the actor
                if not failing:
                    log.info("membership snapshot not read (%s: %s)", type(exc).__name__, exc)
                failing = True
                seen = None
                await asyncio.sleep(SNAPSHOT_RETRY)

    async def set_draining(self, draining: bool) -> dict[str, Any]:
        """Drain or undrain this node's membership (an operator's maintenance hand-over)."""
        return await self._membership.set_draining.remote(draining)  # type: ignore[no-any-return]

    async def drain(self) -> None:
        """Stop acting (loops finish their tick), then leave ZooKeeper: hand-over."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
        if self._metrics_task is not None:
            self._metrics_task.cancel()
        if self._snapshot_task is not None:
            self._snapshot_task.cancel()
        if self._reconciler is not None:
            await asyncio.gather(self._reconciler.drain.remote(), return_exceptions=True)
        if self._monitor is not None:
            await asyncio.gather(self._monitor.drain(), return_exceptions=True)
        if self._replication is not None:
            await asyncio.gather(self._replication.drain(), return_exceptions=True)
        if self._operations is not None:
            await asyncio.gather(self._operations.drain(), return_exceptions=True)
        if self._alerts is not None:
            await asyncio.gather(self._alerts.drain(), return_exceptions=True)
        if self._membership is not None:
            await asyncio.gather(self._membership.stop.remote(), return_exceptions=True)
        await asyncio.to_thread(self._store.dispose)
