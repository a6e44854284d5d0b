"""The two narrow interfaces the reconciler acts through: the ledger (store) and the backends.

The *ledger* is what a reconciler reads (``claim``, ``read``, ``failures``) and one write seam:
the reconciler computes small typed *writes* (:data:`Write`: an intent, a submission's outcome,
an observation, a state move, a kill intent, a close, ...) and ``apply(fence, writes)`` lands
them in one transaction, all or nothing, the way a planner submits one plan
(``scheduler.store.ledger.SqlLedger`` in SQL, ``tests/support/fakes.py`` in memory). What each
write changes is said once, by :func:`effect_of`, for every implementation. The rules, which
every implementation honours (``tests/support/ledger_contract.py``):

- every write is conditional on the job's version as the writer read it **and** on the claim's
  fence (``owner = fence.node_id AND owner_epoch = fence.epoch``). When one does not hold,
  ``apply`` raises :class:`~scheduler.core.errors.NotOwner` (the fence does not hold for one of
  its jobs) or :class:`~scheduler.core.errors.StaleWrite` (a version moved, a run closed
  meanwhile) and changes nothing. The error of several writes does not say which one it was:
  the writer then applies them one at a time, and each gets its own;
- a write that changes the job or its run bumps the job's version and its ``updated_at`` (that
  is what incremental reads follow); ``apply`` returns each job as written, in the order of the
  writes (no re-read needed);
- a state change records one job event per state passed through, in the same transaction;
- a run write also requires the run to be still open (not in a final state);
- a job appears at most once in one ``apply`` (StaleWrite otherwise).

The reconciler records an intent (:class:`Intent`, :class:`KillIntent`, :class:`Reissue`,
:class:`Proof`) before it submits or kills (invariant 3), looks a run without a submission id up
on the cluster before any resubmission (:class:`Adopted`, invariant 4) and repeats kills until
the cluster confirms (:class:`RunClose`, invariant 5).

Fencing tokens. A run's token is minted with the write that records the run (``Intent``) and
travels to the driver in its submission only; the store keeps its SHA-256 (:func:`fencing_digest`,
the same digest as an API token's), the record ``apply`` returns carries the token itself once
(``RunRecord.fencing_secret``). A node that takes over a run whose submission was never recorded
and finds nothing of it on the cluster cannot know the token of a submission that may have been
sent (and must never learn it from the store): it gives the run a fresh token with a fenced
write (:class:`Reissue`) and submits with that. A driver of the lost submission, if one exists,
then holds a token no run has: its next fence check says "superseded" and it stops.

In doubt. Both an :class:`Intent` and a :class:`Reissue` record when the run's latest
submission was decided (``RunRecord.submit_intent_at``: the intent's ``created_at``, the
reissue's ``at``). A submission whose outcome is unknown may still become a driver after the
cluster was asked and said "none": the run is not submitted again before a grace after that
instant (``scheduler.decisions.planning``), and a driver that shows up late is adopted.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import Any, Protocol

from scheduler.core.backend import ClusterBackend
from scheduler.core.clock import utcnow
from scheduler.core.errors import StaleWrite
from scheduler.core.ownership import Claim, Fence
from scheduler.core.records import SUPERSEDED_KEPT, ClusterRecord, Failures, JobRecord, RunRecord
from scheduler.core.states import JobState, RunState, transition


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


def new_fencing_token() -> str:
    """A fresh fencing token (128 random bits, hex)."""
    return secrets.token_hex(16)


def fencing_digest(token: str) -> str:
    """What the store keeps of a fencing token: its SHA-256, hex (128 random bits: no salt)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


# -- the writes: each carries the job as its writer read it (its version is the condition) ------


@dataclass(frozen=True)
class Proof:
    """Prove the claim (and the version) right before acting; changes nothing."""

    job: JobRecord


@dataclass(frozen=True)
class Intent:
    """A new run (SUBMITTING, fresh fencing token) becomes the job's current run and the job
    moves to SUBMITTING (through QUEUED if needed); ``note``: an extra event. The token is
    minted with the write: the store keeps its digest."""

    job: JobRecord
    cluster: str
    checkpoint_location: str
    reason: str
    note: str | None = None
    fencing_token: str = field(default_factory=new_fencing_token, repr=False)


