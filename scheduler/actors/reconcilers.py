"""The JobReconciler actor: one reconcile loop per group this node manages, in one process.

A group costs a loop (an asyncio task and a :class:`~scheduler.loops.reconciler.Reconciler`), not a
Ray worker process: a node in 50 groups runs 50 loops here. Each loop runs ``Reconciler.tick``
every interval and at once when nudged; ticks run in a bounded pool of worker threads (blocking
store and cluster I/O never runs on the event loop). One group's failing tick never stops another
group's loop, and no loop ever dies from an exception.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

from scheduler.actors.common import CLAIM_TIMEOUT, membership_actor, ray, runtime_py_files
from scheduler.backends.registry import BackendRegistry
from scheduler.config import Settings
from scheduler.core.backend import app_name_for
from scheduler.core.logs import configure_from, log_context
from scheduler.core.metrics import ReconcilerMetrics
from scheduler.core.ownership import Claim
from scheduler.decisions.epochs import Incarnation
from scheduler.decisions.planning import RestartPolicy
from scheduler.loops.gate import SubmissionGate
from scheduler.loops.reconciler import SUBMIT_WORKERS, Reconciler
from scheduler.loops.stalls import StallRound, StallWatcher
from scheduler.store.db import Store
from scheduler.store.generations import GenerationResolver
from scheduler.store.ledger import SqlLedger
from scheduler.store.quotas import SqlGateStore, YarnQueues

log = logging.getLogger("drover.actors.reconcilers")

#: worker threads shared by every group's ticks (a tick is mostly waiting on I/O)
TICK_THREADS = 8
#: how soon the next tick comes after a tick that acted (its actions usually changed state)
AFTER_ACTION = 0.2
#: a nudged tick starts at least this long after the previous one ended. A nudge after a quiet
#: spell runs a tick at once; a burst of API writes (hundreds of creations a second) makes a
#: tick every NUDGE_GAP at most instead of one after another, each reading what all the writes
#: before it changed (measured: back-to-back ticks took half a CPU under a burst of creations)
NUDGE_GAP = 0.05


class GroupLoop:
    """One group's reconcile loop inside the JobReconciler actor."""

    def __init__(
        self,
        group: str,
        reconciler: Reconciler,
        *,
        interval: float,
        executor: ThreadPoolExecutor,
        metrics: ReconcilerMetrics | None = None,
        stall_check: Callable[[], StallRound] | None = None,
        stall_interval: float = 5.0,
    ) -> None:
        self.group = group
        self._metrics = metrics
        #: the owner's stall check of the group (scheduler.loops.stalls), after a tick when due
        self._stall_check = stall_check
        self._stall_interval = stall_interval
        self._stall_checked = -float("inf")
        self._reconciler = reconciler
        self._interval = interval
        self._executor = executor
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self.ticks = 0
        self.last_tick: dict[str, Any] = {}
        #: the first complete tick under the newest epoch seen: when every job this node owns
        #: since that membership change had been looked at (takeover is done here)
        self.epoch_reconciled: dict[str, Any] = {}

    def ensure_running(self) -> None:
        if not self._stopping and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._loop())

    def nudge(self) -> None:
        self.ensure_running()
        self._wake.set()

    async def _loop(self) -> None:
        with log_context(group=self.group):
            log.info("reconcile loop of group %s started", self.group)
        loop = asyncio.get_running_loop()
        while not self._stopping:
            self._wake.clear()
            try:
                stats = await loop.run_in_executor(self._executor, self._reconciler.tick)
                if self._metrics is not None:
                    self._metrics.observe(self.group, stats)
                await self._check_stalls(loop)
                self.ticks += 1
                self.last_tick = {
                    "at": time.time(),
                    "jobs": stats.jobs,
                    "actions": stats.actions,
                    "errors": stats.errors,
                    "claimed": stats.claimed,
                    "paused": stats.paused,
                    "seconds": round(stats.seconds, 4),
                    "epoch": stats.epoch,
                    "full_read": stats.full_read,
                    "rows_read": stats.rows_read,
                    "submissions": stats.submissions,
                }
                done = self.epoch_reconciled.get("epoch")
                if stats.complete and stats.epoch is not None and stats.epoch != done:
                    self.epoch_reconciled = {
                        "epoch": stats.epoch,
                        "at": self.last_tick["at"],
                        "jobs": stats.jobs,
                        "claimed": stats.claimed,
                        "seconds": self.last_tick["seconds"],
                    }
            except Exception:  # the loop never dies
                with log_context(group=self.group):
                    log.exception("reconcile tick of group %s failed", self.group)
            ended = loop.time()
            timeout = AFTER_ACTION if self.last_tick.get("actions") else self._interval
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=timeout)
            except TimeoutError:
                continue
            gap = ended + NUDGE_GAP - loop.time()
            if gap > 0 and not self._stopping:
                await asyncio.sleep(gap)  # nudges meanwhile are covered by the coming tick

    async def _check_stalls(self, loop: asyncio.AbstractEventLoop) -> None:
        """The stall check, every ``stall_interval`` seconds (its own guard: a failing check
        never costs a tick)."""
        if self._stall_check is None or self._stopping:
            return
        if time.monotonic() - self._stall_checked < self._stall_interval:
            return
        self._stall_checked = time.monotonic()
        try:
            done = await loop.run_in_executor(
                self._executor, contextvars.copy_context().run, self._stall_check
            )
        except Exception:
            with log_context(group=self.group):
                log.exception("stall check of group %s failed", self.group)
            return
        if self._metrics is not None:
            self._metrics.observe_stalls(self.group, done)
        if done.restarted:
            self._wake.set()  # replace the stalled runs now

    def health(self) -> dict[str, Any]:
        alive = self._task is not None and not self._task.done()
        return {
            "group": self.group,
            "alive": alive or self._stopping,
            "ticks": self.ticks,
            "last_tick": self.last_tick,
            "epoch_reconciled": self.epoch_reconciled,
        }

    async def drain(self) -> None:
        """Stop after the current tick; applications keep running."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await asyncio.wait_for(asyncio.shield(self._task), timeout=30)


@ray.remote(max_restarts=-1, max_task_retries=-1, num_cpus=0)
class JobReconciler:
    """Hosts the reconcile loop of every group this node manages (see the module docstring)."""

    def __init__(self, settings: Settings) -> None:
        configure_from(settings, "reconciler")
        self._settings = settings
        self._metrics = ReconcilerMetrics()
        # a tick thread per group ticking at once, and a group's submission workers
        self._store = Store(settings.resolved_database_url, pool_size=TICK_THREADS + SUBMIT_WORKERS)
        self._backends = BackendRegistry(settings, queue_of=YarnQueues(self._store).queue_of)
        self._ledger = SqlLedger(self._store, node_id=settings.node_id, app_name_for=app_name_for)
        self._generations = GenerationResolver(self._store, settings.node_id)
        self._policy = RestartPolicy(
            max_attempts=settings.restart_max_attempts,
            validity_interval=settings.restart_validity_interval,
            backoff_initial=settings.restart_backoff_initial,
            backoff_max=settings.restart_backoff_max,
            stop_grace=settings.stop_grace_seconds,
            lease_margin=settings.fence_lease_margin,
            in_doubt_grace=settings.submit_in_doubt_grace,
        )
        self._executor = ThreadPoolExecutor(TICK_THREADS, thread_name_prefix="tick")
        self._loops: dict[str, GroupLoop] = {}
        self._reconcilers: dict[str, Reconciler] = {}
        self._stopping = False
        configured = [u.strip() for u in settings.fence_urls.split(",") if u.strip()]
        self._fence_urls = tuple(configured)

    def _loop_of(self, group: str) -> GroupLoop:
        loop = self._loops.get(group)
        if loop is None:
            reconciler = Reconciler(
                self._ledger,
                self._backends,
                node_id=self._settings.node_id,
                group=group,
                claim=lambda: self._fetch_claim(group),
                policy=self._policy,
                gate=SubmissionGate(SqlGateStore(self._store, self._settings.node_id)),
            )
            reconciler.py_files = runtime_py_files()
            self._reconcilers[group] = reconciler
            loop = self._loops[group] = GroupLoop(
                group,
                reconciler,
                interval=self._settings.reconcile_interval,
                executor=self._executor,
                metrics=self._metrics,
                stall_check=self._stall_check_of(group),
                stall_interval=self._settings.stall_check_interval,
            )
        return loop

    def _stall_check_of(self, group: str) -> Callable[[], StallRound]:
        watcher = StallWatcher(
            self._store,
            group=group,
            policy=self._settings.stall_policy,
            max_restarts=self._settings.restart_max_attempts,
            restart_window=self._settings.restart_validity_interval,
        )

        def check() -> StallRound:
            with log_context(group=group):
                return watcher.round(self._fetch_claim(group))

        return check

    def _fetch_claim(self, group: str) -> Claim | None:
        """The current claim from Membership (runs in a tick's worker thread); None on error.

        Waits on the reply's future, not ``ray.get``: this is an async actor, where Ray takes any
        ``ray.get`` for one that blocks the event loop (and warns) even from another thread. The
        tick thread blocks; the event loop and the other groups' loops do not.
        """
        try:
            reply: Any = membership_actor().claim.remote(group)
            answer = cast(
                tuple[Claim | None, tuple[str, ...]],
                reply.future().result(timeout=CLAIM_TIMEOUT),
            )
        except Exception as exc:
            log.warning("no claim for group %s: membership not answering (%s)", group, exc)
            return None
        claim, urls = answer
        self._reconcilers[group].fence_urls = self._fence_urls or urls
        return claim

    async def ensure(self, groups: list[str]) -> dict[str, Any]:
        """Run a loop for each of ``groups`` (new ones start now); returns every loop's health."""
        if not self._stopping:
            for group in groups:
                self._loop_of(group).ensure_running()
            for group in set(self._loops) - set(groups):
                await self._retire(group)
        return {g: loop.health() for g, loop in self._loops.items()}

    async def _retire(self, group: str) -> None:
        """A group deleted from the store: stop its loop (it owns no jobs any more)."""
        loop = self._loops.pop(group)
        reconciler = self._reconcilers.pop(group, None)
        log.info("group %s is gone; its reconcile loop stops", group)
        await loop.drain()
        if reconciler is not None:
            reconciler.close()
        self._metrics.forget(group)

    async def metrics(self) -> list[Any]:
        """The loops' figures (Prometheus metric families; see scheduler.core.metrics)."""
        return self._metrics.collect()

    async def resolve_generation(self, group: str, incarnation: Incarnation, cversion: int) -> int:
        """The membership generation of one incarnation of ``group``'s members znode, recorded
        first if no node has yet: asked by Membership's coordinator, whose worker process does
        not load the store (this actor's does)."""
        return await asyncio.to_thread(self._generations, group, incarnation, cversion)

    async def ping(self) -> dict[str, Any]:
        return {g: loop.health() for g, loop in self._loops.items()}

    async def nudge(self, group: str) -> None:
        """Wake ``group``'s loop now (a group this node does not run yet waits for ``ensure``)."""
        loop = self._loops.get(group)
        if loop is not None and not self._stopping:
            loop.nudge()

    async def drain(self) -> None:
        """Every loop stops after its current tick; applications keep running."""
        self._stopping = True
        await asyncio.gather(
            *(loop.drain() for loop in self._loops.values()), return_exceptions=True
        )
        for reconciler in self._reconcilers.values():
            reconciler.close()
        self._executor.shutdown(wait=False)
        log.info("reconcile loops of %d group(s) drained", len(self._loops))
