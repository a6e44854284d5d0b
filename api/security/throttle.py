"""Failed credentials, per client address: the brake on guessing tokens.

Each credential that does not verify takes a token of its client address's bucket (at most
``limit`` held, refilled at ``limit`` per ``window`` seconds: ``scheduler.decisions.gate.Bucket``).
An address whose bucket is empty is answered 429 with ``Retry-After`` (the seconds until a token
is back) before its credential is looked at: no store read, no signature check. A credential
this node verified lately (its cache of tokens) still passes, so a service behind the same
address as a guesser keeps working; probes and metrics are never authenticated, so never
throttled. Requests without any credential do not count (they fail at no cost).

In memory, per node, on the event loop (no lock): at most ``most`` addresses are followed (the
full buckets are forgotten first).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from scheduler.decisions.gate import Bucket


class FailedCredentials:
    def __init__(
        self,
        limit: int,
        window: float,
        *,
        most: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit = limit
        self.rate = limit / window if window > 0 else 0.0
        self.most = most
        self._clock = clock
        self._buckets: dict[str, Bucket] = {}

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    def retry_after(self, address: str) -> float | None:
        """Seconds ``address`` must wait before presenting a credential again (None: it may
        now)."""
        bucket = self._buckets.get(address)
        if bucket is None:
            return None
        bucket = bucket.refilled(self._clock())
        return None if bucket.available >= 1 else bucket.wait_for_one()

    def failed(self, address: str) -> None:
        """A credential from ``address`` did not verify."""
        if not self.enabled:
            return
        now = self._clock()
        bucket = self._buckets.get(address)
        if bucket is None:
            if len(self._buckets) >= self.most:
                self._forget_full(now)
            bucket = Bucket(rate=self.rate, burst=self.limit, tokens=float(self.limit), at=now)
        self._buckets[address] = bucket.refilled(now).take()

    def _forget_full(self, now: float) -> None:
        self._buckets = {
            a: b for a, b in self._buckets.items() if b.refilled(now).tokens < self.limit
        }
        if len(self._buckets) >= self.most:  # every one of them is guessing: start over
            self._buckets.clear()