@dataclass(frozen=True)
class Reissue:
    """Prove the claim and give the current (open) run a fresh fencing token, before the run is
    submitted again (its first submission's outcome is unknown: see the module docstring).
    ``at`` becomes the run's ``submit_intent_at``: the run is in doubt again from then on."""

    job: JobRecord
    fencing_token: str = field(default_factory=new_fencing_token, repr=False)
    at: datetime = field(default_factory=utcnow)


@dataclass(frozen=True)
class Submitted:
    """The cluster accepted the current run: STARTING, with its submission id."""

    job: JobRecord
    submission_id: str
    app_id: str | None
    at: datetime


@dataclass(frozen=True)
class Adopted:
    """An application of the current run (never recorded as submitted) was found: record its
    submission id instead of resubmitting (invariant 4)."""

    job: JobRecord
    submission_id: str
    app_id: str | None
    at: datetime


@dataclass(frozen=True)
class Observation:
    """The current run's application is alive: its state (and the job's)."""

    job: JobRecord
    run_state: RunState
    job_state: JobState
    reason: str
    app_id: str | None = None
    started_at: datetime | None = None


@dataclass(frozen=True)
class StateMove:
    """The job through ``path`` (each step a legal transition, one event each); an empty path
    or the same state rewrites only the reason. ``clear_backoff``: ``not_before`` cleared too."""

    job: JobRecord
    path: tuple[JobState, ...]
    reason: str
    clear_backoff: bool = False


@dataclass(frozen=True)
class KillIntent:
    """Before a kill: the current run and the job to STOPPING (a proof when they are)."""

    job: JobRecord
    reason: str


@dataclass(frozen=True)
class RunClose:
    """The cluster confirmed the application is gone: close the run, set the job's state;
    ``not_before``: the restart backoff (None: none)."""

    job: JobRecord
    run_state: RunState
    job_state: JobState
    reason: str
    exit_code: int | None
    counts_as_failure: bool
    ended_at: datetime
    not_before: datetime | None = None


@dataclass(frozen=True)
class RunFence:
    """The run's cluster cannot be reached and is abnormal, and a failover drains the job: close
    the current run (LOST, ``fenced_at``), which supersedes its fencing token, and move the job
    through ``path`` (scheduler/decisions/steering.py)."""

    job: JobRecord
    reason: str
    path: tuple[JobState, ...]
    at: datetime


@dataclass(frozen=True)
class DrainRequest:
    """A graceful stop: the job to STOPPING, the current run's ``drain_deadline`` set (its
    pipeline reads the stop request in its fence answer; it is killed after the deadline)."""

    job: JobRecord
    deadline: datetime
    reason: str


@dataclass(frozen=True)
class RevisionRestore:
    """A pending upgrade rolls back: revision ``revision``'s spec becomes a new revision (the
    job's generation bumped, its deadline cleared, one event saying why)."""

    job: JobRecord
    revision: int
    reason: str


@dataclass(frozen=True)
class UpgradeEnd:
    """The pending upgrade is over: clear its deadline (an event says so)."""

    job: JobRecord
    reason: str


Write = (
    Proof
    | Intent
    | Reissue
    | Submitted
    | Adopted
    | Observation
    | StateMove
    | KillIntent
    | RunClose
    | RunFence
    | DrainRequest
    | RevisionRestore
    | UpgradeEnd
)

#: one job event: (from state, to state, message); a note has neither state
EventRow = tuple[JobState | None, JobState | None, str]

_RUN_RECORD_FIELDS = frozenset(f.name for f in fields(RunRecord))


