"""Job and run states.

Desired state (what the operator asked for) is separate from observed state (what Drover saw):

    DesiredState: RUNNING | STOPPED

Observed job states and every legal transition (``JOB_TRANSITIONS``)::

    STOPPED    → QUEUED                     start requested
    QUEUED     → SUBMITTING                 the owner records its intent to submit
               → STOPPED                    stopped before it was submitted
               → FAILED                     the restart budget is spent
    SUBMITTING → STARTING                   the cluster accepted the submission
               → RUNNING                    an existing application was adopted
               → STOPPING                   stopped while the submission was in flight
               → STOPPED                    stopped, and no application carries the run's name
               → FINISHED                   an adopted application had already finished
               → QUEUED                     the submission failed; retried after backoff
               → FAILED                     the submission failed and the restart budget is spent
               → UNKNOWN                    the cluster could not be reached
    STARTING   → RUNNING | FINISHED | FAILED | STOPPING | UNKNOWN
    RUNNING    → FINISHED | FAILED | STOPPING | UNKNOWN
    STOPPING   → STOPPED                    the cluster confirmed the application is gone
               → QUEUED                     ... and the job is to run again (restart)
               → UNKNOWN
    FINISHED   → QUEUED | STOPPED | FAILED  (FAILED: the restart budget is spent)
    FAILED     → QUEUED | STOPPED
    UNKNOWN    → STARTING | RUNNING | STOPPING | FINISHED | FAILED | QUEUED | STOPPED

``transition()`` is the one function that checks a state change. Run states are the final
states of one attempt (``RunState``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from scheduler.core.errors import IllegalTransition


class DesiredState(enum.StrEnum):
    RUNNING = "RUNNING"
    STOPPED = "STOPPED"


class JobState(enum.StrEnum):
    STOPPED = "STOPPED"
    QUEUED = "QUEUED"
    SUBMITTING = "SUBMITTING"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"

    @property
    def has_live_run(self) -> bool:
        """A run of the job may have an application on a cluster."""
        return self in _LIVE

    @property
    def is_at_rest(self) -> bool:
        """No application exists and none is about to be submitted."""
        return self in _AT_REST


_AT_REST = (JobState.STOPPED, JobState.FINISHED, JobState.FAILED)
_LIVE = frozenset(
    {JobState.SUBMITTING, JobState.STARTING, JobState.RUNNING, JobState.STOPPING, JobState.UNKNOWN}
)

S = JobState
JOB_TRANSITIONS: dict[JobState, frozenset[JobState]] = {
    S.STOPPED: frozenset({S.QUEUED}),
    S.QUEUED: frozenset({S.SUBMITTING, S.STOPPED, S.FAILED}),
    S.SUBMITTING: frozenset(
        {S.STARTING, S.RUNNING, S.STOPPING, S.STOPPED, S.QUEUED, S.FINISHED, S.FAILED, S.UNKNOWN}
    ),
    S.STARTING: frozenset({S.RUNNING, S.FINISHED, S.FAILED, S.STOPPING, S.UNKNOWN}),
    S.RUNNING: frozenset({S.FINISHED, S.FAILED, S.STOPPING, S.UNKNOWN}),
    S.STOPPING: frozenset({S.STOPPED, S.QUEUED, S.UNKNOWN}),
    S.FINISHED: frozenset({S.QUEUED, S.STOPPED, S.FAILED}),
    S.FAILED: frozenset({S.QUEUED, S.STOPPED}),
    S.UNKNOWN: frozenset(
        {S.STARTING, S.RUNNING, S.STOPPING, S.FINISHED, S.FAILED, S.QUEUED, S.STOPPED}
    ),
}
del S


def can_transition(current: JobState, new: JobState) -> bool:
    return new == current or new in JOB_TRANSITIONS[current]


def transition(current: JobState, new: JobState) -> JobState:
    """Return ``new`` if the table allows ``current → new`` (staying put is always allowed)."""
    if not can_transition(current, new):
        raise IllegalTransition(f"job state cannot change from {current} to {new}")
    return new


class RunState(enum.StrEnum):
    """One attempt's state; the last four are final."""

    SUBMITTING = "SUBMITTING"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    STOPPING = "STOPPING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    KILLED = "KILLED"
    LOST = "LOST"

    @property
    def is_final(self) -> bool:
        return self in (RunState.FINISHED, RunState.FAILED, RunState.KILLED, RunState.LOST)


class Priority(enum.StrEnum):
    HIGH = "high"
    NORMAL = "normal"
    LOW = "low"


class OnStall(enum.StrEnum):
    """What the job's owner does when the job stalls (besides the event, metric and alert)."""

    ALERT = "alert"
    RESTART = "restart"


class ClusterKind(enum.StrEnum):
    STANDALONE = "standalone"
    LOCAL = "local"
    SPARK_SUBMIT = "spark-submit"
    #: Spark on YARN in cluster deploy mode (``scheduler.backends.yarn``)
    YARN = "yarn"


class Command(enum.StrEnum):
    """What an operator asks of a job through the API or CLI."""

    START = "start"
    STOP = "stop"
    RESTART = "restart"


@dataclass(frozen=True)
class CommandEffect:
    desired: DesiredState
    #: replace any live run (restart) by bumping the job's generation
    bump_generation: bool
    #: failures before now no longer count against the restart budget
    reset_attempts: bool
    #: the observed state to record at once (QUEUED when a stopped job is started)
    state: JobState | None


def command_effect(command: Command, desired: DesiredState, state: JobState) -> CommandEffect:
    """What ``command`` does to a job; raises IllegalTransition when it makes no sense now.

    - start: allowed when desired is STOPPED or the job is at rest (FAILED, FINISHED); sets
      desired RUNNING, resets the restart budget, queues a job at rest.
    - stop: allowed when desired is RUNNING; sets desired STOPPED (a live run is then killed).
    - restart: allowed when desired is RUNNING; bumps the generation so the live run is
      replaced by a new one, and resets the restart budget.
    """
    running = desired == DesiredState.RUNNING
    if command == Command.START:
        if running and not state.is_at_rest:
            raise IllegalTransition(f"job is already started (state {state})")
        return CommandEffect(
            DesiredState.RUNNING,
            bump_generation=False,
            reset_attempts=True,
            state=JobState.QUEUED if state.is_at_rest else None,
        )
    if command == Command.STOP:
        if not running:
            raise IllegalTransition(f"job is already stopped (state {state})")
        return CommandEffect(
            DesiredState.STOPPED,
            bump_generation=False,
            reset_attempts=False,
            state=JobState.STOPPED if state in (JobState.QUEUED, *_AT_REST) else None,
        )
    if not running:
        raise IllegalTransition(f"job is stopped (state {state}); start it instead")
    return CommandEffect(
        DesiredState.RUNNING,
        bump_generation=True,
        reset_attempts=True,
        state=JobState.QUEUED if state.is_at_rest else None,
    )
