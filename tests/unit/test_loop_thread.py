"""The node process's own event loop for the supervisor (scheduler/actors/host.py)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from scheduler.actors.host import LoopThread


def test_calls_run_on_the_loop_thread_and_return_their_result() -> None:
    host = LoopThread("test-loop")
    try:

        async def where() -> str:
            await asyncio.sleep(0)
            return threading.current_thread().name

        assert host.call(where(), timeout=5) == "test-loop"
    finally:
        host.stop()
    assert not host.alive


def test_a_call_past_its_deadline_is_cancelled() -> None:
    host = LoopThread("test-loop")
    cancelled = threading.Event()
    try:

        async def forever() -> None:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                cancelled.set()
                raise

        with pytest.raises(TimeoutError):
            host.call(forever(), timeout=0.05)
        assert cancelled.wait(5)
    finally:
        host.stop()


def test_submitted_work_runs_without_waiting_and_stop_cancels_what_is_left() -> None:
    host = LoopThread("test-loop")
    ran, waiting = threading.Event(), threading.Event()
    left: list[asyncio.Task[None]] = []

    async def quick() -> None:
        ran.set()

    async def lingering() -> None:
        task = asyncio.current_task()
        assert task is not None
        left.append(task)
        waiting.set()
        await asyncio.sleep(3600)

    async def failing() -> None:
        raise RuntimeError("logged, not raised")

    host.submit(quick())
    host.submit(failing())
    host.submit(lingering())
    assert ran.wait(5) and waiting.wait(5)
    host.stop()
    assert not host.alive
    assert left and left[0].cancelled()