@dataclass(frozen=True)
class Effect:
    """What one write changes, for an implementation to apply: the job's row (conditional on
    ``job``'s version and the fence), its current run's row (which must still be open), and
    its events."""

    #: the job as the writer read it
    job: JobRecord
    #: the job's fields the write sets (JobRecord names)
    job_fields: Mapping[str, Any]
    #: the current run's fields it sets (RunRecord names, and ``counts_as_failure``); None:
    #: the run is not written
    run_fields: Mapping[str, Any] | None
    events: tuple[EventRow, ...]
    #: the run the events name (the job's current run once written)
    run_id: int | None
    #: the write bumps the version and ``updated_at``; False: a proof, or a restore (whose spec
    #: change bumps them)
    bumps: bool = True
    #: a revision whose spec becomes the job's next one (the implementation's spec change)
    restore: int | None = None
    #: the new run of an intent (the implementation inserted it; ``job_fields`` name it)
    new_run: RunRecord | None = None

    def run_written(self, run: RunRecord) -> RunRecord:
        """``run`` with this write's run fields."""
        if not self.run_fields:
            return run
        return replace(run, **{k: v for k, v in self.run_fields.items() if k in _RUN_RECORD_FIELDS})

    def written(self, now: datetime) -> JobRecord:
        """The job as this write leaves it (written at ``now``)."""
        job = self.job
        changes: dict[str, Any] = dict(self.job_fields)
        if self.bumps:
            changes.update(version=job.version + 1, updated_at=now)
        run = self.new_run or job.current_run
        if self.run_fields is not None and run is not None:
            run = self.run_written(run)
        return replace(job, **changes, current_run=run)


def _superseded(run: RunRecord) -> str:
    """The run's superseded token digests once its current one is replaced (the last
    ``SUPERSEDED_KEPT``)."""
    kept = [d for d in run.superseded_tokens.split(",") if d] + [run.fencing_token]
    return ",".join(kept[-SUPERSEDED_KEPT:])


def effect_of(write: Write, new_run: RunRecord | None = None) -> Effect:
    """What ``write`` changes (``new_run``: the run an :class:`Intent` inserts). Raises
    IllegalTransition for a path the state table forbids, and StaleWrite when a run write finds
    the job without an open run, before anything is written."""
    job = write.job
    match write:
        case Proof():
            return Effect(job, {}, None, (), job.current_run_id, bumps=False)
        case Reissue():
            run = _open_run(job)
            run_fields: dict[str, Any] = {
                "fencing_token": fencing_digest(write.fencing_token),
                "fencing_secret": write.fencing_token,
                "submit_intent_at": write.at,
                "superseded_tokens": _superseded(run),
            }
            return Effect(job, {}, run_fields, (), run.id)
        case Intent():
            if new_run is None:
                raise ValueError("an intent's effect needs its new run")
            path = () if job.state == JobState.QUEUED else (JobState.QUEUED,)
            submitting = f"submitting attempt {new_run.attempt} to cluster {write.cluster}"
            steps = [(s, write.reason) for s in path] + [(JobState.SUBMITTING, submitting)]
            fields_ = {
                "state": JobState.SUBMITTING,
                "state_reason": submitting,
                "current_run_id": new_run.id,
                "cluster": write.cluster,
                "not_before": None,
            }
            events = _moves(job.state, steps) + _note(write.note)
            return Effect(job, fields_, None, events, new_run.id, new_run=new_run)
        case Submitted():
            run = _open_run(job)
            reason = f"submitted as {write.submission_id}"
            run_fields = {
                "submission_id": write.submission_id,
                "submitted_at": write.at,
                "state": RunState.STARTING,
                **({} if write.app_id is None else {"app_id": write.app_id}),
            }
            return _job_move(job, [JobState.STARTING], reason, run_fields, run.id)
        case Adopted():
            run = _open_run(job)
            message = (
                f"adopted application {run.app_name} ({write.submission_id}) instead of "
                "resubmitting"
            )
            run_fields = {
                "submission_id": write.submission_id,
                "app_id": write.app_id,
                "submitted_at": run.submitted_at or write.at,
            }
            return Effect(job, {}, run_fields, _note(message), run.id)
        case Observation():
            run = _open_run(job)
            run_fields = {"state": write.run_state}
            if write.app_id is not None:
                run_fields["app_id"] = write.app_id
            if write.started_at is not None:
                run_fields["started_at"] = write.started_at
            return _job_move(
                job, [write.job_state], write.reason, run_fields, run.id, keep_reason=True
            )
        case StateMove():
            backoff: dict[str, Any] | None = {"not_before": None} if write.clear_backoff else None
            return _job_move(
                job, write.path, write.reason, None, job.current_run_id, job_fields=backoff
            )
        case KillIntent():
            run = _open_run(job)
            if job.state == JobState.STOPPING and run.state == RunState.STOPPING:
                return Effect(job, {}, None, (), run.id, bumps=False)  # a repeated kill
            stopping = None if run.state == RunState.STOPPING else {"state": RunState.STOPPING}
            message = f"stopping: {write.reason}"
            return _job_move(job, [JobState.STOPPING], message, stopping, run.id, keep_reason=True)
        case RunClose():
            run = _open_run(job)
            run_fields = {
                "state": write.run_state,
                "reason": write.reason,
                "exit_code": write.exit_code,
                "ended_at": write.ended_at,
                "counts_as_failure": write.counts_as_failure,
            }
            backoff = None if write.not_before is None else {"not_before": write.not_before}
            return _job_move(
                job, [write.job_state], write.reason, run_fields, run.id, job_fields=backoff
            )
        case RunFence():
            run = _open_run(job)
            run_fields = {
                "state": RunState.LOST,
                "reason": write.reason,
                "ended_at": write.at,
                "counts_as_failure": False,
                "fenced_at": write.at,
            }
            return _job_move(job, write.path, write.reason, run_fields, run.id)
        case DrainRequest():
            run = _open_run(job)
            message = f"stopping gracefully: {write.reason}"
            effect = _job_move(
                job, [JobState.STOPPING], message, {"drain_deadline": write.deadline}, run.id
            )
            if job.state == JobState.STOPPING:  # no state change: a note says why
                effect = replace(effect, events=_note(message))
            return effect
        case RevisionRestore():
            upgrade = {"upgrade_deadline": None, "upgrade_from": None}
            return Effect(
                job,
                upgrade,
                None,
                _note(write.reason),
                job.current_run_id,
                bumps=False,
                restore=write.revision,
            )
        case UpgradeEnd():
            upgrade = {"upgrade_deadline": None, "upgrade_from": None}
            return Effect(job, upgrade, None, _note(write.reason), job.current_run_id)


