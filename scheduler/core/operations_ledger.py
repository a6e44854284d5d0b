"""The two narrow interfaces the operations executor acts through: the operations ledger (store)
and the checkpoints (storage).

The *operations ledger* is the set of fenced transactions the executor of failovers and bulk
operations needs, one method one transaction (``scheduler.store.operations_ledger`` implements
it with SQL; ``tests/support/operations_fakes.py`` in memory). Its rules, which every
implementation honours (``tests/support/operations_contract.py``):

- every write is conditional on the executor's claim on the operation (``executor =
  fence.node_id AND executor_epoch = fence.epoch``): :class:`~scheduler.core.errors.NotOwner`
  otherwise, and nothing changed. A claim is taken only from an older epoch, never back from a
  newer one;
- an item write is conditional on the item's version as the caller read it, a job write on the
  job's (:class:`~scheduler.core.errors.StaleWrite`, nothing changed); a job command of a bulk
  operation is decided instead on the job's row as it is under its lock (:meth:`apply_command`);
- an item changes only as :meth:`ItemRecord.after <scheduler.core.operations.ItemRecord.after>`
  says, and a write returns the item (and the job) as written: the caller decides its next step
  on them without reading them back;
- a job write bumps the job's version and ``updated_at`` (the job's owner re-reads it and acts)
  and records a job event, in the same transaction as the item's step; the advances of many
  items go in one transaction (:meth:`OperationsLedger.advance`), all or nothing.

The *checkpoints* make a failed-over job's checkpoint available under the target cluster's
storage root (``scheduler.loops.replication.ReplicaCheckpoints``): I/O outside any ledger
transaction, idempotent, so an executor that takes over repeats it safely.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from scheduler.core.directive import Directive
from scheduler.core.operations import (
    ItemChange,
    ItemRecord,
    NewOperation,
    OperationRecord,
    OperationState,
)
from scheduler.core.ownership import Fence
from scheduler.core.records import ClusterRecord, GroupRecord, JobRecord, RunRecord
from scheduler.core.states import Command, Priority

# -- job writes that go with an item's step -----------------------------------------------------


@dataclass(frozen=True)
class SetDirective:
    """Write ``directive`` on the job (None: clear it), conditional on the job's version."""

    directive: Directive | None


@dataclass(frozen=True)
class SwitchCluster:
    """Switch the job to ``target`` (and queue it to run there, or leave it stopped),
    conditional on the job's version and on its run being closed."""

    target: str
    directive: Directive | None
    reason: str


JobWrite = SetDirective | SwitchCluster


@dataclass(frozen=True)
class ItemWrite:
    """One item's advance: its ``changes`` (one after the other, the item's version as read the
    condition) and the ``job_write`` on ``job`` that goes with them (the job's version as read
    the condition; ``message`` in its event)."""

    item: ItemRecord
    changes: Sequence[ItemChange]
    job: JobRecord | None = None
    job_write: JobWrite | None = None
    message: str = ""


# -- what the ledger reads ----------------------------------------------------------------------


@dataclass(frozen=True)
class RoundRead:
    """One read of an operation for a round: the operation with all its items, the items the
    round works on, and what their decisions need."""

    operation: OperationRecord
    #: the items the round's ``choose`` picked, in plan order
    chosen: tuple[ItemRecord, ...]
    #: the chosen items' jobs by id, with their current runs (a deleted job is missing)
    jobs: Mapping[int, JobRecord] = field(default_factory=dict)
    #: the chosen items' source runs by id, as stored now
    runs: Mapping[int, RunRecord] = field(default_factory=dict)
    clusters: Mapping[str, ClusterRecord] = field(default_factory=dict)


@dataclass(frozen=True)
class Written:
    """An item (and its job, when the write changed it) as written."""

    item: ItemRecord
    job: JobRecord | None = None


@dataclass(frozen=True)
class FailoverPolicy:
    """A group's automatic failover policy (off unless enabled)."""

    group: str
    enabled: bool
    after_seconds: float
    min_priority: Priority


@dataclass(frozen=True)
class AutoPause:
    """Automatic failover is paused platform-wide (``drover failover auto pause``)."""

    by: str
    reason: str
    at: datetime


@dataclass(frozen=True)
class Recovery:
    """A cluster's last abnormal period, as automatic failover's cool-down sees it."""

    #: when it ended (its last return to NORMAL)
    ended: datetime
    #: an operator cleared it since (a manual mark lifted, or ``drover failover auto clear``):
    #: no cool-down
    cleared: bool = False
    by: str = ""


@dataclass(frozen=True)
class AutoDecision:
    """One decision of automatic failover about a group's abnormal cluster: a failover
    ``created``, or ``held`` (``code`` says why: ``paused``, ``no-target``, ``target-abnormal``,
    ``target-cooling-down``). Recorded as an event and an alert."""

    group: str
    cluster: str
    target: str | None
    incident: str
    verdict: str
    code: str
    why: str
    operation_id: int | None = None


@dataclass(frozen=True)
class AutomaticFacts:
    """What deciding the automatic failovers due needs."""

    policies: list[FailoverPolicy]
    groups: Mapping[str, GroupRecord] = field(default_factory=dict)
    clusters: Mapping[str, ClusterRecord] = field(default_factory=dict)
    #: per abnormal cluster: the id and time of the event that began its abnormal period
    incidents: Mapping[str, tuple[int, datetime]] = field(default_factory=dict)
    #: automatic failover is paused platform-wide (None: it is not)
    paused: AutoPause | None = None
    #: per cluster that was ever abnormal and is not now: its last abnormal period
    recoveries: Mapping[str, Recovery] = field(default_factory=dict)


