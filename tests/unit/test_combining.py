"""The combiner (``scheduler/core/combining.py``): batches never overlap, every item runs in exactly
one batch and gets its own answer, in the order the items arrived."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.combining import Combiner, land_in_halves

DEADLINE = 10.0


class Recorder:
    """A batch runner that records its batches and checks they never overlap."""

    def __init__(self, fail_on: frozenset[int] = frozenset(), hold: threading.Event | None = None):
        self.batches: list[list[int]] = []
        self.active = 0
        self.overlapped = False
        self.fail_on = fail_on
        self.hold = hold
        self._lock = threading.Lock()

    def __call__(self, items: Sequence[int]) -> list[int | BaseException]:
        with self._lock:
            self.active += 1
            self.overlapped |= self.active > 1
            self.batches.append(list(items))
        if self.hold is not None and len(self.batches) == 1:
            assert self.hold.wait(DEADLINE)
        with self._lock:
            self.active -= 1
        return [ValueError(i) if i in self.fail_on else i * 10 for i in items]


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)


def _queued(combiner: Combiner[int, int], n: int) -> Callable[[], bool]:
    return lambda: len(combiner._queue) == n


def _run_all(combiner: Combiner[int, int], items: Sequence[int]) -> dict[int, object]:
    answers: dict[int, object] = {}
    lock = threading.Lock()

    def one(item: int) -> None:
        try:
            answer: object = combiner.run(item)
        except ValueError as exc:
            answer = exc
        with lock:
            answers[item] = answer

    threads = [threading.Thread(target=one, args=(i,)) for i in items]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE)
        assert not t.is_alive()
    return answers


def test_alone_an_item_runs_at_once_in_a_batch_of_one() -> None:
    runner = Recorder()
    combiner: Combiner[int, int] = Combiner(runner)
    assert combiner.run(1) == 10 and combiner.run(2) == 20
    assert runner.batches == [[1], [2]]


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(min_value=1, max_value=40),
    max_batch=st.integers(min_value=1, max_value=8),
    failing=st.sets(st.integers(min_value=0, max_value=39), max_size=5),
)
def test_every_item_runs_once_and_gets_its_own_answer(
    n: int, max_batch: int, failing: set[int]
) -> None:
    runner = Recorder(fail_on=frozenset(failing))
    combiner: Combiner[int, int] = Combiner(runner, max_batch=max_batch)
    answers = _run_all(combiner, range(n))
    ran = sorted(i for batch in runner.batches for i in batch)
    assert ran == list(range(n))  # each exactly once
    assert not runner.overlapped
    assert all(1 <= len(batch) <= max_batch for batch in runner.batches)
    for i in range(n):
        answer = answers[i]
        if i in failing:
            assert isinstance(answer, ValueError) and answer.args == (i,)
        else:
            assert answer == i * 10


def test_items_that_arrive_during_a_batch_go_together_in_arrival_order() -> None:
    hold = threading.Event()
    runner = Recorder(hold=hold)
    combiner: Combiner[int, int] = Combiner(runner, max_batch=3)
    first = threading.Thread(target=combiner.run, args=(0,))
    first.start()
    _wait_until(lambda: runner.batches == [[0]], "the first batch to start")
    later = []
    for i in range(1, 6):  # queued one after the other while the first batch runs
        t = threading.Thread(target=combiner.run, args=(i,))
        t.start()
        later.append(t)
        _wait_until(_queued(combiner, i), f"item {i} to queue")
    hold.set()
    for t in [first, *later]:
        t.join(DEADLINE)
        assert not t.is_alive()
    assert runner.batches == [[0], [1, 2, 3], [4, 5]]


def test_a_failing_batch_answers_its_error_to_each_of_its_items() -> None:
    def broken(items: Sequence[int]) -> list[int]:
        raise RuntimeError(f"batch of {len(items)}")

    combiner: Combiner[int, int] = Combiner(broken)
    with pytest.raises(RuntimeError, match="batch of 1"):
        combiner.run(1)
    # and the combiner is still usable
    with pytest.raises(RuntimeError, match="batch of 1"):
        combiner.run(2)


def test_a_batch_must_answer_every_item() -> None:
    combiner: Combiner[int, int] = Combiner(lambda items: [])
    with pytest.raises(RuntimeError, match="answered 0 outcomes"):
        combiner.run(1)


class Refused(Exception):
    pass


class Stop(Refused):
    pass


@pytest.mark.parametrize(
    ("smallest", "writes", "splits"),
    [(1, 15, [16, 8, 4, 2, 8, 4, 2]), (3, 15, [16, 8, 4, 2, 8, 4, 2]), (8, 19, [16, 8, 8])],
)
def test_a_batch_that_does_not_land_is_written_in_halves(
    smallest: int, writes: int, splits: list[int]
) -> None:
    """Every item but the refused ones lands, each refused one with its own exception; a batch
    of ``smallest`` or fewer that does not land is written one item at a time."""
    batches: list[list[int]] = []
    split: list[int] = []

    def write(items: Sequence[int]) -> list[int]:
        batches.append(list(items))
        if 3 in items or 11 in items:
            raise Refused(f"{len(items)} items")
        return [i * 10 for i in items]

    out = land_in_halves(
        list(range(16)),
        write,
        splits=(Refused,),
        on_split=lambda size, exc: split.append(size),
        smallest=smallest,
    )
    assert [o if isinstance(o, int) else str(o) for o in out] == [
        "1 items" if i in (3, 11) else i * 10 for i in range(16)
    ]
    assert (len(batches), split) == (writes, splits)
    assert land_in_halves([], write, splits=(Refused,), on_split=lambda *_: None) == []


def test_a_stopping_exception_ends_the_split() -> None:
    def write(items: Sequence[int]) -> list[int]:
        raise (Stop if len(items) == 1 else Refused)("no")

    with pytest.raises(Stop):
        land_in_halves([1, 2, 3], write, splits=(Refused,), on_split=lambda *_: None, stops=(Stop,))
    with pytest.raises(KeyError):
        land_in_halves([1], lambda items: [{}[0]], splits=(Refused,), on_split=lambda *_: None)
