"""The submission gate: which of the submissions a tick wants to make may go now (pure).

During a mass failover or restart one business must not starve another, and critical jobs go
first. Every submission a reconcile tick plans (a start, a restart,
a failover's resubmission) passes through :func:`admit`:

- **per-business token buckets**: a business with a quota gets ``rate`` submissions per second
  with bursts up to ``burst`` (a bucket holds at most ``burst`` tokens and refills continuously);
  a business without a quota is not rate limited;
- **per-cluster caps**: at most ``max_in_flight`` submissions in flight on a cluster (submitted,
  application not running yet) and at most ``max_running`` live applications (0 = no cap);
- **order**: within a business ``high`` before ``normal`` before ``low``, then the longest
  waiting first, then by name; between businesses **round robin** (one submission each in turn),
  so no business waits behind another's burst: a business out of tokens simply drops out of the
  turn until its bucket refills;
- everything not admitted stays ``QUEUED`` with its **position** (its place in the order the
  gate would serve the waiting jobs if nothing limited it) and the **reason** it waits.

Buckets live in the store (one row per business, shared by all nodes; the store takes the
tokens a tick spends with a conditional write), so the rates hold for the deployment as a whole.
The caps are counted from the store's view of every node's in-flight submissions at the start of
the tick, so nodes deciding at the same moment may overshoot a cap by at most what each admits in
that tick.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from scheduler.core.states import Priority

PRIORITY_RANK = {Priority.HIGH: 0, Priority.NORMAL: 1, Priority.LOW: 2}
#: the business of jobs that name none
NO_BUSINESS = ""


@dataclass(frozen=True)
class Bucket:
    """A business's token bucket: ``rate`` tokens per second, at most ``burst`` held."""

    rate: float
    burst: int
    tokens: float
    at: float  # when ``tokens`` was counted (seconds, any monotonic-enough clock)

    def refilled(self, now: float) -> Bucket:
        if now <= self.at:
            return self
        tokens = min(float(self.burst), self.tokens + (now - self.at) * self.rate)
        return replace(self, tokens=tokens, at=now)

    def take(self, n: int = 1) -> Bucket:
        return replace(self, tokens=self.tokens - n)

    @property
    def available(self) -> int:
        return math.floor(self.tokens + 1e-9)

    def wait_for_one(self) -> float:
        """Seconds until the bucket holds a whole token again."""
        missing = 1.0 - self.tokens
        if missing <= 0:
            return 0.0
        return math.inf if self.rate <= 0 else missing / self.rate


@dataclass(frozen=True)
class ClusterLoad:
    """A cluster's caps and what counts against them now (caps: 0 = none)."""

    in_flight: int = 0
    running: int = 0
    max_in_flight: int = 0
    max_running: int = 0

    def room(self) -> int | None:
        """How many more submissions the caps allow now (None: no cap)."""
        rooms = []
        if self.max_in_flight:
            rooms.append(self.max_in_flight - self.in_flight)
        if self.max_running:
            rooms.append(self.max_running - self.running - self.in_flight)
        return max(0, min(rooms)) if rooms else None

    def why_full(self, cluster: str) -> str:
        if self.max_in_flight and self.in_flight >= self.max_in_flight:
            return (
                f"cluster {cluster} has {self.in_flight} submissions in flight "
                f"(max_concurrent_submissions {self.max_in_flight})"
            )
        return (
            f"cluster {cluster} runs {self.running} applications and has {self.in_flight} "
            f"starting (max_running_apps {self.max_running})"
        )


@dataclass(frozen=True)
class Loads:
    """Submissions in flight and live applications per cluster (every node's), as the store
    counts them for the caps."""

    in_flight: dict[str, int] = field(default_factory=dict)
    running: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Candidate:
    """One submission a tick wants to make."""

    job: str
    business: str
    priority: Priority
    cluster: str
    waiting_since: float

    def order(self) -> tuple[int, float, str]:
        return (PRIORITY_RANK[self.priority], self.waiting_since, self.job)


