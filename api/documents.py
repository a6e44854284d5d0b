"""Job documents (``JobPublic`` as JSON) memoized on the stored rows they are made of.

A page of ``GET /v1/jobs`` spends most of its time turning rows into documents: a record of
each row, a validated model of each record, JSON of each model (~150 µs a job, 50 a page). A
polling UI and internal services read the same pages again and again while most jobs do not
change. So the page is read as raw rows (``reads.page_job_rows``: the driver's values, a hashable
tuple of everything the document shows) and each row's JSON is kept here, keyed by the row.

Why this is never stale, with any number of nodes writing: the key *is* the stored data. A
change of the job, its current run, the run's progress or its queue row, made by any node, is a
different row and so a different key; the old entry is never asked for again and ages out. The
one thing a document shows that is not in its row is time: ``self_fencing`` of a started run
without fence checks turns from null to false when the check-in grace ends. An entry made before
that instant (``selffencing.self_fencing_settles_at``) is good only until it.

Bounded: at most ``capacity`` documents (``DROVER_API_JOB_DOCUMENTS``), the oldest made dropped
first; 0 turns the memo off.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from datetime import UTC, datetime
from typing import Any, TypeGuard

from prometheus_client import Counter

from api.schemas.resources import JobPublic, ReplicationPublic
from scheduler.core.records import JobRecord
from scheduler.core.states import JobState
from scheduler.decisions.gate import QueueRow
from scheduler.decisions.selffencing import self_fencing_settles_at
from scheduler.store.reads import RawJobRow


class _Uncounted:
    def inc(self, amount: float = 1) -> None:
        return None


def job_document(
    job: JobRecord,
    queue: QueueRow | None,
    now: datetime | None = None,
    replication: ReplicationPublic | None = None,
) -> tuple[bytes, datetime | None]:
    """A job's document at ``now`` (its queue place when QUEUED; ``replication``: in the job's
    own ``GET`` only) and the instant from which it may read differently with no change of the
    job (None: never)."""
    public = JobPublic.of(
        job, replication, queue if job.state == JobState.QUEUED else None, now=now
    )
    return (
        public.__pydantic_serializer__.to_json(public, by_alias=True),
        self_fencing_settles_at(job.current_run),
    )


def _good(
    entry: tuple[bytes, datetime | None] | None, now: datetime
) -> TypeGuard[tuple[bytes, datetime | None]]:
    """``entry`` (a document and when it may read differently) still shows what it would now."""
    return entry is not None and (entry[1] is None or now < entry[1])


class JobDocuments:
    """The memo (see the module docstring); safe to share between the API's threads."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._documents: dict[Hashable, tuple[bytes, datetime | None]] = {}
        self._lock = threading.Lock()
        self._hits: Any = _Uncounted()
        self._misses: Any = _Uncounted()

    def count_on(self, counter: Counter) -> None:
        """Count hits and misses on ``counter`` (``drover_api_job_documents_total{result}``
        of the app's own registry, the one ``/metrics`` serves)."""
        self._hits = counter.labels(result="hit")
        self._misses = counter.labels(result="miss")

    def __len__(self) -> int:
        return len(self._documents)

    def document(
        self,
        key: Hashable,
        make: Callable[[datetime], tuple[bytes, datetime | None]],
        now: datetime | None = None,
    ) -> bytes:
        """The document memoized under ``key`` (a stored row, whole), made by ``make(now)`` --
        its JSON, and when it may read differently (None: never) -- when there is no good one."""
        now = now or datetime.now(UTC)
        entry = self._documents.get(key)
        if _good(entry, now):
            self._hits.inc()
            return entry[0]
        entry = make(now)
        self._misses.inc()
        self._keep([(key, entry)])
        return entry[0]

    def of_rows(
        self,
        rows: list[RawJobRow],
        record: Callable[[RawJobRow], tuple[JobRecord, QueueRow | None]],
        now: datetime | None = None,
    ) -> list[bytes]:
        """The documents of ``rows``, in order; ``record`` makes a row's job and queue row when
        the memo has no good document of it."""
        now = now or datetime.now(UTC)
        documents: list[bytes] = []
        made: list[tuple[Hashable, tuple[bytes, datetime | None]]] = []
        known = self._documents
        for row in rows:
            entry = known.get(row)
            if not _good(entry, now):
                entry = job_document(*record(row), now)
                made.append((row, entry))
            documents.append(entry[0])
        if made:
            self._misses.inc(len(made))
            self._keep(made)
        if len(made) < len(rows):
            self._hits.inc(len(rows) - len(made))
        return documents

    def _keep(self, made: list[tuple[Hashable, tuple[bytes, datetime | None]]]) -> None:
        if self.capacity <= 0:
            return
        with self._lock:
            known = self._documents
            for row, entry in made:
                known.pop(row, None)  # a renewed entry goes to the young end
                known[row] = entry
            excess = len(known) - self.capacity
            if excess > 0:
                for row in [row for row, _ in zip(known, range(excess), strict=False)]:
                    del known[row]
