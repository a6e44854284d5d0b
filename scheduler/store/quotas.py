"""Business quotas, their shared token buckets, and the submission queue (the store's side of
the submission gate, ``scheduler.decisions.gate``).

Every SQL statement of the submission gate: the quota catalog (``/v1/quotas``), the dedicated
groups' rules, what a reconcile tick's gate reads (buckets, cluster loads), the conditional
write that takes tokens from a bucket, and the queue rows (position and reason of each job the
gate holds back). The decisions are ``scheduler.decisions.gate`` (pure); the tick's use of them is
``scheduler.loops.gate``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, delete, func, insert, or_, select, update
from sqlalchemy.orm import Session

from scheduler.core.clock import utcnow
from scheduler.core.errors import Conflict, InvalidInput, NotFound, PreconditionFailed
from scheduler.core.paging import KeyPart, Window
from scheduler.core.states import RunState
from scheduler.decisions import quotas
from scheduler.decisions.gate import Bucket, Loads, QueueRow
from scheduler.decisions.quotas import QuotaRecord, QuotaSpec
from scheduler.store import paging
from scheduler.store.db import Store
from scheduler.store.mapping import from_row
from scheduler.store.models import (
    BusinessQuota,
    Group,
    Job,
    JobEvent,
    QueueEntry,
    Run,
)

#: run states that count as a submission in flight (submitted, application not running yet)
IN_FLIGHT = (RunState.SUBMITTING.value, RunState.STARTING.value)
#: run states that count as a live application on the cluster
LIVE = (RunState.RUNNING.value, RunState.STOPPING.value)
#: conditional writes tried per business before a take gives up for this tick
TAKE_ATTEMPTS = 5


def _record(q: BusinessQuota) -> QuotaRecord:
    return from_row(QuotaRecord, q)


# -- the catalog --------------------------------------------------------------------------------


def page_quotas(
    session: Session, window: Window
) -> tuple[list[QuotaRecord], tuple[KeyPart, ...] | None]:
    """One page of the quotas by business."""
    rows, next_key = paging.read_page(
        session,
        select(BusinessQuota),
        (BusinessQuota.business,),
        window,
        lambda q: (q.business,),
    )
    return [_record(q) for q in rows], next_key


def count_quotas(session: Session) -> int:
    return paging.count(session, select(BusinessQuota.business))


def get_quota(session: Session, business: str) -> QuotaRecord:
    row = session.get(BusinessQuota, quotas.validate_business(business))
    if row is None:
        raise NotFound(f"business {business!r} has no quota")
    return _record(row)


def find_quota(session: Session, business: str) -> QuotaRecord | None:
    row = session.get(BusinessQuota, business) if business else None
    return _record(row) if row is not None else None


def put_quota(
    session: Session,
    business: str,
    spec: QuotaSpec,
    *,
    by: str,
    expected_version: int | None = None,
) -> tuple[QuotaRecord, bool]:
    """Create or replace a business's quota; returns it and whether it was created.

    A new quota starts with a full bucket; a changed one keeps its tokens (at most the new
    burst). Binding the business to a dedicated group needs every job of the business in that
    group and no job of another business there (Conflict otherwise: move them first)."""
    business = quotas.validate_business(business)
    spec = quotas.validate_quota(spec)
    row = session.get(BusinessQuota, business, with_for_update=True)
    if expected_version is not None and (row is None or row.version != expected_version):
        raise PreconditionFailed(
            f"the quota of {business!r} is at version {row.version if row else 'none'}, "
            f"not {expected_version}"
        )
    if spec.dedicated_group is not None:
        _check_dedication(session, business, spec.dedicated_group)
    now = utcnow()
    if row is None:
        row = BusinessQuota(
            business=business,
            rate=spec.rate,
            burst=spec.burst,
            dedicated_group=spec.dedicated_group,
            yarn_queue=spec.yarn_queue,
            tokens=float(spec.burst),
            refilled_at=now,
            bucket_version=1,
            version=1,
            updated_by=by,
            created_at=now,
            updated_at=now,
        )
        session.add(row)
        session.flush()
        return _record(row), True
    row.rate = spec.rate
    row.burst = spec.burst
    row.dedicated_group = spec.dedicated_group
    row.yarn_queue = spec.yarn_queue
    row.tokens = min(row.tokens, float(spec.burst))
    row.bucket_version += 1
    row.version += 1
    row.updated_by = by
    row.updated_at = now
    session.flush()
    return _record(row), False


def delete_quota(session: Session, business: str, *, expected_version: int | None = None) -> None:
    row = session.get(BusinessQuota, quotas.validate_business(business), with_for_update=True)
    if row is None:
        raise NotFound(f"business {business!r} has no quota")
    if expected_version is not None and row.version != expected_version:
        raise PreconditionFailed(
            f"the quota of {business!r} is at version {row.version}, not {expected_version}"
        )
    session.delete(row)
    session.flush()


def _check_dedication(session: Session, business: str, group: str) -> None:
    if session.get(Group, group) is None:
        raise InvalidInput(f"no group named {group!r}")
    elsewhere = session.scalar(
        select(func.count(Job.id)).where(Job.business == business, Job.group_name != group)
    )
    if elsewhere:
        raise Conflict(
            f"business {business!r} has {elsewhere} job(s) outside group {group!r}; move or "
            "recreate them in that group before dedicating it"
        )
    bound = select(BusinessQuota.business).where(BusinessQuota.dedicated_group == group)
    others = session.scalar(
        select(func.count(Job.id)).where(
            Job.group_name == group, Job.business != business, Job.business.not_in(bound)
        )
    )
    if others:
        raise Conflict(
            f"group {group!r} holds {others} job(s) of other businesses; a dedicated group "
            "holds only the jobs of the businesses bound to it"
        )


_QUOTAS = BusinessQuota.__table__
#: the dedications that concern some businesses and groups: the businesses' own, and any
#: binding to the groups (a batch of creations reads them with its other facts, in one
#: statement of ``jobs.py``; a single check, :func:`placements`, alone)
DEDICATIONS_WHERE = (
    _QUOTAS.c.dedicated_group.is_not(None),
    or_(
        _QUOTAS.c.business.in_(bindparam("businesses", expanding=True)),
        _QUOTAS.c.dedicated_group.in_(bindparam("groups", expanding=True)),
    ),
)
_DEDICATIONS = select(_QUOTAS.c.business, _QUOTAS.c.dedicated_group).where(*DEDICATIONS_WHERE)


@dataclass(frozen=True)
class Placements:
    """What decides where jobs of some businesses may live (:func:`placements`)."""

    #: business -> the dedicated group it is bound to (absent: bound to none)
    bound_to: dict[str, str]
    #: of the groups asked about, those some business is bound to
    dedicated: frozenset[str]

    def refusal(self, business: str, group: str) -> str | None:
        """Why a job of ``business`` may not live in ``group`` (None: it may): a business bound
        to a dedicated group has its jobs there, and a dedicated group takes no other
        business's jobs."""
        bound_to = self.bound_to.get(business)
        if bound_to is not None and bound_to != group:
            return (
                f"business {business!r} is bound to the dedicated group {bound_to!r}: its jobs "
                "belong there"
            )
        if bound_to is None and group in self.dedicated:
            return (
                f"group {group!r} is dedicated to other businesses; business "
                f"{business or '(none)'!r} is not bound to it"
            )
        return None


