"""harness.pollers.Poller: looks counted, missed looks counted, the thread gone after the block."""

from __future__ import annotations

import threading

from harness.pollers import Poller


class Flaky(Poller):
    """Misses every second look; says when it has made five."""

    interval = 0.01

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.five = threading.Event()

    def poll(self) -> None:
        self.calls += 1
        if self.calls >= 5:
            self.five.set()
        if self.calls % 2 == 0:
            raise RuntimeError("a missed look")


def test_a_poller_counts_its_looks_and_its_missed_ones_until_the_block_ends() -> None:
    with Flaky() as poller:
        assert poller.five.wait(timeout=10)
    calls = poller.calls
    assert not poller._thread.is_alive()
    assert poller.polls + poller.errors == calls
    assert poller.errors == calls // 2


def test_an_interval_given_to_one_poller_overrides_the_class_default() -> None:
    assert Poller().interval == 0.2
    assert Poller(0.5).interval == 0.5
    assert Flaky().interval == 0.01
