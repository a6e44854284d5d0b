"""What changed on a cluster since the last look: the change feed a steady tick follows.

A reconciler that owns 10,000 running jobs does not need 10,000 ``status`` calls a tick to learn
that nothing happened. A backend that can tell what changed offers :meth:`ChangeFeed.changes`:
given the :class:`Mark` of its previous answer, it names the submissions whose status may have
changed since then, and the caller asks ``status`` only about those (and about the jobs it has
other reasons to look at). The feed is optional: a backend without one is asked about every job,
as before.

The contract (``tests/unit/test_backend_contract.py`` holds every feed to it):

    if ``status(S)`` returned X at any moment after the ``changes()`` call that returned mark M,
    and ``changes(M).changed`` does not contain S, then ``status(S)`` would return X now.

So a feed may name too many submissions, never too few; ``changed is None`` means "cannot tell"
(a first call, a mark of another backend instance, a mark older than the feed's history) and
the caller asks about everything. Marks are opaque and belong to one backend instance.

:class:`ChangeLog` is the bookkeeping a feed built on periodic listings needs (the standalone
backend feeds it each ``/json/`` listing of the master): a fingerprint per submission in the last
listing, the submissions whose fingerprint changed (or that appeared or vanished) at each listing,
for the last ``history`` listings, and the *volatile* submissions -- those whose last ``status``
was not answered from the listing alone (a driver the listing does not show yet, a driver not
linked to its application yet): they are named in every answer until a status is answered from
the listing again. ``advance`` is O(listing); ``changes`` is O(changes since the mark).
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

#: listings a ChangeLog remembers at most (a caller whose mark is older is told "cannot tell")
DEFAULT_HISTORY = 64
#: ... and submission ids over all of them at most (beyond: twice the last listing's size); a
#: reconciler's mark is one tick old, so a short history suffices; while thousands of drivers
#: start at once, each listing changes thousands
DEFAULT_HELD = 4096

_feed_ids = itertools.count(1)


@dataclass(frozen=True)
class Mark:
    """Where one answer of one feed stood (opaque to callers)."""

    feed: int
    seq: int


@dataclass(frozen=True)
class Changes:
    """One answer of a change feed."""

    #: hand this to the next ``changes`` call
    mark: Mark
    #: submissions whose status may differ from what ``status`` said after the mark the caller
    #: gave; None: the feed cannot tell (ask about everything)
    changed: frozenset[str] | None

    @property
    def complete(self) -> bool:
        return self.changed is not None


@runtime_checkable
class ChangeFeed(Protocol):
    """A backend that can say which submissions changed (see the module docstring)."""

    def changes(self, since: Mark | None) -> Changes:
        """The submissions whose status may have changed since ``since``. Raises
        ClusterUnreachable when the cluster cannot be asked."""
        ...


def feed_of(backend: object) -> ChangeFeed | None:
    """The backend's change feed, or None if it has none (then every job is asked about)."""
    return backend if isinstance(backend, ChangeFeed) else None


class ChangeLog:
    """Fingerprints per submission across listings, and the changes between them (thread-safe).

    ``advance(fingerprints)`` takes one complete listing (submission id -> any hashable summary
    of what ``status`` derives from it); ``touch(ids)`` records changes the listing cannot show
    (a kill sent, a link made); ``volatile(id, True)`` marks a submission whose status was not
    answered from the listing alone.
    """

    def __init__(self, history: int = DEFAULT_HISTORY, held: int = DEFAULT_HELD) -> None:
        self._lock = threading.Lock()
        self._feed = next(_feed_ids)
        self._seq = 0
        self._prints: dict[str, Hashable] = {}
        #: (seq, ids changed at that seq), oldest first; ``_held`` ids in all
        self._history: deque[tuple[int, frozenset[str]]] = deque()
        self._held = 0
        self._max_steps = max(1, history)
        self._max_held = held
        #: the oldest seq whose changes are still all in the history
        self._floor = 0
        self._pending: set[str] = set()
        self._volatile: set[str] = set()

    @property
    def seq(self) -> int:
        return self._seq

    def advance(self, fingerprints: Mapping[str, Hashable]) -> None:
        """A new complete listing: record what differs from the last one."""
        with self._lock:
            old = self._prints
            changed = {i for i, p in fingerprints.items() if old.get(i, _ABSENT) != p}
            changed.update(i for i in old if i not in fingerprints)
            changed |= self._pending
            self._pending = set()
            self._prints = dict(fingerprints)
            self._step(changed)

    def touch(self, ids: Iterable[str]) -> None:
        """Something the listing does not show changed for ``ids``: named by the next answer."""
        with self._lock:
            self._pending.update(ids)

    def volatile(self, submission_id: str, flag: bool) -> None:
        """Whether ``submission_id``'s last status came from somewhere other than the listing
        (then it is named in every answer until it did again)."""
        with self._lock:
            if flag:
                self._volatile.add(submission_id)
            else:
                self._volatile.discard(submission_id)

    def forget(self, ids: Iterable[str]) -> None:
        """Submissions nobody will ask about again (e.g. dropped from the listing long ago)."""
        with self._lock:
            for i in ids:
                self._volatile.discard(i)
                self._pending.discard(i)

    def changes(self, since: Mark | None) -> Changes:
        """The submissions changed after ``since`` (everything is "unknown" for a foreign or
        too old mark), plus the volatile ones and those touched since the last listing."""
        with self._lock:
            if self._pending:  # touched since the last listing: a step of their own
                self._step(set(self._pending))
                self._pending = set()
            mark = Mark(self._feed, self._seq)
            if since is None or since.feed != self._feed or since.seq < self._floor:
                return Changes(mark, None)
            changed: set[str] = set(self._volatile)
            for seq, ids in reversed(self._history):
                if seq <= since.seq:
                    break
                changed |= ids
            return Changes(mark, frozenset(changed))

    def _step(self, changed: set[str]) -> None:
        self._seq += 1
        self._history.append((self._seq, frozenset(changed)))
        self._held += len(changed)
        limit = max(self._max_held, 2 * len(self._prints))
        while len(self._history) > 1 and (
            len(self._history) > self._max_steps or self._held > limit
        ):
            seq, ids = self._history.popleft()
            self._held -= len(ids)
            self._floor = seq  # a mark before the dropped step cannot be told any more


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


_ABSENT = _Absent()
