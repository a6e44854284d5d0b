"""The submission gate in a reconcile tick: read what it needs, decide (pure), take the tokens.

Every submission a tick plans -- a start, a restart after a failure, a failover's submission on
its target (the owner's ``Submit`` for a job an operation switched) -- passes through
:meth:`SubmissionGate.admit` before anything is recorded or sent. A ``Resubmit`` (a run whose
intent was recorded before a crash, looked up on its cluster and not found) was admitted when
its intent was recorded and is not gated again.

One round:

1. **read** (one transaction, only when it matters): the buckets of the candidates' businesses
   that have a rate limit, and the submissions in flight and live applications on the
   candidates' clusters that have a cap (counted from every node's runs);
2. **decide**: ``scheduler.decisions.gate.admit`` (pure): round robin between businesses, priority
within,
   tokens and room;
3. **take**: the tokens the admitted candidates spend, with a conditional write per business
   (``scheduler.store.quotas.take_tokens``). When other nodes took tokens meanwhile, the last
   admitted candidates of that business wait instead;
4. **publish** (one transaction): the queue rows (position, reason) of the jobs held back, the
   rows of the jobs admitted or no longer waiting deleted, and an event on each job whose kind
   of wait changed (not every tick). The reconciler moves a job that is not QUEUED yet to
   QUEUED (a fenced write with its own event).

Caps are checked against the store's count at the start of the round, so nodes deciding at the
very same moment may overshoot a cap by what each of them admits in that round; one node never
does. Positions are a job's place among the submissions its owner waits to make.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from scheduler.core.records import ClusterRecord, JobRecord
from scheduler.core.states import JobState
from scheduler.decisions import gate
from scheduler.decisions.gate import Bucket, Candidate, ClusterLoad, Loads, QueueRow, Waiting

#: seconds between rewrites of queue rows whose position alone changed
POSITION_REFRESH = 1.0


class GateStore(Protocol):
    """The gate's narrow interface to the store (``scheduler.store.quotas.SqlGateStore``)."""

    def read(
        self, businesses: Iterable[str], clusters: Iterable[str]
    ) -> tuple[dict[str, Bucket], Loads]:
        """The rate-limited buckets among ``businesses`` and the loads of ``clusters``."""
        ...

    def take(self, wanted: Mapping[str, int], now: datetime) -> dict[str, int]:
        """Take tokens (conditional writes); how many each business got."""
        ...

    def publish(
        self,
        rows: Mapping[int, QueueRow],
        cleared: Iterable[int],
        events: Mapping[int, str] = ...,
    ) -> None:
        """Replace the queue rows of ``rows``' jobs, delete those of ``cleared``, and add the
        job events ``events`` (job id -> message), in one transaction."""
        ...


@dataclass(frozen=True)
class Held:
    """A job the gate holds back this round."""

    job: JobRecord
    waiting: Waiting
    #: the kind of its wait changed since the last round (or it just started waiting)
    changed: bool


@dataclass
class Round:
    admitted: list[JobRecord]
    held: list[Held]


