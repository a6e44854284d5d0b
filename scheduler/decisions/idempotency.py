"""Idempotency keys: what a request carrying an ``Idempotency-Key`` does (pure).

A client that may retry a write (a timeout, a dropped connection, a restarted pipeline) sends a
key of its choosing with it. The first request with a key *reserves* it, does its work, and
records its answer; a retry with the same key gets that answer back and changes nothing again.
The key is the caller's own (scoped to its subject) and expires after a while (a day by default).

A stored key is in one of three states:

- ``pending``: a request holds it (until ``locked_until``: a lease, so that a request whose node
  died does not block the key for ever) and has changed nothing yet;
- ``applied``: the request's change committed (marked in the change's own transaction), its answer
  is not recorded yet;
- ``done``: the answer is recorded.

:func:`decide` says what a request with a key does, given the key as stored (or none).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime

#: a key: 1 to 255 visible ASCII characters (a UUID is the usual choice)
KEY_PATTERN = r"^[\x21-\x7e]{1,255}$"
#: how long a pending key belongs to the request that reserved it
LEASE_S = 60.0


class KeyState(enum.StrEnum):
    PENDING = "pending"
    APPLIED = "applied"
    DONE = "done"


@dataclass(frozen=True)
class StoredKey:
    """A key as the store holds it."""

    fingerprint: str
    state: KeyState
    locked_until: datetime
    expires_at: datetime


class Decision(enum.Enum):
    #: no live key: reserve it and do the work
    RESERVE = "reserve"
    #: the key's holder died (its lease ran out) before changing anything: take it over and work
    TAKE_OVER = "take-over"
    #: send the recorded answer back; do nothing
    REPLAY = "replay"
    #: another request holds the key now: wait for its answer (then replay), or refuse (409)
    WAIT = "wait"
    #: the change committed but its holder died before recording the answer: refuse (409), never
    #: do it again
    LOST_ANSWER = "lost-answer"
    #: the key came with another request: refuse (422)
    REUSED = "reused"


def decide(stored: StoredKey | None, fingerprint: str, now: datetime) -> Decision:
    if stored is None or stored.expires_at <= now:
        return Decision.RESERVE
    if stored.fingerprint != fingerprint:
        return Decision.REUSED
    if stored.state is KeyState.DONE:
        return Decision.REPLAY
    if stored.locked_until > now:  # its holder is at work (or recording its answer)
        return Decision.WAIT
    if stored.state is KeyState.APPLIED:
        return Decision.LOST_ANSWER
    return Decision.TAKE_OVER