def placements(session: Session, businesses: Iterable[str], groups: Iterable[str]) -> Placements:
    """The dedications of ``businesses`` and to ``groups`` (one statement)."""
    connection = session.connection()  # quotas change in their own requests: nothing to flush
    wanted = set(groups)
    rows = connection.execute(
        _DEDICATIONS, {"businesses": sorted(set(businesses)), "groups": sorted(wanted)}
    ).all()
    return placements_of(rows, wanted)


def placements_of(dedications: Iterable[Sequence[str]], groups: Iterable[str]) -> Placements:
    """The placements of the (business, dedicated group) rows that ``DEDICATIONS_WHERE`` keeps
    for some businesses and ``groups``."""
    wanted, rows = set(groups), list(dedications)
    return Placements(
        bound_to={business: group for business, group in rows},
        dedicated=frozenset(group for _, group in rows if group in wanted),
    )


def check_job_placement(session: Session, business: str, group: str) -> None:
    """A job of ``business`` may live in ``group`` (InvalidInput otherwise: see
    :meth:`Placements.refusal`)."""
    refusal = placements(session, [business], [group]).refusal(business, group)
    if refusal is not None:
        raise InvalidInput(refusal)


# -- what a tick's gate reads and writes ----------------------------------------------------------


def buckets(session: Session, businesses: Iterable[str]) -> dict[str, Bucket]:
    """The buckets of those of ``businesses`` that have a rate limit."""
    wanted = sorted({b for b in businesses if b})
    if not wanted:
        return {}
    rows = session.scalars(
        select(BusinessQuota).where(
            BusinessQuota.business.in_(wanted), BusinessQuota.rate.is_not(None)
        )
    )
    found = {}
    for q in rows:
        bucket = _record(q).bucket()
        if bucket is not None:
            found[q.business] = bucket
    return found


def loads(session: Session, clusters: Iterable[str]) -> Loads:
    wanted = sorted(set(clusters))
    in_flight: dict[str, int] = dict.fromkeys(wanted, 0)
    running: dict[str, int] = dict.fromkeys(wanted, 0)
    if not wanted:
        return Loads(in_flight, running)
    rows = session.execute(
        select(Run.cluster_name, Run.state, func.count())
        .where(Run.state.in_(IN_FLIGHT + LIVE), Run.cluster_name.in_(wanted))
        .group_by(Run.cluster_name, Run.state)
    )
    for cluster, state, count in rows:
        target = in_flight if state in IN_FLIGHT else running
        target[cluster] = target.get(cluster, 0) + int(count)
    return Loads(in_flight, running)


