"""An asyncio event loop in a thread of its own: where the node process runs its supervisor.

The node process's main thread serves the API (uvicorn's loop); the supervisor and the loops it
hosts (``scheduler/actors/supervisor.py``) run on this loop instead, so neither can hold the
other up. Callers in other threads hand it coroutines: :meth:`LoopThread.call` waits for the
result (with a deadline), :meth:`LoopThread.submit` does not.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

log = logging.getLogger("drover.actors.host")

T = TypeVar("T")


class LoopThread:
    """One event loop running forever in a daemon thread, until :meth:`stop`."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive() and not self._loop.is_closed()

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        """Run ``coroutine`` on the loop and wait for its result (TimeoutError after
        ``timeout`` seconds: the coroutine is then cancelled)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        try:
            return future.result(timeout=timeout)
        except TimeoutError:
            future.cancel()
            raise

    def submit(self, coroutine: Coroutine[Any, Any, Any]) -> Future[Any]:
        """Run ``coroutine`` on the loop; do not wait (its failure is logged)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        future.add_done_callback(_log_failure)
        return future

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel what still runs on the loop, stop it and wait for the thread."""
        if self._loop.is_closed():
            return

        async def _cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(_cancel_all(), self._loop).result(timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - stopping anyway
            log.warning("tasks on the node loop did not end in time: %r", exc)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=timeout)


def _log_failure(future: Future[Any]) -> None:
    if future.cancelled():
        return
    exc = future.exception()
    if exc is not None:
        log.warning("a call on the node loop failed: %r", exc)