def _job_move(
    job: JobRecord,
    path: Sequence[JobState],
    reason: str,
    run_fields: Mapping[str, Any] | None,
    run_id: int | None,
    *,
    keep_reason: bool = False,
    job_fields: Mapping[str, Any] | None = None,
) -> Effect:
    """The job through ``path`` with ``reason`` as its state reason (``keep_reason``: only when
    it changes state), plus the current run's fields."""
    events = _moves(job.state, [(s, reason) for s in path])
    state = events[-1][1] if events else job.state
    assert state is not None
    kept = keep_reason and not events
    fields_ = {"state": state, "state_reason": job.state_reason if kept else reason}
    fields_.update(job_fields or {})
    return Effect(job, fields_, run_fields, events, run_id)


def _moves(state: JobState, steps: Sequence[tuple[JobState, str]]) -> tuple[EventRow, ...]:
    """One event per state passed through (a step to the same state is none); raises
    IllegalTransition for a step the table forbids."""
    events: list[EventRow] = []
    for step, message in steps:
        if step != state:
            transition(state, step)
            events.append((state, step, message))
            state = step
    return tuple(events)


def _note(message: str | None) -> tuple[EventRow, ...]:
    return () if message is None else ((None, None, message),)


def _open_run(job: JobRecord) -> RunRecord:
    run = job.current_run
    if run is None or run.state.is_final:
        raise StaleWrite(f"job {job.name!r} has no open run")
    return run


class Ledger(Protocol):
    """The reconciler's reads and its one fenced write seam (the rules: the module docstring)."""

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

    def apply(self, fence: Fence, writes: Sequence[Write]) -> list[JobRecord]:
        """Land ``writes`` in one transaction under ``fence``, all or nothing; each job as
        written, in order (NotOwner / StaleWrite / IllegalTransition: nothing changed)."""
        ...

    def add_event(self, job: JobRecord, message: str, *, run_id: int | None = None) -> None:
        """An event that is not a state change (not fenced: it records, it does not act)."""
        ...


class Backends(Protocol):
    """The cluster backends, by cluster record (``scheduler.backends.registry.BackendRegistry``)."""

    def for_cluster(self, cluster: ClusterRecord) -> ClusterBackend: ...
