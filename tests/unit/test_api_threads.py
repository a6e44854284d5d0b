"""The API's worker threads (``api/threads.py``): results and errors come back to the awaiting
request, context variables travel with the work, never more than ``size`` threads run at once,
idle threads end (and start again when work comes), a cancelled request waits for its work."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from api.threads import WorkerThreads
from harness.nodes import poll

DEADLINE = 10.0

CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="nobody")


def test_results_and_errors_come_back_to_the_request() -> None:
    pool = WorkerThreads(2)

    def fail() -> None:
        raise KeyError("gone")

    async def main() -> None:
        assert await pool.run(sum, [1, 2, 3]) == 6
        assert await pool.run(threading.current_thread) is not threading.current_thread()
        with pytest.raises(KeyError, match="gone"):
            await pool.run(fail)

    asyncio.run(main())


def test_context_variables_travel_with_the_work_and_come_back_unchanged() -> None:
    pool = WorkerThreads(1)

    def read_and_change() -> str:
        seen = CALLER.get()
        CALLER.set("the worker")  # in the work's copy only
        return seen

    async def main() -> None:
        CALLER.set("request 1")
        assert await pool.run(read_and_change) == "request 1"
        assert CALLER.get() == "request 1"
        CALLER.set("request 2")
        assert await pool.run(read_and_change) == "request 2"

    asyncio.run(main())


def test_never_more_than_size_threads_and_everything_runs() -> None:
    pool = WorkerThreads(3)
    lock = threading.Condition()
    now = peak = 0

    def work(n: int) -> int:
        nonlocal now, peak
        with lock:
            now += 1
            peak = max(peak, now)
            lock.notify_all()
            if n < 3:  # the first three hold their threads until all three run at once
                assert lock.wait_for(lambda: peak == 3, DEADLINE)
        time.sleep(0.001)  # holds its thread, as a store round trip does
        with lock:
            now -= 1
        return n

    async def main() -> list[int]:
        return list(await asyncio.gather(*(pool.run(work, n) for n in range(60))))

    assert asyncio.run(main()) == list(range(60))
    assert peak == 3
    assert pool.running <= 3


def test_idle_threads_end_and_the_pool_starts_again() -> None:
    pool = WorkerThreads(4, idle_s=0.05)

    async def burst() -> None:
        await asyncio.gather(*(pool.run(time.sleep, 0.01) for _ in range(8)))

    asyncio.run(burst())
    poll(lambda: pool.running == 0, timeout=DEADLINE, what="the idle threads end")
    asyncio.run(burst())  # threads start again when work comes
    poll(lambda: pool.running == 0, timeout=DEADLINE, what="the idle threads end again")


def test_a_cancelled_request_waits_for_its_work_to_end() -> None:
    pool = WorkerThreads(1)
    started, release = threading.Event(), threading.Event()
    finished: list[bool] = []

    def work() -> None:
        started.set()
        assert release.wait(DEADLINE)
        finished.append(True)

    async def main() -> None:
        request = asyncio.ensure_future(pool.run(work))
        assert await asyncio.to_thread(started.wait, DEADLINE)
        request.cancel()
        await asyncio.sleep(0)  # the cancellation is delivered; the work still runs
        assert not request.done()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await request
        assert finished == [True]  # the request ended only after its work

    asyncio.run(main())


def test_a_pool_needs_a_thread() -> None:
    with pytest.raises(ValueError, match="at least one thread"):
        WorkerThreads(0)


def test_when_no_thread_can_start_the_request_fails_and_nothing_runs_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pool = WorkerThreads(2)
    ran: list[int] = []

    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    async def main() -> None:
        with monkeypatch.context() as patched:
            patched.setattr(threading.Thread, "start", refuse)
            with pytest.raises(RuntimeError, match="can't start new thread"):
                await pool.run(ran.append, 1)
        assert pool.running == 0
        await pool.run(ran.append, 2)  # threads start again once they can

    asyncio.run(main())
    assert ran == [2]
