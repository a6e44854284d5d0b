"""Nudges coalesced: at most one delivery of a nudge to the same place on its way at a time.

A nudge wakes a reconcile loop so it acts on a change at once instead of at its next tick. What
the loop then does reads the store, so one nudge delivered *after* several changes covers them
all. A burst of API writes to one group (a service creating jobs, a bulk import) would
otherwise make one actor call (or, for another node's group, one HTTP request) per write: CPU on
the request path and a reconcile pass per write on the owner.

The rule: a nudge asked for while one to the same place (``key``) is claimed and not yet
delivered is dropped; the delivery releases the key *before* it calls, so any change made
before a dropped nudge was asked for is committed before the delivery starts, and any nudge
asked for after the release is delivered on its own.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable

from scheduler.core.states import DesiredState


def creation_wakes_owner(desired: DesiredState) -> bool:
    """Whether creating a job with ``desired`` nudges its owner. A job to run, yes: the owner
    submits it at once. A stopped one, no: the owner has nothing to do for it but claim it, and
    its next periodic tick does that. A burst of stopped creations (a service registering its
    jobs, an import) used to make the owner tick every ``NUDGE_GAP`` to claim a few new jobs each
    time: a quarter of a CPU beside the API under 16 creating clients, a twentieth without."""
    return desired is DesiredState.RUNNING


class Coalescer:
    """The keys with a nudge on its way (thread-safe)."""

    def __init__(self) -> None:
        self._pending: set[Hashable] = set()
        self._lock = threading.Lock()

    def claim(self, key: Hashable) -> bool:
        """True: deliver a nudge to ``key`` (and :meth:`release` it first thing when
        delivering); False: one is on its way and covers this one."""
        with self._lock:
            if key in self._pending:
                return False
            self._pending.add(key)
            return True

    def release(self, key: Hashable) -> None:
        """The nudge to ``key`` is being delivered (or will never be): the next one goes."""
        with self._lock:
            self._pending.discard(key)

    def pending(self) -> int:
        with self._lock:
            return len(self._pending)
