"""scheduler/core/nudges.py: one nudge to a place on its way at a time, and none lost."""

from __future__ import annotations

import threading

from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.nudges import Coalescer


def test_a_nudge_asked_for_while_one_is_on_its_way_is_covered_by_it() -> None:
    nudges = Coalescer()
    assert nudges.claim("default")
    assert not nudges.claim("default")  # covered by the one on its way
    assert nudges.claim("critical")  # another place goes on its own
    nudges.release("default")  # being delivered: the next one goes
    assert nudges.claim("default")
    assert nudges.pending() == 2


@given(st.lists(st.tuples(st.sampled_from(["ask", "deliver"]), st.sampled_from("ab"))))
def test_every_change_is_followed_by_a_delivery_that_starts_after_it(
    steps: list[tuple[str, str]],
) -> None:
    """A change is made, then its nudge asked for; a delivery releases the key, then reads the
    store. Whatever the order, no change is left without a delivery starting after it (one
    still on its way counts)."""
    nudges = Coalescer()
    on_its_way: set[str] = set()
    uncovered: dict[str, bool] = {"a": False, "b": False}
    for step, key in steps:
        if step == "ask":
            uncovered[key] = True
            if nudges.claim(key):
                on_its_way.add(key)
        elif key in on_its_way:
            on_its_way.discard(key)
            nudges.release(key)
            uncovered[key] = False  # this delivery reads the store after every change so far
    for key, left in uncovered.items():
        assert not left or key in on_its_way


def test_claims_from_many_threads_let_one_through() -> None:
    nudges = Coalescer()
    granted: list[bool] = []
    start = threading.Barrier(8)

    def ask() -> None:
        start.wait(timeout=10)
        granted.append(nudges.claim("default"))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert granted.count(True) == 1 and len(granted) == 8
