"""The node's actors (DESIGN §4). Every Ray call of the scheduler is in this module.

    NodeSupervisor           one per node; starts Membership, then one JobReconciler per group the
     ├── Membership          node manages; pings them every second and re-creates any that died;
     └── JobReconciler × G   drains on stop (reconcilers first, then membership: hand-over).

Membership holds the node's ZooKeeper session (all of it in ``scheduler.coordination``) and hands
each reconciler its current :class:`~scheduler.ownership.Claim` at the start of every tick: the
pool slot under the group's epoch, with a lease renewed by a ZooKeeper round trip every quarter
session timeout. Without ZooKeeper configured the node is the only member of every group.

Actors are restartable (``max_restarts=-1``): a restarted actor reruns its constructor with no
state and recovers everything it needs from the store. Their loops are started lazily by the
first call (``ping``/``nudge``), so a supervisor ping after a restart brings the loop back.
Blocking work (store, clusters) runs in a worker thread; the event loop only waits and wakes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from scheduler.config import Role, Settings
from scheduler.errors import DroverError
from scheduler.logs import configure_logging

log = logging.getLogger("drover.actors")

# Ray must bind to loopback only; it reads this before it starts (see RUNTIME-NOTES).
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import ray  # noqa: E402  (after the environment is set)
from ray.exceptions import RayActorError, RayTaskError  # noqa: E402

PING_TIMEOUT = 5.0
SUPERVISE_INTERVAL = 1.0
CLAIM_TIMEOUT = 2.0
#: a claim may be acted on for this share of the session timeout after a confirmed round trip
LEASE_SHARE = 0.5
MEMBERSHIP = "membership"


def _reconciler_name(group: str) -> str:
    return f"reconciler:{group}"


def managed_groups(settings: Settings) -> dict[str, Role]:
    """group -> role of this node; with ZooKeeper and no DROVER_GROUPS: ``default:active``."""
    configured: dict[str, Role] = dict(settings.group_roles)
    if not configured and settings.zk_hosts:
        return {"default": "active"}
    return configured


def runtime_py_files() -> tuple[str, ...]:
    """Files every submission ships with the driver: the pipelines' Drover runtime."""
    import pipelines.drover_runtime as runtime

    return (str(runtime.__file__),)


