"""Work items from many threads run together, a batch at a time (flat combining).

The API creates jobs from as many threads as it serves requests. Each creation alone is a
transaction of seven statements, and on either store the statements, not the work in them,
are most of its cost. A :class:`Combiner` lets the threads that arrive while a batch is running
queue up; the next batch takes them all, and one transaction with a statement per *kind* of
row (not per row) serves them (``api/creations.py``).

How it runs: a thread that finds no batch running *leads*: it takes what is queued (its own
item first) and runs it. Threads that arrive meanwhile queue and wait. When the batch is done,
its items are answered; if more are queued, the first of them is told to lead the next batch,
so no thread runs batches for others after its own answer is ready. Alone, a thread leads a
batch of one at once: no waiting for company.

Rules the tests hold it to (``tests/unit/test_combining.py``): batches never overlap; every item
is run in exactly one batch and gets its own answer; items run in the order they arrived.

:func:`land_in_halves` is the other side of batching: a batch written in one transaction that
does not land is written again in halves, so one item that cannot be written costs a few
transactions more, not one per item of the batch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

I = TypeVar("I")  # noqa: E741 - the item
R = TypeVar("R")
E = TypeVar("E", bound=Exception)


class _Slot(Generic[I, R]):
    __slots__ = ("item", "outcome", "done", "lead", "wake")

    def __init__(self, item: I) -> None:
        self.item = item
        self.outcome: R | BaseException | None = None
        self.done = False
        self.lead = False
        self.wake = threading.Event()


class Combiner(Generic[I, R]):
    """Runs items in batches through ``run_batch`` (``items -> one outcome per item, in
    order``), at most ``max_batch`` at a time, never two batches at once."""

    def __init__(
        self,
        run_batch: Callable[[Sequence[I]], Sequence[R | BaseException]],
        *,
        max_batch: int = 64,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._run_batch = run_batch
        self._max = max_batch
        self._lock = threading.Lock()
        self._queue: list[_Slot[I, R]] = []
        self._running = False

    def run(self, item: I) -> R:
        """``item``'s result (its exception raised), once a batch holding it has run."""
        slot: _Slot[I, R] = _Slot(item)
        with self._lock:
            self._queue.append(slot)
            slot.lead = not self._running
            self._running = True
        while not slot.lead:
            slot.wake.wait()
            slot.wake.clear()
            if slot.done:
                return _answer(slot)
        self._lead()
        return _answer(slot)

    def _lead(self) -> None:
        with self._lock:
            batch = self._queue[: self._max]
            del self._queue[: len(batch)]
        try:
            outcomes = list(self._run_batch([s.item for s in batch]))
            if len(outcomes) != len(batch):
                raise RuntimeError(
                    f"a batch of {len(batch)} items answered {len(outcomes)} outcomes"
                )
        except BaseException as exc:  # noqa: BLE001 - every item of the batch gets it
            outcomes = [exc] * len(batch)
        with self._lock:
            for slot, outcome in zip(batch, outcomes, strict=True):
                slot.outcome, slot.done = outcome, True
            if self._queue:
                self._queue[0].lead = True
                following = self._queue[0]
            else:
                self._running, following = False, None
        for slot in batch:
            slot.wake.set()
        if following is not None:
            following.wake.set()


def _answer(slot: _Slot[I, R]) -> R:
    outcome = slot.outcome
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome  # type: ignore[return-value]


def land_in_halves(
    items: Sequence[I],
    write: Callable[[Sequence[I]], Sequence[R]],
    *,
    splits: tuple[type[E], ...],
    on_split: Callable[[int, E], None],
    smallest: int = 1,
    stops: tuple[type[Exception], ...] = (),
) -> list[R | E]:
    """``write(items)`` (one result per item) at once; when that raises one of ``splits``
    (``on_split`` hears of it), in halves, each again at once, down to batches of ``smallest``
    items or fewer, written one item at a time. Per item, its result, or the exception of
    ``splits`` that refused it alone. An exception of ``stops`` (even a kind of ``splits``), or
    of neither, ends it all."""
    if not items:
        return []
    try:
        return list(write(items))
    except stops:
        raise
    except splits as exc:
        if len(items) == 1:
            return [exc]
        on_split(len(items), exc)

    def land(part: Sequence[I]) -> list[R | E]:
        return land_in_halves(
            part, write, splits=splits, on_split=on_split, smallest=smallest, stops=stops
        )

    if len(items) <= smallest:
        return [result for item in items for result in land([item])]
    half = len(items) // 2
    return land(items[:half]) + land(items[half:])
