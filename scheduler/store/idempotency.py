"""Idempotency keys in the store (``scheduler.decisions.idempotency`` says what they are for).

Each function takes a session; the caller owns the transaction. :func:`reserve` runs in a
transaction of its own before the request's work; :func:`mark_applied` runs inside the work's own
transaction (so "the change committed" and "the key is applied" are one fact); :func:`record_answer`
or :func:`release` end the request.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from scheduler.core.errors import StaleWrite
from scheduler.decisions.idempotency import LEASE_S, Decision, KeyState, StoredKey, decide
from scheduler.store.models import IdempotencyKey


@dataclass(frozen=True)
class Reservation:
    """A key held by one request (``holder``) until its lease runs out."""

    id: int
    holder: str
    key: str


@dataclass(frozen=True)
class Answer:
    """A recorded answer."""

    status: int
    headers: dict[str, str]
    body: str


@dataclass(frozen=True)
class Outcome:
    decision: Decision
    reservation: Reservation | None = None
    answer: Answer | None = None
    #: the operation the key was first sent with (for a reused key's message)
    operation: str = ""


class KeyRace(Exception):
    """Two requests inserted the same new key at once: the loser asks again."""


def reserve(
    session: Session,
    *,
    subject: str,
    key: str,
    fingerprint: str,
    operation: str,
    now: datetime,
    ttl_s: float,
    lease_s: float = LEASE_S,
) -> Outcome:
    """What to do with a request carrying ``key`` (``scheduler.decisions.idempotency.decide``),
    reserving the key for it when it is to do its work. Raises KeyRace when another request inserted
    the same new key in the meantime (ask again in a new transaction)."""
    row = session.scalars(
        select(IdempotencyKey)
        .where(IdempotencyKey.subject == subject, IdempotencyKey.key == key)
        .with_for_update()
    ).first()
    stored = None
    if row is not None:
        stored = StoredKey(row.fingerprint, KeyState(row.state), row.locked_until, row.expires_at)
    decision = decide(stored, fingerprint, now)
    holder = secrets.token_hex(16)
    if decision is Decision.RESERVE:
        if row is not None:  # expired: its answer is forgotten
            session.delete(row)
            session.flush()
        row = IdempotencyKey(
            subject=subject,
            key=key,
            fingerprint=fingerprint,
            operation=operation,
            state=KeyState.PENDING.value,
            holder=holder,
            locked_until=now + timedelta(seconds=lease_s),
            created_at=now,
            expires_at=now + timedelta(seconds=ttl_s),
        )
        session.add(row)
        try:
            session.flush()
        except IntegrityError as exc:
            raise KeyRace(key) from exc
        return Outcome(decision, Reservation(row.id, holder, key))
    assert row is not None
    if decision is Decision.TAKE_OVER:
        row.holder = holder
        row.locked_until = now + timedelta(seconds=lease_s)
        session.flush()
        return Outcome(decision, Reservation(row.id, holder, key))
    if decision is Decision.REPLAY:
        answer = Answer(
            row.status_code or 200, dict(row.response_headers or {}), row.response_body or ""
        )
        return Outcome(decision, answer=answer, operation=row.operation)
    return Outcome(decision, operation=row.operation)


def mark_applied(session: Session, reservation: Reservation) -> None:
    """In the request's own transaction: its change is committed with it. StaleWrite when the key
    is no longer this request's (its lease ran out and a retry took it over): the transaction
    must not commit then."""
    result: Any = session.execute(
        update(IdempotencyKey)
        .where(
            IdempotencyKey.id == reservation.id,
            IdempotencyKey.holder == reservation.holder,
            IdempotencyKey.state.in_([KeyState.PENDING.value, KeyState.APPLIED.value]),
        )
        .values(state=KeyState.APPLIED.value)
    )
    if result.rowcount != 1:
        raise StaleWrite(
            f"Idempotency-Key {reservation.key!r} was taken over by a retry: this request's "
            "change is not committed"
        )


def record_answer(session: Session, reservation: Reservation, answer: Answer) -> bool:
    """Keep the answer for retries; False when the key is no longer this request's."""
    result: Any = session.execute(
        update(IdempotencyKey)
        .where(IdempotencyKey.id == reservation.id, IdempotencyKey.holder == reservation.holder)
        .values(
            state=KeyState.DONE.value,
            status_code=answer.status,
            response_headers=dict(answer.headers),
            response_body=answer.body,
        )
    )
    return bool(result.rowcount == 1)


def applied(session: Session, reservation: Reservation) -> bool:
    """Whether the request's change committed (its transaction marked the key)."""
    state = session.scalar(
        select(IdempotencyKey.state).where(
            IdempotencyKey.id == reservation.id, IdempotencyKey.holder == reservation.holder
        )
    )
    return state == KeyState.APPLIED.value


def release(session: Session, reservation: Reservation) -> None:
    """Forget a key whose request changed nothing (it failed): a retry does the work afresh."""
    session.execute(
        delete(IdempotencyKey).where(
            IdempotencyKey.id == reservation.id,
            IdempotencyKey.holder == reservation.holder,
            IdempotencyKey.state == KeyState.PENDING.value,
        )
    )


def purge_expired(session: Session, now: datetime, most: int = 500) -> int:
    """Delete up to ``most`` expired keys (oldest first); how many."""
    ids = list(
        session.scalars(
            select(IdempotencyKey.id)
            .where(IdempotencyKey.expires_at <= now)
            .order_by(IdempotencyKey.expires_at)
            .limit(most)
        )
    )
    if ids:
        session.execute(delete(IdempotencyKey).where(IdempotencyKey.id.in_(ids)))
    return len(ids)
