"""The API's own worker threads: where its hot routes and its checks do their blocking work.

The store is blocking (SQLAlchemy over PyMySQL or sqlite3), so a request that reads it hands the
read to a thread and awaits the answer. Starlette's ``run_in_threadpool`` (anyio's
``to_thread.run_sync``) does that through a capacity limiter, a cancel scope and anyio's
per-loop lookups: about 56 µs of CPU per hand-over at 16 at once on the 2-core test machine,
where a plain queue and a future take 14 µs. A read of a job costs ~400 µs in all, so the
hand-over was an eighth of it. :class:`WorkerThreads` is the plain version:

- ``await threads.run(func, *args)`` runs ``func`` in a worker thread with a copy of the
  caller's context variables (as anyio does: the store's ``COMMIT_HOOK`` travels with it) and
  returns its result or raises its exception;
- at most ``size`` threads run at once (``DROVER_API_THREADS``: the API's store keeps as many
  connections); more work waits in a queue, first come, first served;
- threads start when work needs them and end after ``IDLE_S`` without work: a pool needs no
  closing, and an app that stops serving (a node shutting down, an app a test built and
  dropped, one served again by a second test client) leaves no thread behind for long;
- a request cancelled while its work runs waits for that work to end before the cancellation
  goes on (anyio's default too): what the route started in the store is finished, never left
  half-way while the request's answer is already decided.

FastAPI still runs the other plain ``def`` routes and their dependencies through anyio's threads
(``api/app.py`` sizes that limiter to the same figure): only the hot routes and the checks of
the security edge use this pool.
"""

from __future__ import annotations

import asyncio
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from starlette.requests import Request

T = TypeVar("T")

#: seconds a thread waits for work before it ends
IDLE_S = 10.0


class _Work:
    """One hand-over: what to run, and where its outcome goes (the loop's future)."""

    __slots__ = ("loop", "done", "context", "func", "args", "ended", "finished")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        context: contextvars.Context,
        func: Callable[..., Any],
        args: tuple[Any, ...],
    ) -> None:
        self.loop, self.context, self.func, self.args = loop, context, func, args
        self.done: asyncio.Future[Any] = loop.create_future()
        #: set (in the loop) by a cancelled request waiting for the work to end
        self.ended: asyncio.Future[None] | None = None
        self.finished = False  # read and written in the loop's thread only


class WorkerThreads:
    """A pool of at most ``size`` threads for blocking work awaited from the event loop."""

    def __init__(self, size: int, *, name: str = "drover-api", idle_s: float = IDLE_S) -> None:
        if size < 1:
            raise ValueError("a pool needs at least one thread")
        self.size, self._name, self._idle_s = size, name, idle_s
        self._queue: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._lock = threading.Lock()
        # threads waiting for work that no hand-over has counted on yet: a hand-over that
        # counts on one starts no thread; a thread may end only by taking itself off this count
        self._idle = 0
        self._threads: set[threading.Thread] = set()
        self._started = 0

    @property
    def running(self) -> int:
        """How many threads the pool has now."""
        with self._lock:
            return len(self._threads)

    async def run(self, func: Callable[..., T], *args: Any) -> T:
        """``func(*args)`` in one of the pool's threads, with the caller's context variables."""
        loop = asyncio.get_running_loop()
        work = _Work(loop, contextvars.copy_context(), func, args)
        self._hand_over(work)
        try:
            return await work.done  # type: ignore[no-any-return]
        except asyncio.CancelledError:
            # the work goes on in its thread: wait for its end, then be cancelled
            if not work.finished:
                work.ended = loop.create_future()
                while not work.ended.done():
                    try:
                        await asyncio.shield(work.ended)
                    except asyncio.CancelledError:
                        continue
            raise

    def _hand_over(self, work: _Work) -> None:
        with self._lock:
            if self._idle:  # an idle thread takes it
                self._idle -= 1
                self._queue.put(work)
                return
            if len(self._threads) >= self.size:  # the first thread to be free takes it
                self._queue.put(work)
                return
            self._started += 1
            thread = threading.Thread(
                target=self._work, name=f"{self._name}-{self._started}", daemon=True
            )
            self._threads.add(thread)
        try:
            thread.start()
        except BaseException:  # no thread to be had: the request fails, nothing was queued
            with self._lock:
                self._threads.discard(thread)
            raise
        self._queue.put(work)  # for the new thread, or any that is free first

    def _work(self) -> None:
        me = threading.current_thread()
        try:
            while True:
                try:
                    work = self._queue.get(timeout=self._idle_s)
                except queue.Empty:
                    with self._lock:
                        # end only if no hand-over counted on this thread meanwhile
                        if self._idle:
                            self._idle -= 1
                            return
                    continue
                _run(work)
                with self._lock:
                    self._idle += 1
        finally:
            with self._lock:
                self._threads.discard(me)


def _run(work: _Work) -> None:
    try:
        outcome, failure = work.context.run(work.func, *work.args), None
    except BaseException as exc:  # noqa: BLE001 - handed to the awaiting request
        outcome, failure = None, exc
    try:
        work.loop.call_soon_threadsafe(_settle, work, outcome, failure)
    except RuntimeError:  # the loop is closed: nobody awaits this any more
        pass


def _settle(work: _Work, outcome: Any, failure: BaseException | None) -> None:
    """In the loop's thread: the work's outcome to its request."""
    work.finished = True
    if work.ended is not None and not work.ended.done():
        work.ended.set_result(None)
    if work.done.done():  # cancelled: the outcome has nobody to go to
        return
    if failure is not None:
        work.done.set_exception(failure)
    else:
        work.done.set_result(outcome)


async def in_thread(request: Request, func: Callable[..., T], *args: Any) -> T:
    """``func(*args)`` in the threads of the app serving ``request`` (``app.state.threads``)."""
    threads: WorkerThreads = request.app.state.threads
    return await threads.run(func, *args)
