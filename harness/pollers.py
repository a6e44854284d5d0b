"""A look taken every few tenths of a second in a thread of its own while a test or a bench
acts (``with``): what they keep watching on a cluster, such as how many applications of a job
were live at once."""

from __future__ import annotations

import threading
from typing import Self


class Poller:
    """Calls :meth:`poll` every :attr:`interval` seconds from entering the block to leaving it;
    ``polls`` counts the looks that answered, ``errors`` the missed ones (``poll`` raised).
    Leaving the block waits up to :attr:`stop_timeout` seconds for a look under way."""

    interval = 0.2
    stop_timeout = 10.0

    def __init__(self, interval: float | None = None) -> None:
        if interval is not None:
            self.interval = interval
        self.polls = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)

    def poll(self) -> None:
        """One look; an exception is a missed look (the next one counts)."""
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - a missed look, counted; the others count
                self.errors += 1
            else:
                self.polls += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.stop_timeout)