def take_tokens(store: Store, wanted: Mapping[str, int], now: datetime) -> dict[str, int]:
    """Take up to ``wanted[business]`` tokens from each business's bucket; returns how many
    each got (fewer when other nodes took some meanwhile).

    Each take is a conditional write on the bucket's version (read, refill to ``now``, write
    back where the version is still the one read), retried a few times under contention: every
    node's takes add up to at most what the bucket holds, whatever the interleaving."""
    granted: dict[str, int] = {}
    for business, n in sorted(wanted.items()):
        granted[business] = 0
        if n <= 0:
            continue
        for _ in range(TAKE_ATTEMPTS):
            with store.transaction() as session:
                # FOR UPDATE: on MySQL the nodes' takes queue on the row instead of failing
                # their conditional writes under contention (SQLite serializes its writers)
                row = session.get(BusinessQuota, business, with_for_update=True)
                if row is None or row.rate is None:  # the quota went away: no limit
                    granted[business] = n
                    break
                bucket = Bucket(row.rate, row.burst, row.tokens, row.refilled_at.timestamp())
                bucket = bucket.refilled(now.timestamp())
                take = min(n, bucket.available)
                result = session.execute(
                    update(BusinessQuota)
                    .where(
                        BusinessQuota.business == business,
                        BusinessQuota.bucket_version == row.bucket_version,
                    )
                    .values(
                        tokens=bucket.tokens - take,
                        refilled_at=now if now > row.refilled_at else row.refilled_at,
                        bucket_version=row.bucket_version + 1,
                    )
                    .execution_options(synchronize_session=False)
                )
                if result.rowcount == 1:  # type: ignore[attr-defined]
                    granted[business] = take
                    break
    return granted


def write_queue(
    session: Session,
    node_id: str,
    rows: Mapping[int, QueueRow],
    cleared: Iterable[int],
    events: Mapping[int, str] | None = None,
) -> None:
    """Replace the queue rows of ``rows``' jobs, delete those of ``cleared``, add the job events
    ``events`` (a delete and two batched inserts, whatever the number of jobs)."""
    if events:
        now = utcnow()
        session.execute(
            insert(JobEvent),
            [
                {
                    "job_id": job_id,
                    "run_id": None,
                    "at": now,
                    "from_state": None,
                    "to_state": None,
                    "cause": "gate",
                    "message": message,
                    "node_id": node_id,
                }
                for job_id, message in sorted(events.items())
            ],
        )
    gone = sorted(set(cleared) | set(rows))
    for start in range(0, len(gone), 500):
        chunk = gone[start : start + 500]
        session.execute(delete(QueueEntry).where(QueueEntry.job_id.in_(chunk)))
    if rows:
        now = utcnow()
        session.execute(
            insert(QueueEntry),
            [
                {
                    "job_id": job_id,
                    "position": r.position,
                    "kind": r.kind,
                    "reason": r.reason,
                    "node_id": node_id,
                    "since": r.since,
                    "updated_at": now,
                }
                for job_id, r in sorted(rows.items())
            ],
        )


def queue_of(session: Session, job_ids: Iterable[int]) -> dict[int, QueueRow]:
    """The queue rows of those of ``job_ids`` the gate holds back."""
    ids = sorted(set(job_ids))
    found: dict[int, QueueRow] = {}
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        for e in session.scalars(select(QueueEntry).where(QueueEntry.job_id.in_(chunk))):
            found[e.job_id] = QueueRow(e.position, e.kind, e.reason, e.since)
    return found


class SqlGateStore:
    """The gate's interface to the store (``scheduler.loops.gate.GateStore``)."""

    def __init__(self, store: Store, node_id: str) -> None:
        self._store = store
        self._node_id = node_id

    def read(
        self, businesses: Iterable[str], clusters: Iterable[str]
    ) -> tuple[dict[str, Bucket], Loads]:
        with self._store.transaction() as session:
            return buckets(session, businesses), loads(session, clusters)

    def take(self, wanted: Mapping[str, int], now: datetime) -> dict[str, int]:
        return take_tokens(self._store, wanted, now)

    def publish(
        self,
        rows: Mapping[int, QueueRow],
        cleared: Iterable[int],
        events: Mapping[int, str] | None = None,
    ) -> None:
        with self._store.transaction() as session:
            write_queue(session, self._node_id, rows, cleared, events)


def yarn_queues(session: Session) -> dict[str, str]:
    """The YARN queue of every business that has one (the gate's configuration)."""
    rows = session.execute(
        select(BusinessQuota.business, BusinessQuota.yarn_queue).where(
            BusinessQuota.yarn_queue.is_not(None)
        )
    )
    return {business: queue for business, queue in rows if queue}


class YarnQueues:
    """The businesses' YARN queues for submissions, read at most every ``ttl`` seconds (a quota
    change reaches the next submissions within that)."""

    def __init__(self, store: Store, ttl: float = 5.0) -> None:
        self._store = store
        self._ttl = ttl
        self._lock = threading.Lock()
        self._queues: dict[str, str] = {}
        self._read_at = float("-inf")

    def queue_of(self, business: str) -> str | None:
        with self._lock:
            if time.monotonic() - self._read_at > self._ttl:
                with self._store.session() as session:
                    self._queues = yarn_queues(session)
                self._read_at = time.monotonic()
            return self._queues.get(business)