@ray.remote(max_restarts=-1, max_task_retries=-1, num_cpus=0)
class Membership:
    """The node's membership in its groups: ZooKeeper session, views, claims (leases)."""

    def __init__(self, settings: Settings) -> None:
        configure_logging()
        self._settings = settings
        self._groups = managed_groups(settings)
        self._coordinator: Any = None
        self._views: dict[str, Any] = {}
        self._connection = "CONNECTED"
        self._confirmed_at = -math.inf
        self._suspended_since: float | None = None
        self._started = False
        self._in_start = False
        self._starting: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._lease = settings.zk_session_timeout * LEASE_SHARE

    @property
    def standalone(self) -> bool:
        return not self._settings.zk_hosts

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self, wait_for_old_session: bool = True) -> dict[str, Any]:
        """Connect and register (raises DuplicateNode when another live node has this id)."""
        if self._started or self.standalone:
            self._started = True
            self._ensure_loop()
            return await self.status()
        if self._in_start:
            raise RuntimeError("membership is already registering")
        self._in_start = True
        try:
            await self._register(wait_for_old_session)
        finally:
            self._in_start = False
        self._ensure_loop()
        return await self.status()

    async def _register(self, wait_for_old_session: bool) -> None:
        from scheduler.coordination import Coordinator

        loop = asyncio.get_running_loop()
        settings = self._settings

        def deliver(event: Any) -> None:  # on the coordinator's dispatcher thread: only enqueue
            loop.call_soon_threadsafe(self._on_event, event)

        coordinator = Coordinator.from_settings(settings, deliver, groups=self._groups)
        # a node restarted quickly after a crash finds its old session's member znodes for up to
        # a session timeout; a truly live duplicate is still there after that (DuplicateNode)
        wait = settings.zk_session_timeout + 2.0 if wait_for_old_session else 0.0
        try:
            await asyncio.to_thread(
                coordinator.start, settings.zk_session_timeout + 10, wait_for_duplicate=wait
            )
        except BaseException:
            await asyncio.to_thread(coordinator.stop)
            raise
        self._coordinator = coordinator
        self._confirmed_at = time.monotonic()
        self._views.update(coordinator.views())
        self._started = True

    def _ensure_loop(self) -> None:
        if self._stopping:
            return
        if not self._started and not self.standalone:
            if self._in_start:
                return
            # restarted actor: register again in the background (the old session may linger)
            if self._starting is None or self._starting.done():
                self._starting = asyncio.get_running_loop().create_task(self._restart())
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._renew_loop())

    async def _restart(self) -> None:
        try:
            await self.start(wait_for_old_session=True)
        except Exception:
            log.exception("membership could not register again; retried by the next ping")

    async def _renew_loop(self) -> None:
        """Renew the lease: one cheap ZooKeeper round trip every quarter session timeout."""
        interval = self._settings.zk_session_timeout / 4
        while not self._stopping and self._coordinator is not None:
            sent = time.monotonic()
            try:
                await asyncio.wait_for(
                    asyncio.to_thread(self._coordinator.ping), timeout=interval * 2
                )
                if self._connection == "CONNECTED":
                    self._confirmed_at = sent
            except Exception as exc:
                log.debug("lease renewal failed: %s", exc)
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - sent)))

    def _on_event(self, event: Any) -> None:
        """Coordinator events, on the actor's loop, in the order they happened."""
        from scheduler.coordination import ConnectionChanged, Registered, ViewChanged

        if isinstance(event, ConnectionChanged):
            state = str(event.state)
            log.info("ZooKeeper connection %s -> %s", self._connection, state)
            self._connection = state
            if state == "SUSPENDED":
                self._suspended_since = self._suspended_since or time.monotonic()
            elif state == "LOST":
                # our ephemerals are gone: others own our jobs now; nothing until re-registered
                self._views.clear()
                self._confirmed_at = -math.inf
            else:
                self._suspended_since = None
        elif isinstance(event, Registered):
            log.info("registered in ZooKeeper (session %s)", event.session_id)
        elif isinstance(event, ViewChanged):
            old = self._views.get(event.view.group)
            self._views[event.view.group] = event.view
            if self._connection == "CONNECTED":
                self._confirmed_at = time.monotonic()
            if old is None or old.epoch != event.view.epoch:
                log.info(
                    "group %s: epoch %s, members %s",
                    event.view.group,
                    event.view.epoch,
                    [m.node_id for m in event.view.members],
                )
                self._nudge(event.view.group)

    def _nudge(self, group: str) -> None:
        try:
            ray.get_actor(_reconciler_name(group)).nudge.remote()
        except ValueError:
            pass  # not started yet: it claims on its first tick anyway

    async def stop(self) -> None:
        """Leave every group at once (others take over within a second), then close."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
        if self._coordinator is not None:
            await asyncio.to_thread(self._coordinator.stop)
            self._coordinator = None

    # -- queries ----------------------------------------------------------------------------------

    async def claim(self, group: str) -> dict[str, Any]:
        """This node's claim in ``group`` now (None: do nothing), and the API URLs to fence with."""
        from scheduler.ownership import Claim, Fence, claim_for

        self._ensure_loop()
        settings = self._settings
        urls = [settings.resolved_api_url]
        if self.standalone:
            claim: Claim | None = Claim(group, Fence(settings.node_id, 0), 0, 1)
            return {"claim": claim, "api_urls": urls}
        view = self._views.get(group)
        claim = None
        now = time.monotonic()
        if view is not None and self._started:
            members = view.ownership_members
            urls += [m.api_url for m in view.members if m.api_url not in urls]
            if self._connection == "CONNECTED" and now < self._confirmed_at + self._lease:
                claim = claim_for(
                    group,
                    settings.node_id,
                    members,
                    view.epoch,
                    valid_until=self._confirmed_at + self._lease,
                )
            elif self._degraded_now():
                claim = claim_for(
                    group,
                    settings.node_id,
                    members,
                    view.epoch,
                    degraded=True,
                    valid_until=now + self._lease,
                )
        return {"claim": claim, "api_urls": urls}

    async def views(self) -> dict[str, Any]:
        """Plain data for the API: connection, and per group the members, pool and epoch."""
        self._ensure_loop()
        settings = self._settings
        groups: dict[str, Any] = {}
        if self.standalone:
            me = {
                "node_id": settings.node_id,
                "role": "active",
                "az": settings.az,
                "cloud": settings.cloud,
                "api_url": settings.resolved_api_url,
            }
            return {"mode": "standalone", "connection": "NONE", "groups": {}, "self": me}
        for name, view in self._views.items():
            groups[name] = {
                "epoch": view.epoch,
                "members": [dataclasses.asdict(m) for m in view.members],
                "pool": list(view.pool),
            }
        lease_left = self._confirmed_at + self._lease - time.monotonic()
        return {
            "mode": "degraded" if self._degraded_now() else "zookeeper",
            "connection": self._connection,
            "lease_seconds_left": round(max(lease_left, 0.0), 3),
            "groups": groups,
        }

    def _degraded_now(self) -> bool:
        """Configured for degraded mode and ZooKeeper unreachable for longer than a lease."""
        return (
            self._settings.degraded_mode
            and self._connection == "SUSPENDED"
            and self._suspended_since is not None
            and time.monotonic() - self._suspended_since > self._lease
        )

    async def status(self) -> dict[str, Any]:
        self._ensure_loop()
        return {
            "started": self._started,
            "connection": "NONE" if self.standalone else self._connection,
            "groups": sorted(self._groups),
        }


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
        self._settings = settings
        self._interval = settings.reconcile_interval
        self._reconciler = Reconciler(
            Store(settings.resolved_database_url),
            BackendRegistry(settings),
            node_id=settings.node_id,
            group=group,
            claim=self._fetch_claim,
            policy=RestartPolicy(
                max_attempts=settings.restart_max_attempts,
                validity_interval=settings.restart_validity_interval,
                backoff_initial=settings.restart_backoff_initial,
                backoff_max=settings.restart_backoff_max,
            ),
        )
        self._reconciler.py_files = runtime_py_files()
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._ticks = 0
        self._last_tick: dict[str, Any] = {}
        #: the first complete tick under the newest epoch seen: when every job this node owns
        #: since that membership change had been looked at (takeover is done here)
        self._epoch_reconciled: dict[str, Any] = {}

    def _fetch_claim(self) -> Any:
        """The current claim from Membership (runs in the tick's worker thread); None on error."""
        try:
            answer = cast(
                dict[str, Any],
                ray.get(ray.get_actor(MEMBERSHIP).claim.remote(self._group), timeout=CLAIM_TIMEOUT),
            )
        except Exception as exc:
            log.warning("no claim for group %s: membership not answering (%s)", self._group, exc)
            return None
        configured = [u.strip() for u in self._settings.fence_urls.split(",") if u.strip()]
        self._reconciler.fence_urls = tuple(configured or answer["api_urls"])
        return answer["claim"]

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
                    "claimed": stats.claimed,
                    "paused": stats.paused,
                    "seconds": round(stats.seconds, 4),
                    "epoch": stats.epoch,
                }
                done = self._epoch_reconciled.get("epoch")
                if stats.complete and stats.epoch is not None and stats.epoch != done:
                    self._epoch_reconciled = {
                        "epoch": stats.epoch,
                        "at": self._last_tick["at"],
                        "jobs": stats.jobs,
                        "claimed": stats.claimed,
                        "seconds": self._last_tick["seconds"],
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
        return {
            "group": self._group,
            "ticks": self._ticks,
            "last_tick": self._last_tick,
            "epoch_reconciled": self._epoch_reconciled,
        }

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
        self._membership: Any = None
        self._health: dict[str, dict[str, Any]] = {}
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def _ensure_loop(self) -> None:
        if not self._stopping and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._loop())

    def _groups(self) -> list[str]:
        configured = managed_groups(self._settings)
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
        try:
            self._health[MEMBERSHIP] = await asyncio.wait_for(
                self._membership.status.remote(), timeout=PING_TIMEOUT
            )
            self._health[MEMBERSHIP]["alive"] = True
        except (RayActorError, TimeoutError) as exc:
            log.warning("membership is not answering (%s)", exc)
            self._health[MEMBERSHIP] = {"alive": False, "error": str(exc)}
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
            name=_reconciler_name(group), get_if_exists=True
        ).remote(self._settings, group)

    async def start(self) -> None:
        """Membership first (raises DuplicateNode), then the reconcilers."""
        self._membership = Membership.options(  # type: ignore[attr-defined]
            name=MEMBERSHIP, get_if_exists=True
        ).remote(self._settings)
        await self._membership.start.remote()
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
        reconcilers = {g: h for g, h in self._health.items() if g != MEMBERSHIP}
        return {"reconcilers": reconcilers, "membership": self._health.get(MEMBERSHIP, {})}

    async def views(self) -> dict[str, Any]:
        return await self._membership.views.remote()  # type: ignore[no-any-return]

    async def drain(self) -> None:
        """Stop acting (reconcilers finish their tick), then leave ZooKeeper: hand-over."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
        await asyncio.gather(
            *(h.drain.remote() for h in self._reconcilers.values()), return_exceptions=True
        )
        if self._membership is not None:
            await asyncio.gather(self._membership.stop.remote(), return_exceptions=True)


def _restarting(exc: RayActorError) -> bool:
    from ray.exceptions import ActorUnavailableError

    return isinstance(exc, ActorUnavailableError)


class NodeRuntime:
    """The Ray side of one node process, as the API and the CLI see it."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._supervisor: Any = None
        self._forwarder = ThreadPoolExecutor(max_workers=4, thread_name_prefix="nudge-forward")

    def start(self) -> None:
        """Start Ray and the actors; raises DroverError (e.g. DuplicateNode) with its own text."""
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
        try:
            ray.get(self._supervisor.start.remote(), timeout=self._settings.zk_session_timeout + 60)
        except RayTaskError as exc:
            cause = exc.cause if isinstance(exc.cause, DroverError) else None
            if cause is not None:
                raise cause from None
            raise

    def nudge_local(self, group: str) -> None:
        """Fire and forget: this node's reconciler of ``group`` runs a tick now."""
        if self._supervisor is not None:
            self._supervisor.nudge.remote(group)

    def nudge(self, group: str, job: str | None = None) -> None:
        """Wake the owner of ``job`` at once: this node's reconciler, or the owner's over HTTP.

        Never blocks the caller and never fails it: a nudge that cannot be delivered only
        means the owner acts at its next periodic tick.
        """
        target = self._owner_url(group, job) if job is not None else None
        if target is None or job is None:
            self.nudge_local(group)
            return
        self._forwarder.submit(_forward_nudge, target, group, job)

    def _owner_url(self, group: str, job: str) -> str | None:
        """The API URL of ``job``'s owner when it is another node; None for this node/unknown."""
        from scheduler.ownership import owner_of

        try:
            views = self.views()
        except Exception:
            return None
        view = views.get("groups", {}).get(group)
        if not view:
            return None
        owner = owner_of(job, tuple(view["pool"]))
        if owner is None or owner == self._settings.node_id:
            return None
        for member in view["members"]:
            if member["node_id"] == owner:
                return str(member["api_url"])
        return None

    def views(self) -> dict[str, Any]:
        """Membership as this node sees it (mode, connection, per group members/pool/epoch)."""
        if self._supervisor is None:
            return {"mode": "starting", "connection": "NONE", "groups": {}}
        try:
            return ray.get(self._supervisor.views.remote(), timeout=PING_TIMEOUT)  # type: ignore[no-any-return]
        except Exception as exc:
            return {"mode": "unknown", "connection": "UNKNOWN", "groups": {}, "error": repr(exc)}

    def status(self) -> dict[str, Any]:
        """This node's actors: membership, and per group the reconciler's ticks and last tick."""
        if self._supervisor is None:
            return {"reconcilers": {}, "membership": {}}
        try:
            return ray.get(self._supervisor.status.remote(), timeout=PING_TIMEOUT)  # type: ignore[no-any-return]
        except Exception as exc:
            return {"reconcilers": {}, "membership": {}, "error": repr(exc)}

    def readiness(self) -> tuple[bool, str]:
        if self._supervisor is None:
            return False, "actors not started"
        try:
            status = ray.get(self._supervisor.status.remote(), timeout=PING_TIMEOUT)
        except Exception as exc:
            return False, f"supervisor not answering: {type(exc).__name__}"
        membership = status.get("membership", {})
        if not membership.get("alive", True):
            return False, "membership not answering"
        reconcilers = status["reconcilers"]
        down = sorted(g for g, h in reconcilers.items() if not h.get("alive"))
        if down:
            return False, f"reconcilers down: {', '.join(down)}"
        connection = membership.get("connection", "NONE")
        return True, f"{len(reconcilers)} reconciler(s) up; ZooKeeper {connection}"

    def stop(self) -> None:
        """Drain: reconcilers stop acting, membership leaves ZooKeeper, Ray stops."""
        if self._supervisor is not None:
            try:
                ray.get(self._supervisor.drain.remote(), timeout=40)
            except Exception:
                log.exception("drain failed")
        self._forwarder.shutdown(wait=False, cancel_futures=True)
        if ray.is_initialized():
            ray.shutdown()


def _forward_nudge(api_url: str, group: str, job: str) -> None:
    import httpx

    try:
        httpx.post(
            f"{api_url.rstrip('/')}/v1/internal/nudge",
            json={"group": group, "job": job},
            timeout=2.0,
        ).raise_for_status()
    except httpx.HTTPError as exc:
        log.info("nudge of %s for job %s not delivered (%s); its next tick acts", api_url, job, exc)
