"""What every loop hosted by the NodeSupervisor shares (the cluster monitor, the replication
loop, the operations executor, the alert loop).

They are asynchronous components on the supervisor's event loop in the node process, not Ray
actors of their own (a Ray worker process costs a node about 140 MiB resident). The supervisor
creates each one, hands it the node's groups every supervision round (:meth:`HostedLoop.ensure`,
which also restarts a loop that ended), reports its :meth:`~HostedLoop.status` in
``GET /v1/nodes`` and drains it when the node stops. A subclass says what one round does
(:meth:`~HostedLoop._round`, whose blocking work goes to worker threads so the event loop only
waits) and what closing releases; the loop around it never dies.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from scheduler.actors.common import PING_TIMEOUT, membership_actor
from scheduler.core.ownership import Claim


class HostedLoop(ABC):
    """One round every ``interval`` seconds while the node runs."""

    #: what the log calls a round of this loop ("health round failed")
    kind: ClassVar[str]
    #: each pause is the interval times a factor drawn from this range, and the first round
    #: waits a random part of the spread, so the nodes do not act in step; (1, 1): no jitter
    jitter: ClassVar[tuple[float, float]] = (1.0, 1.0)
    #: the least pause between two rounds (seconds)
    min_pause: ClassVar[float] = 0.0
    #: seconds :meth:`drain` lets a running round finish (its writes are whole steps) before
    #: cancelling it; 0 cancels at once
    drain_grace: ClassVar[float] = 0.0

    def __init__(self, interval: float, logger: logging.Logger) -> None:
        self._interval = interval
        self._log = logger
        self._groups: list[str] = []
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._rounds = 0
        self._last_round: dict[str, Any] = {}

    async def ensure(self, groups: list[str]) -> dict[str, Any]:
        """The supervisor's ping: the groups to serve; (re)starts the loop; returns the status."""
        self._groups = sorted(groups)
        if not self._stopping and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._loop())
        return await self.status()

    async def status(self) -> dict[str, Any]:
        alive = self._task is not None and not self._task.done()
        return {"alive": alive, "rounds": self._rounds, "last_round": dict(self._last_round)}

    async def drain(self) -> None:
        """Stop the loop (after the running round's grace), then release what it holds."""
        self._stopping = True
        if self._task is not None:
            if self.drain_grace > 0:
                try:
                    await asyncio.wait_for(asyncio.shield(self._task), timeout=self.drain_grace)
                except Exception:  # noqa: BLE001 - stopping anyway
                    self._task.cancel()
            else:
                self._task.cancel()
        await self._close()

    @abstractmethod
    async def _close(self) -> None:
        """Release the loop's clients, pools and store (after its last round)."""

    async def _loop(self) -> None:
        low, high = self.jitter
        if high > low:
            await asyncio.sleep(random.uniform(0, self._interval * (high - low)))
        while not self._stopping:
            started = time.monotonic()
            try:
                finished = await self._round()
                if finished is not None:
                    self._rounds += 1
                    self._last_round = finished
            except Exception:  # the loop never dies
                self._log.exception("%s round failed", self.kind)
            elapsed = time.monotonic() - started
            pause = self._interval * random.uniform(low, high) - elapsed
            await asyncio.sleep(max(self.min_pause, pause))

    @abstractmethod
    async def _round(self) -> dict[str, Any] | None:
        """One round; what it did (``last_round`` in the status), or None for a round that did
        nothing worth counting (it may set ``self._last_round`` itself)."""


async def current_claims(groups: list[str], logger: logging.Logger) -> dict[str, Claim]:
    """This node's claim in each of ``groups`` now, as Membership decides it for a reconcile
    tick; a group without one (or Membership not answering) is left out: nothing is done there
    this round."""
    try:
        membership = membership_actor()
    except Exception as exc:  # noqa: BLE001 - not up (yet): no claims
        logger.info("membership is not answering (%s): no claims this round", exc)
        return {}
    claims: dict[str, Claim] = {}
    for group in groups:
        try:
            answer: tuple[Claim | None, tuple[str, ...]] = await asyncio.wait_for(
                membership.claim.remote(group), timeout=PING_TIMEOUT
            )
        except Exception as exc:  # noqa: BLE001 - no claim this round
            logger.info("no claim for group %s this round (%s)", group, exc)
            continue
        if answer[0] is not None:
            claims[group] = answer[0]
    return claims