#: why a candidate waits: its business's bucket is empty, or a cluster cap is reached
RATE = "rate"
CLUSTER = "cluster"


@dataclass(frozen=True)
class Waiting:
    position: int  # 1 = next
    reason: str
    #: RATE or CLUSTER (what an event reports when it changes)
    kind: str = RATE
    #: seconds until the business's bucket holds a token again (0: not waiting for one)
    ready_in: float = 0.0


@dataclass(frozen=True)
class QueueRow:
    """A job the gate holds back, as stored and as the API shows it: its position, the kind of
    wait, why, and since when."""

    position: int
    kind: str
    reason: str
    since: datetime


@dataclass(frozen=True)
class Admission:
    admitted: list[Candidate]
    waiting: dict[str, Waiting]
    #: the buckets after the admitted submissions took their tokens (only businesses with one)
    buckets: dict[str, Bucket] = field(default_factory=dict)
    #: tokens taken per business (what the store must take with its conditional write)
    taken: dict[str, int] = field(default_factory=dict)


def serving_order(candidates: Iterable[Candidate]) -> list[Candidate]:
    """Round robin between businesses (in order of their most urgent job), each business's jobs
    by priority, then waiting time, then name."""
    queues: dict[str, list[Candidate]] = defaultdict(list)
    for c in candidates:
        queues[c.business].append(c)
    for queue in queues.values():
        queue.sort(key=Candidate.order)
    turn = sorted(queues, key=lambda b: (queues[b][0].order(), b))
    order: list[Candidate] = []
    depth = 0
    while len(order) < sum(len(q) for q in queues.values()):
        order += [queues[b][depth] for b in turn if depth < len(queues[b])]
        depth += 1
    return order


def admit(
    candidates: Iterable[Candidate],
    buckets: Mapping[str, Bucket],
    loads: Mapping[str, ClusterLoad],
    now: float,
) -> Admission:
    """Which candidates go now, in the serving order, and why the others wait.

    A candidate goes when its business's bucket (if any) holds a token and its cluster (if
    capped) has room; the tokens and the room it uses are gone for the candidates after it. One
    business out of tokens or one full cluster holds back only the candidates it concerns."""
    order = serving_order(candidates)
    fresh = {b: bucket.refilled(now) for b, bucket in buckets.items()}
    rooms = {name: load.room() for name, load in loads.items()}
    admitted: list[Candidate] = []
    held: list[tuple[Candidate, str, str, float]] = []
    taken: dict[str, int] = defaultdict(int)
    used: dict[str, int] = defaultdict(int)  # admitted per cluster
    for c in order:
        bucket = fresh.get(c.business)
        room = rooms.get(c.cluster)
        if bucket is not None and bucket.available < 1:
            wait = bucket.wait_for_one()
            label = c.business or "(no business)"
            held.append(
                (
                    c,
                    f"business {label} is at its rate ({bucket.rate:g}/s, burst {bucket.burst})"
                    + ("" if math.isfinite(wait) else "; rate 0"),
                    RATE,
                    wait if math.isfinite(wait) else -1.0,
                )
            )
            continue
        if room is not None and room < 1:
            load = loads[c.cluster]
            now_in_flight = load.in_flight + used[c.cluster]  # with this tick's admissions
            why = replace(load, in_flight=now_in_flight).why_full(c.cluster)
            held.append((c, why, CLUSTER, 0.0))
            continue
        admitted.append(c)
        if bucket is not None:
            fresh[c.business] = bucket.take()
            taken[c.business] += 1
        if room is not None:
            rooms[c.cluster] = room - 1
        used[c.cluster] += 1
    waiting = {
        c.job: Waiting(i, reason, kind, ready_in)
        for i, (c, reason, kind, ready_in) in enumerate(held, start=1)
    }
    return Admission(
        admitted=admitted,
        waiting=waiting,
        buckets={b: fresh[b] for b in buckets},
        taken=dict(taken),
    )
