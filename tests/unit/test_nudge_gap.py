"""A group's reconcile loop under nudges (``scheduler/actors/reconcilers.py``): a nudge after a
quiet spell runs a tick, a burst of nudges makes a tick every ``NUDGE_GAP`` at most, and the
last nudge of a burst is covered by a tick that starts after it."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from scheduler.actors.reconcilers import NUDGE_GAP, GroupLoop
from scheduler.loops.reconciler import TickStats

#: every test measures time: not beside the e2e tests at nice 19
pytestmark = pytest.mark.serial

DEADLINE = 10.0


class Ticks:
    """A reconciler that only notes when its ticks start and end."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []

    def tick(self) -> TickStats:
        started = time.monotonic()
        time.sleep(0.002)
        self.spans.append((started, time.monotonic()))
        return TickStats()


async def _until(condition: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.002)


def test_a_burst_of_nudges_ticks_at_most_every_gap_and_covers_the_last() -> None:
    async def scenario() -> None:
        ticks = Ticks()
        with ThreadPoolExecutor(1) as executor:
            loop = GroupLoop("g", ticks, interval=3600.0, executor=executor)  # type: ignore[arg-type]
            loop.nudge()  # starts the loop: its first tick
            await _until(lambda: len(ticks.spans) == 1, "the first tick")
            last_nudge = 0.0
            for _ in range(30):  # about 150 ms of nudges
                loop.nudge()
                last_nudge = time.monotonic()
                await asyncio.sleep(0.005)
            await _until(
                lambda: any(start > last_nudge for start, _ in ticks.spans),
                "a tick after the last nudge",
            )
            await loop.drain()
        for (_, ended), (started, _) in zip(ticks.spans, ticks.spans[1:], strict=False):
            assert started - ended >= NUDGE_GAP * 0.99  # never back to back
        assert len(ticks.spans) < 30  # the burst made far fewer ticks than nudges

    asyncio.run(scenario())
