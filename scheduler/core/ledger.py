"""The two narrow interfaces the reconciler acts through: the ledger (store) and the backends.

The *ledger* is the set of fenced transactions a reconciler needs, one method one transaction
(``scheduler.store.ledger.SqlLedger`` implements it with SQL; ``tests/support/fakes.py`` in
memory). Its rules, which every implementation honours (``tests/support/ledger_contract.py``):

- every write is conditional on the job's version as the caller read it **and** on the claim's
  fence (``owner = fence.node_id AND owner_epoch = fence.epoch``). When the fence does not hold it
  raises :class:`~scheduler.core.errors.NotOwner`, when only the version moved
  :class:`~scheduler.core.errors.StaleWrite`; either way nothing is changed;
- a write that changes the job or its run bumps the job's version and its ``updated_at`` (that
  is what incremental reads follow) and returns the job as written (no re-read needed);
- a state change records one job event per state passed through, in the same transaction;
- a run write also requires the run to be still open (not in a final state).

The reconciler records an intent (``record_intent``, ``record_kill_intent``, ``prove``) before it
submits or kills (invariant 3), looks a run without a submission id up on the cluster before any
resubmission (``record_adopted``, invariant 4) and repeats kills until the cluster confirms
(``close_run``, invariant 5).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from scheduler.core.backend import ClusterBackend
from scheduler.core.ownership import Claim, Fence
from scheduler.core.records import ClusterRecord, Failures, JobRecord
from scheduler.core.states import JobState, RunState


@dataclass(frozen=True)
class LedgerView:
    """One read of the ledger: the owned jobs that may need work, and the catalog they need."""

    #: jobs that may need work (desired RUNNING or not at rest) with their current runs; after
    #: an incremental read, also changed jobs that need no work any more (the caller drops them)
    jobs: list[JobRecord]
    clusters: dict[str, ClusterRecord] = field(default_factory=dict)
    #: the group's primary cluster
    primary_cluster: str = ""


@dataclass(frozen=True)
class FailureQuery:
    """Failures of ``job_id`` that ended at or after ``since`` (its restart window)."""

    job_id: int
    since: datetime


@dataclass(frozen=True)
class Observation:
    """One ``record_observed`` of a batch (see :meth:`Ledger.record_observed_all`)."""

    job: JobRecord
    run_state: RunState
    job_state: JobState
    reason: str
    app_id: str | None = None
    started_at: datetime | None = None


@dataclass(frozen=True)
class Intent:
    """One ``record_intent`` of a batch (see :meth:`Ledger.record_intents`)."""

    job: JobRecord
    cluster: str
    checkpoint_location: str
    reason: str
    note: str | None = None


@dataclass(frozen=True)
class Submitted:
    """One ``record_submitted`` of a batch (see :meth:`Ledger.record_submitted_all`)."""

    job: JobRecord
    submission_id: str
    app_id: str | None
    at: datetime


class Ledger(Protocol):
    """The reconciler's fenced transactions (see the module docstring for the rules)."""

    def claim(self, claim: Claim, *, only_unowned: bool = False) -> int:
        """Take the group's jobs of this claim's pool slot (never one claimed under a newer
        epoch); returns how many changed hands. ``only_unowned``: only jobs nobody owns yet (new
        ones; cheap, for ticks under a claim already taken in full)."""
        ...

    def read(
        self,
        fence: Fence,
        group: str,
        *,
        changed_since: datetime | None = None,
        ids: Iterable[int] = (),
    ) -> LedgerView:
        """The jobs ``fence`` owns in ``group`` that may need work (all of them when
        ``changed_since`` is None; else those whose row changed at or after it, plus ``ids``,
        whatever their state), and the clusters and the group's primary cluster."""
        ...

    def failures(self, queries: Sequence[FailureQuery]) -> dict[int, Failures]:
        """Per job: runs that ended as a counted failure within its window (one round trip)."""
        ...

    def record_state(
        self,
        job: JobRecord,
        fence: Fence,
        path: Sequence[JobState],
        reason: str,
        *,
        not_before: datetime | None = ...,
    ) -> JobRecord:
        """Move the job through ``path`` (each step a legal transition, one event each); an empty
        path or the same state rewrites only the reason. ``not_before`` is written if given."""
        ...

    def record_intent(
        self,
        job: JobRecord,
        fence: Fence,
        *,
        cluster: str,
        checkpoint_location: str,
        reason: str,
        note: str | None = None,
    ) -> JobRecord:
        """Record a new run (SUBMITTING, fresh fencing token) as the job's current run and move
        the job to SUBMITTING (through QUEUED if needed); ``note``: an extra event."""
        ...

    def record_intents(self, fence: Fence, intents: Sequence[Intent]) -> list[JobRecord]:
        """Several ``record_intent`` in one transaction, all or nothing: StaleWrite (nothing
        changed) when any one would not land; the caller then records them one by one."""
        ...

    def prove(self, job: JobRecord, fence: Fence) -> None:
        """Prove the claim (and the version) in a transaction of its own; changes nothing."""
        ...

    def prove_all(self, fence: Fence, jobs: Sequence[JobRecord]) -> None:
        """``prove`` for several jobs in one statement; StaleWrite when any one does not hold
        (the caller then proves them one by one)."""
        ...

    def record_submitted(
        self, job: JobRecord, fence: Fence, *, submission_id: str, app_id: str | None, at: datetime
    ) -> JobRecord:
        """The cluster accepted the current run: STARTING, with its submission id."""
        ...

    def record_submitted_all(self, fence: Fence, outcomes: Sequence[Submitted]) -> list[JobRecord]:
        """Several ``record_submitted`` in one transaction, all or nothing: StaleWrite (nothing
        changed) when any one would not land; the caller then records them one by one."""
        ...

    def record_adopted(
        self, job: JobRecord, fence: Fence, *, submission_id: str, app_id: str | None, at: datetime
    ) -> JobRecord:
        """An application of the current run (never recorded as submitted) was found: record its
        submission id instead of resubmitting (invariant 4)."""
        ...

    def record_observed(
        self,
        job: JobRecord,
        fence: Fence,
        *,
        run_state: RunState,
        job_state: JobState,
        reason: str,
        app_id: str | None = None,
        started_at: datetime | None = None,
    ) -> JobRecord:
        """The current run's application is alive: record its state (and the job's)."""
        ...

    def record_observed_all(
        self, fence: Fence, observations: Sequence[Observation]
    ) -> list[JobRecord]:
        """Several ``record_observed`` in one transaction, all or nothing: StaleWrite (nothing
        changed) when any one would not land; the caller then records them one by one."""
        ...

    def record_kill_intent(self, job: JobRecord, fence: Fence, *, reason: str) -> JobRecord:
        """Before a kill: the current run and the job to STOPPING (a proof when they are)."""
        ...

    def close_run(
        self,
        job: JobRecord,
        fence: Fence,
        *,
        run_state: RunState,
        job_state: JobState,
        reason: str,
        exit_code: int | None,
        counts_as_failure: bool,
        ended_at: datetime,
        not_before: datetime | None = None,
    ) -> JobRecord:
        """The cluster confirmed the application is gone: close the run, set the job's state."""
        ...

    def fence_run(
        self, job: JobRecord, fence: Fence, *, reason: str, path: Sequence[JobState], at: datetime
    ) -> JobRecord:
        """The run's cluster cannot be reached and is abnormal, and a failover drains the job:
        close the current run (LOST, ``fenced_at``), which supersedes its fencing token, and
        move the job through ``path`` (scheduler/decisions/steering.py)."""
        ...

    def record_drain(
        self, job: JobRecord, fence: Fence, *, deadline: datetime, reason: str
    ) -> JobRecord:
        """A graceful stop: the job to STOPPING, the current run's ``drain_deadline`` set (its
        pipeline reads the stop request in its fence answer; it is killed after the deadline)."""
        ...

    def roll_back(self, job: JobRecord, fence: Fence, *, revision: int, reason: str) -> JobRecord:
        """A pending upgrade rolls back: revision ``revision``'s spec becomes a new revision
        (the job's generation bumped, its deadline cleared, one event saying why)."""
        ...

    def finish_upgrade(self, job: JobRecord, fence: Fence, *, reason: str) -> JobRecord:
        """The pending upgrade is over: clear its deadline (an event says so)."""
        ...

    def add_event(self, job: JobRecord, message: str, *, run_id: int | None = None) -> None:
        """An event that is not a state change (not fenced: it records, it does not act)."""
        ...


class Backends(Protocol):
    """The cluster backends, by cluster record (``scheduler.backends.registry.BackendRegistry``)."""

    def for_cluster(self, cluster: ClusterRecord) -> ClusterBackend: ...