class SubmissionGate:
    """One reconciler's gate (keeps what it last published, to write only what changed)."""

    def __init__(self, store: GateStore) -> None:
        self._store = store
        #: job id -> the row this gate last published for it
        self._published: dict[int, QueueRow] = {}
        self._published_at: float = float("-inf")
        self._first = True

    @property
    def waiting(self) -> int:
        """How many jobs this gate held back in its last round."""
        return len(self._published)

    def admit(
        self,
        jobs: Sequence[tuple[JobRecord, str]],
        clusters: Mapping[str, ClusterRecord],
        now: datetime,
    ) -> Round:
        """Which of ``jobs`` (each with the cluster it would be submitted to) go now."""
        if not jobs and not self._published:
            return Round([], [])
        by_name = {job.name: job for job, _ in jobs}
        candidates = [
            Candidate(
                job=job.name,
                business=job.business or gate.NO_BUSINESS,
                priority=job.priority,
                cluster=cluster,
                waiting_since=self._since(job).timestamp(),
            )
            for job, cluster in jobs
        ]
        capped = sorted(
            {
                c.cluster
                for c in candidates
                if (record := clusters.get(c.cluster)) is not None
                and (record.max_concurrent_submissions or record.max_running_apps)
            }
        )
        businesses = sorted({c.business for c in candidates if c.business})
        buckets: dict[str, Bucket] = {}
        cluster_loads: dict[str, ClusterLoad] = {}
        if candidates and (capped or businesses):
            buckets, counted = self._store.read(businesses, capped)
            for name in capped:
                record = clusters[name]
                cluster_loads[name] = ClusterLoad(
                    in_flight=counted.in_flight.get(name, 0),
                    running=counted.running.get(name, 0),
                    max_in_flight=record.max_concurrent_submissions,
                    max_running=record.max_running_apps,
                )
        decision = gate.admit(candidates, buckets, cluster_loads, now.timestamp())
        admitted = list(decision.admitted)
        waiting = dict(decision.waiting)
        if decision.taken:
            granted = self._store.take(decision.taken, now)
            for business, taken in decision.taken.items():
                short = taken - granted.get(business, 0)
                if short <= 0:
                    continue
                # other nodes took tokens meanwhile: the last ones of this business wait
                mine = [c for c in admitted if c.business == business][-short:]
                for c in mine:
                    admitted.remove(c)
                    bucket = buckets[business]
                    waiting[c.job] = Waiting(
                        0,
                        f"business {business} is at its rate ({bucket.rate:g}/s, burst "
                        f"{bucket.burst})",
                        gate.RATE,
                    )
        waiting = _renumbered(candidates, waiting)
        held = self._publish(by_name, waiting, [by_name[c.job].id for c in admitted], now)
        return Round([by_name[c.job] for c in admitted], held)

    def _since(self, job: JobRecord) -> datetime:
        row = self._published.get(job.id)
        return row.since if row is not None else job.updated_at

    def _publish(
        self,
        jobs: Mapping[str, JobRecord],
        waiting: Mapping[str, Waiting],
        admitted_ids: list[int],
        now: datetime,
    ) -> list[Held]:
        held: list[Held] = []
        rows: dict[int, QueueRow] = {}
        events: dict[int, str] = {}
        moved = False  # a row whose position alone changed
        for name, w in waiting.items():
            job = jobs[name]
            before = self._published.get(job.id)
            row = QueueRow(w.position, w.kind, w.reason, before.since if before else now)
            changed = before is None or before.kind != w.kind
            held.append(Held(job, w, changed))
            if changed and job.state == JobState.QUEUED:  # else its move to QUEUED says it
                events[job.id] = f"waiting at the submission gate: {w.reason}"
            if before is None or (before.kind, before.reason) != (row.kind, row.reason):
                rows[job.id] = row
            elif before.position != row.position:
                moved = True
        stamp = now.timestamp()
        if moved and stamp - self._published_at >= POSITION_REFRESH:
            for h in held:
                before = self._published.get(h.job.id)
                rows[h.job.id] = QueueRow(
                    h.waiting.position,
                    h.waiting.kind,
                    h.waiting.reason,
                    before.since if before is not None else now,
                )
        waiting_ids = {jobs[name].id for name in waiting}
        # the admitted jobs' rows: those this gate wrote; in its first round all of them (rows
        # a node that owned the jobs before may have left)
        admitted = set(admitted_ids) if self._first else set(admitted_ids) & set(self._published)
        self._first = False
        cleared = (set(self._published) - waiting_ids) | admitted
        if rows or cleared or events:
            self._store.publish(rows, sorted(cleared), events)
            self._published_at = stamp
        published = {i: r for i, r in self._published.items() if i in waiting_ids}
        published.update(rows)
        self._published = published
        return held

    def forget(self, job_ids: Iterable[int]) -> None:
        """Jobs this gate no longer speaks for (another node took them)."""
        for job_id in job_ids:
            self._published.pop(job_id, None)


def _renumbered(
    candidates: Sequence[Candidate], waiting: Mapping[str, Waiting]
) -> dict[str, Waiting]:
    """Positions 1..n in the gate's serving order."""
    order = [c.job for c in gate.serving_order(candidates) if c.job in waiting]
    return {
        name: Waiting(i, waiting[name].reason, waiting[name].kind, waiting[name].ready_in)
        for i, name in enumerate(order, start=1)
    }
