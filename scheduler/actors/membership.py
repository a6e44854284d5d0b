"""The Membership actor: the node's ZooKeeper session, its views of its groups, and claims.

The session and every ZooKeeper call live in :mod:`scheduler.coordination.zookeeper`; the decisions
(which claim, degraded or not) are the pure functions of :mod:`scheduler.decisions.membership`. This
actor only keeps the inputs of those decisions current: the connection state (the coordinator's
:class:`~scheduler.decisions.membership.Connection`, in the order the events happened), the views,
and the lease — renewed by one cheap ZooKeeper round trip every quarter session timeout and valid
for ``LEASE_SHARE`` of the session timeout, on the monotonic clock so a thawed node finds it
expired.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from typing import Any

from ray.exceptions import RayError, RayTaskError

from scheduler.actors.common import LEASE_SHARE, RECONCILER, managed_groups, ray
from scheduler.coordination.zookeeper import (
    ConnectionChanged,
    Coordinator,
    Registered,
    ViewChanged,
)
from scheduler.core.errors import Conflict, CoordinationUnavailable, DroverError
from scheduler.core.logs import configure_from
from scheduler.core.ownership import Claim
from scheduler.decisions.epochs import Incarnation
from scheduler.decisions.membership import (
    Connection,
    GroupView,
    LeaseState,
    MembershipSettings,
    MembershipSnapshot,
    Mode,
    NodeCard,
    decide_claim,
    degraded_now,
)

log = logging.getLogger("drover.actors.membership")

#: seconds the coordinator waits for the reconciler actor to resolve one membership generation
GENERATION_TIMEOUT = 10.0
#: how long a booting node retries registering while coordination is unavailable (within the
#: supervisor's start deadline of a session timeout + 60 s)
REGISTER_RETRY_SECONDS = 40.0
#: seconds past the instant the snapshot's mode turns DEGRADED at which a waiting
#: :meth:`Membership.next_snapshot` answers (so that it reads the new mode)
DEGRADED_MARGIN = 0.01


def resolve_generation(group: str, incarnation: Incarnation, cversion: int) -> int:
    """The membership generation of one incarnation of ``group``'s members znode, from the
    node's reconciler actor, which holds the node's store (this worker stays free of the store
    and SQLAlchemy: about 40 MiB less resident memory).

    Runs on the coordinator's worker thread, where a blocking wait is fine; a failure is a
    DroverError, and the coordinator reads the group again a second later. It waits on the
    reply's future, not ``ray.get``: this is an async actor's process, where Ray takes any
    ``ray.get`` for one that blocks the event loop (and warns), even from another thread."""
    try:
        reconciler = ray.get_actor(RECONCILER)
        reply: Any = reconciler.resolve_generation.remote(group, incarnation, cversion)
        answer: Any = reply.future().result(timeout=GENERATION_TIMEOUT)
    except RayTaskError as exc:
        if isinstance(exc.cause, DroverError):
            raise exc.cause from None
        raise CoordinationUnavailable(f"resolving a membership generation failed: {exc}") from exc
    except (RayError, ValueError, TimeoutError) as exc:  # ValueError: no such actor (yet)
        raise CoordinationUnavailable(
            f"the node's reconciler did not resolve a membership generation: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return int(answer)


@ray.remote(max_restarts=-1, max_task_retries=-1, num_cpus=0)
class Membership:
    """The node's membership in its groups: ZooKeeper session, views, claims (leases)."""

    def __init__(self, settings: MembershipSettings) -> None:
        configure_from(settings, "membership")
        self._settings = settings
        self._groups = managed_groups(settings)
        self._coordinator: Coordinator | None = None
        self._views: dict[str, GroupView] = {}
        self._connection = Connection.CONNECTED
        self._confirmed_at = -math.inf
        self._suspended_since: float | None = None
        self._started = False
        self._in_start = False
        self._starting: asyncio.Task[None] | None = None
        #: what :meth:`next_snapshot` callers compare: this actor's instance and its count of
        #: changes to the snapshot's inputs (events, registration, draining)
        self._changes = (time.time_ns(), 0)
        self._changed: asyncio.Event | None = None  # set at each change (the actor's loop)
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._lease = settings.zk_session_timeout * LEASE_SHARE
        self._renew_now: asyncio.Event | None = None  # wakes the lease renewal (its loop's)

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
            await self._register_with_retries(wait_for_old_session)
        finally:
            self._in_start = False
        self._ensure_loop()
        return await self.status()

    async def _register_with_retries(self, wait_for_old_session: bool) -> None:
        """:meth:`_register`, again with backoff while coordination is unavailable at boot (the
        store restarting while a membership generation is resolved, ZooKeeper not up yet) for
        up to ``REGISTER_RETRY_SECONDS``; DuplicateNode and other errors are not retried."""
        deadline = time.monotonic() + REGISTER_RETRY_SECONDS
        pause = 0.5
        while True:
            try:
                await self._register(wait_for_old_session)
                return
            except CoordinationUnavailable as exc:
                if time.monotonic() + pause >= deadline:
                    raise
                log.warning("registering in ZooKeeper failed (%s); again in %.1fs", exc, pause)
            await asyncio.sleep(pause)  # backoff between attempts, not a synchronisation
            pause = min(pause * 2, 5.0)

    async def _register(self, wait_for_old_session: bool) -> None:
        loop = asyncio.get_running_loop()
        settings = self._settings

        def deliver(event: Any) -> None:  # on the coordinator's dispatcher thread: only enqueue
            loop.call_soon_threadsafe(self._on_event, event)

        coordinator = Coordinator.from_settings(
            settings, deliver, groups=self._groups, resolve_generation=resolve_generation
        )
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
        self._mark_changed()

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
        """Renew the lease: one cheap ZooKeeper round trip every quarter session timeout, and at
        once when the connection comes back. A lease that was not valid and now is (back from
        SUSPENDED or LOST) wakes the reconcilers: they claim now, not at their next tick."""
        interval = self._settings.zk_session_timeout / 4
        renew_now = self._renew_now = asyncio.Event()
        while not self._stopping and self._coordinator is not None:
            renew_now.clear()
            sent = time.monotonic()
            try:
                await asyncio.wait_for(
                    asyncio.to_thread(self._coordinator.ping), timeout=interval * 2
                )
                if self._connection == Connection.CONNECTED:
                    lapsed = sent >= self._confirmed_at + self._lease
                    self._confirmed_at = sent
                    if lapsed:
                        self._mark_changed()
                        for group in self._views:
                            self._nudge(group)
            except Exception as exc:
                log.debug("lease renewal failed: %s", exc)
            try:
                await asyncio.wait_for(
                    renew_now.wait(), timeout=max(0.0, interval - (time.monotonic() - sent))
                )
            except TimeoutError:
                pass

    def _on_event(self, event: Any) -> None:
        """Coordinator events, on the actor's loop, in the order they happened."""
        self._mark_changed()
        if isinstance(event, ConnectionChanged):
            state = Connection(event.state)
            log.info("ZooKeeper connection %s -> %s", self._connection, state)
            self._connection = state
            if state == Connection.SUSPENDED:
                self._suspended_since = self._suspended_since or time.monotonic()
            elif state == Connection.LOST:
                # our ephemerals are gone: others own our jobs now; nothing until re-registered
                self._views.clear()
                self._confirmed_at = -math.inf
            else:
                self._suspended_since = None
                if self._renew_now is not None:
                    self._renew_now.set()  # renew the lease now: claims resume at once
        elif isinstance(event, Registered):
            log.info("registered in ZooKeeper (session %s)", event.session_id)
        elif isinstance(event, ViewChanged):
            old = self._views.get(event.view.group)
            self._views[event.view.group] = event.view
            if self._connection == Connection.CONNECTED:
                self._confirmed_at = time.monotonic()
            if old is None or old.epoch != event.view.epoch:
                log.info(
                    "group %s: epoch %s (membership generation %s, cversion %s), members %s",
                    event.view.group,
                    event.view.epoch,
                    event.view.generation,
                    event.view.cversion,
                    list(event.view.node_ids),
                )
                self._nudge(event.view.group)

    def _nudge(self, group: str) -> None:
        try:
            ray.get_actor(RECONCILER).nudge.remote(group)
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

    def _lease_state(self) -> LeaseState | None:
        if self.standalone:
            return None
        return LeaseState(
            self._started, self._connection, self._confirmed_at, self._suspended_since
        )

    async def claim(self, group: str) -> tuple[Claim | None, tuple[str, ...]]:
        """This node's claim in ``group`` now (None: do nothing), and the API URLs to fence with."""
        self._ensure_loop()
        snapshot = self._snapshot()
        claim = decide_claim(
            group,
            self._settings.node_id,
            self._views.get(group),
            self._lease_state(),
            now=time.monotonic(),
            lease_seconds=self._lease,
            degraded_mode=self._settings.degraded_mode,
        )
        return claim, snapshot.api_urls(group)

    def _this_node(self) -> NodeCard:
        settings = self._settings
        groups = {g: str(role) for g, role in self._groups.items()}
        return NodeCard(
            settings.node_id, settings.resolved_api_url, settings.az, settings.cloud, None, groups
        )

    def _snapshot(self) -> MembershipSnapshot:
        if self.standalone:
            return MembershipSnapshot(Mode.STANDALONE, "NONE", self._this_node())
        state = self._lease_state()
        assert state is not None
        now = time.monotonic()
        degraded = degraded_now(
            state, now=now, lease_seconds=self._lease, degraded_mode=self._settings.degraded_mode
        )
        lease_left = self._confirmed_at + self._lease - now
        age = now - self._confirmed_at
        return MembershipSnapshot(
            Mode.DEGRADED if degraded else Mode.ZOOKEEPER,
            str(self._connection),
            self._this_node(),
            dict(self._views),
            round(max(lease_left, 0.0), 3),
            lease_age_seconds=round(age, 3) if math.isfinite(age) else None,
        )

    async def snapshot(self) -> MembershipSnapshot:
        """Membership as this node sees it now (one typed value; see
        scheduler.decisions.membership)."""
        self._ensure_loop()
        return self._snapshot()

    def _mark_changed(self) -> None:
        """An input of the snapshot changed: wake the callers of :meth:`next_snapshot`."""
        instance, count = self._changes
        self._changes = (instance, count + 1)
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _until_degraded(self) -> float | None:
        """Seconds until the snapshot's mode turns DEGRADED with nothing else happening (the
        lease of a suspended connection runs out), None when it will not by time alone."""
        if not self._settings.degraded_mode or self._suspended_since is None:
            return None
        if self._connection != Connection.SUSPENDED:
            return None
        left = self._suspended_since + self._lease - time.monotonic()
        return left + DEGRADED_MARGIN if left >= 0 else None

    async def next_snapshot(
        self, seen: tuple[int, int] | None, wait: float
    ) -> tuple[tuple[int, int], MembershipSnapshot, dict[str, Any]]:
        """The snapshot and the :meth:`status` as soon as they differ from those read with
        ``seen`` (what an earlier call returned), or after ``wait`` seconds: one waiting call
        instead of reads every fraction of a second. A change of connection, views,
        registration or draining answers at once, so does the moment the mode turns DEGRADED;
        the lease figures (which move with the clock) are those of the moment of the answer."""
        self._ensure_loop()
        if seen != self._changes:
            return self._changes, self._snapshot(), self._status()
        until = self._until_degraded()
        if self._changed is None:
            self._changed = asyncio.Event()
        changed = self._changed
        timeout = wait if until is None else min(wait, until)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), timeout=timeout)
        return self._changes, self._snapshot(), self._status()

    async def status(self) -> dict[str, Any]:
        self._ensure_loop()
        return self._status()

    def _status(self) -> dict[str, Any]:
        return {
            "started": self._started,
            "connection": "NONE" if self.standalone else str(self._connection),
            "groups": sorted(self._groups),
            "draining": self._coordinator is not None and self._coordinator.draining,
        }

    async def set_draining(self, draining: bool) -> dict[str, Any]:
        """Drain this node (it stays a live member in no pool: the others take its jobs, which
        keep running) or undrain it; see ``Coordinator.set_draining``. Refused (Conflict) for a
        node without ZooKeeper, the only member of its groups."""
        if self.standalone:
            raise Conflict(
                f"node {self._settings.node_id} runs without ZooKeeper: it is its groups' only "
                "member, there is nobody to hand its jobs to"
            )
        coordinator = self._coordinator
        if coordinator is None:
            raise CoordinationUnavailable("membership is not registered in ZooKeeper yet")
        views = await asyncio.to_thread(coordinator.set_draining, draining)
        for group, view in views.items():
            self._views[group] = view
            self._nudge(group)
        self._mark_changed()
        return await self.status()
