"""What the reconciler may do for one job: the actions ``planning.plan`` and
``steering`` choose (pure data; the reconciler turns each into its ledger write,
``scheduler.loops.reconciler``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from scheduler.core.backend import AppStatus
from scheduler.core.records import RunRecord
from scheduler.core.states import JobState, RunState


@dataclass(frozen=True)
class Noop:
    why: str


@dataclass(frozen=True)
class SetState:
    """Record a state without touching any cluster (e.g. QUEUED → STOPPED)."""

    state: JobState
    reason: str


@dataclass(frozen=True)
class Submit:
    """Record a new run (intent), then submit it."""

    reason: str


@dataclass(frozen=True)
class Resubmit:
    """The run's intent was recorded but no application carries its name: submit that run."""

    run: RunRecord


@dataclass(frozen=True)
class Observed:
    """The application is alive: record its progress (STARTING → RUNNING, submission id)."""

    run: RunRecord
    status: AppStatus
    job_state: JobState
    run_state: RunState


@dataclass(frozen=True)
class Kill:
    run: RunRecord
    reason: str


@dataclass(frozen=True)
class CloseRun:
    """The cluster confirmed the application is gone: close the run, set the job's state."""

    run: RunRecord
    run_state: RunState
    job_state: JobState
    reason: str
    exit_code: int | None
    #: a failure that counts against the restart budget
    counts_as_failure: bool


@dataclass(frozen=True)
class GiveUp:
    """The restart budget is spent: FAILED for good (until an operator starts the job again)."""

    reason: str
    #: the states the job passes through to FAILED (via QUEUED when FAILED is not reachable
    #: from its state directly)
    path: tuple[JobState, ...] = (JobState.FAILED,)


@dataclass(frozen=True)
class Hold:
    """The job may not start now: record ``reason`` as its state reason; no state change, no
    cluster call."""

    reason: str


@dataclass(frozen=True)
class FenceRun:
    """The run's cluster cannot be reached and is abnormal, and a failover drains the job: close
    the run in the store, which supersedes its fencing token (a self-fencing driver stops at its
    next check; ``scheduler.decisions.steering``)."""

    run: RunRecord
    reason: str


@dataclass(frozen=True)
class Drain:
    """Ask the run's pipeline to finish its current micro-batch and exit (through its fence
    check); the job is STOPPING meanwhile, and the run is killed after ``deadline``."""

    run: RunRecord
    deadline: datetime
    reason: str


@dataclass(frozen=True)
class RollBack:
    """The pending upgrade did not reach RUNNING in time: apply revision ``revision`` as a
    new spec change (itself an upgrade, without a deadline)."""

    revision: int
    reason: str


@dataclass(frozen=True)
class UpgradeDone:
    """The pending upgrade is over (its run is RUNNING, or the job is no longer to run):
    clear its deadline."""

    reason: str


Action = (
    Noop
    | SetState
    | Submit
    | Resubmit
    | Observed
    | Kill
    | CloseRun
    | GiveUp
    | Hold
    | FenceRun
    | Drain
    | RollBack
    | UpgradeDone
)