@dataclass(frozen=True)
class Candidates:
    """What planning a failover from a cluster needs: the jobs that may be on it (a superset),
    the groups and the clusters."""

    jobs: list[JobRecord]
    groups: Mapping[str, GroupRecord]
    clusters: Mapping[str, ClusterRecord]


class OperationsLedger(Protocol):
    """The operations executor's fenced transactions (see the module docstring for the rules)."""

    def active(self, groups: Iterable[str]) -> list[OperationRecord]:
        """PENDING and RUNNING operations whose home group is one of ``groups``, oldest first,
        without their items."""
        ...

    def take(self, operation_id: int, fence: Fence) -> OperationRecord | None:
        """Claim the operation under ``fence`` (never from a newer epoch) and, if it is PENDING,
        start it (RUNNING, audited as this node), in one transaction. The operation as written
        (without items); None when another node holds it under a newer epoch or it is over."""
        ...

    def read(
        self, operation_id: int, choose: Callable[[OperationRecord], Sequence[ItemRecord]]
    ) -> RoundRead:
        """The operation with its items; then, in the same read, the jobs, source runs and
        clusters of the items ``choose`` picks among them (NotFound: no such operation)."""
        ...

    def job(self, job_id: int) -> JobRecord | None:
        """The job as stored now, with its current run (None: deleted): what an advance refused
        for a job that moved since the round's read is decided on again."""
        ...

    def advance(
        self, fence: Fence, operation: OperationRecord, writes: Sequence[ItemWrite]
    ) -> list[Written]:
        """Several items' advances (:class:`ItemWrite`) in one transaction, proving the claim:
        all or nothing (StaleWrite when one item or job moved; ValueError for an item or a job
        twice); each, as written, in order."""
        ...

    def note(
        self,
        fence: Fence,
        operation: OperationRecord,
        notes: Sequence[tuple[ItemRecord, Sequence[ItemChange]]],
    ) -> list[ItemRecord]:
        """Several items' changes that write no job (steps without a job write, what an item
        waits for, a run it recorded) in one transaction, proving the claim: one entry per item
        (ValueError otherwise). An item whose version moved is left out (it is decided again next
        round); the others, as written."""
        ...

    def apply_command(
        self,
        fence: Fence,
        operation: OperationRecord,
        item: ItemRecord,
        command: Command,
        note: str,
    ) -> Written:
        """A bulk item's job command, decided on the job's row under its lock: FAILED when the job
        was deleted, SKIPPED when it needs the command no more (in a failover now, or already
        there), else the command applied (as the operation's creator: a job event and an audit
        entry) and the item WAITING with ``run_before`` (the job's run before the command) in its
        detail -- in one transaction, proving the claim."""
        ...

    def finish(self, fence: Fence, operation: OperationRecord, state: OperationState) -> None:
        """Every item ended: the operation's final ``state``, audited as this node."""
        ...

    def automatic(self, groups: Iterable[str]) -> AutomaticFacts:
        """The enabled automatic failover policies of ``groups`` and, when there is one, the
        groups, the clusters and the incidents of the abnormal ones."""
        ...

    def candidates(self, source: str) -> Candidates:
        """What planning a failover from ``source`` needs."""
        ...

    def decided(self, decisions: Sequence[AutoDecision]) -> int:
        """Record automatic failover's decisions, in one transaction: an event each unless the
        last event of its group and cluster says the same (same incident, verdict and code), and
        its alert (a held one raised -- again when its reason changed --, a created one raised
        and the group's held alert resolved). Returns the events written."""
        ...

    def create(self, new: NewOperation) -> OperationRecord:
        """Store a plan as an operation with its items, audited as its creator (AlreadyExists
        when its incident already has one)."""
        ...


# -- checkpoints --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CheckpointMove:
    """Where a failed-over job's checkpoint goes: from ``source`` (None: none is known) to
    ``target``, which lies inside the target cluster's storage root ``target_root``; ``clusters``
    is the catalog (whose storage holds each location); ``holder`` holds the job's replica while
    the move lasts (the replicator stays away from it)."""

    source: str | None
    target: str
    target_root: str | None
    clusters: Sequence[ClusterRecord]
    holder: str


@dataclass(frozen=True)
class Availability:
    """Where a failed-over job's checkpoint is now and where it came from."""

    #: the checkpoint location under the target cluster's root (the job's checkpoint there)
    location: str
    #: its newest complete batch: the job resumes with batch ``batch + 1`` (None: from scratch)
    batch: int | None
    #: ``"source"``, ``"replica"`` or ``"fresh start"``
    origin: str
    #: one sentence for the failover's item and the job's events
    detail: str
    files_copied: int = 0
    bytes_copied: int = 0
    seconds: float = 0.0

    @property
    def resume_batch(self) -> int | None:
        """The batch the job runs next (``batch + 1``); None: it starts afresh."""
        return None if self.batch is None else self.batch + 1

    @property
    def how(self) -> str:
        """Alias of ``origin``."""
        return self.origin

    @property
    def resumes(self) -> str:
        if self.batch is None:
            return "starts afresh"
        return f"resumes from batch {self.batch + 1} ({self.origin})"


class Checkpoints(Protocol):
    """Making a failed-over job's checkpoint available on the target (I/O; idempotent)."""

    def make_available(
        self, job: JobRecord, move: CheckpointMove, guard: Callable[[], object] | None = None
    ) -> Availability:
        """Make the job's checkpoint available at the move's target (from its source when it
        can be read, else the replica, else a fresh start), holding the job's replica for the
        move's holder until :meth:`release`. ``guard`` is called before every write and raises
        to stop it (the caller's claim ran out)."""
        ...

    def release(self, jobs: Sequence[str], *, holder: str) -> None:
        """``holder`` is done with these jobs' replicas: the replicator may write them again."""
        ...
