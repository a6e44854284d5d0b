"""What a job's owner does about its directive (scheduler/core/directive.py). Pure.

``planning.plan`` asks :func:`steer` first for a job that carries a directive; the reconciler
asks :func:`when_unreachable` when the job's cluster could not be asked about its run. Either
returns None when the directive changes nothing (the usual plan applies).

DRAIN, the job's live run is on the source cluster:

    the application is alive                  Kill (repeated every tick until confirmed)
    the run was never submitted (no app)      CloseRun LOST (never resubmitted there)
    the application ended                     the usual plan closes the run
    the source cannot be reached, and ...
      it is NORMAL                            Hold: not fenced (an operator marks it abnormal)
      it is abnormal, the run self-fencing    Fence: close the run, superseding its token
        (or the operator forced the fence)
      it is abnormal, not self-fencing        Hold: not fenced unless forced

DRAIN, no live run: Hold (QUEUED with the directive's reason), so that nothing is submitted on
the source while the job is being moved. RUN: the usual plan, which submits on the job's cluster
(the target); a live run anywhere else than the target is killed.
"""

from __future__ import annotations

from datetime import datetime

from scheduler.core.backend import AppStatus
from scheduler.core.directive import Phase
from scheduler.core.records import JobRecord, RunRecord
from scheduler.core.states import DesiredState, JobState, RunState, can_transition
from scheduler.decisions.actions import Action, CloseRun, FenceRun, Hold, Kill, Noop, SetState
from scheduler.decisions.selffencing import self_fencing


def _live(job: JobRecord) -> RunRecord | None:
    run = job.current_run
    return run if run is not None and not run.state.is_final else None


def _hold(job: JobRecord, reason: str) -> Action:
    if job.desired_state == DesiredState.RUNNING and job.state != JobState.QUEUED:
        if can_transition(job.state, JobState.QUEUED):
            return SetState(JobState.QUEUED, reason)
    if job.state_reason != reason:
        return Hold(reason)
    return Noop(reason)


def steer(job: JobRecord, observed: AppStatus | None) -> Action | None:
    """The directive's action for a job whose cluster answered (``observed``: its current run's
    application, None without a live run); None: plan as usual."""
    directive = job.directive
    if directive is None:
        return None
    run = _live(job)
    if directive.phase == Phase.RUN:
        if run is not None and run.cluster != directive.target and observed is not None:
            if observed.state.is_alive:
                return Kill(run, f"{directive.describe()}: not on {directive.target}")
        return None
    if run is None:
        if job.desired_state != DesiredState.RUNNING:
            return None
        return _hold(job, f"{directive.describe()}: held until it is switched")
    if run.cluster != directive.source or observed is None:
        return None
    if observed.state.is_alive:
        return Kill(run, f"{directive.describe()}: draining")
    if run.state == RunState.SUBMITTING and run.submission_id is None:
        return CloseRun(
            run,
            RunState.LOST,
            JobState.QUEUED if job.desired_state == DesiredState.RUNNING else JobState.STOPPED,
            f"never submitted; {directive.describe()}",
            None,
            counts_as_failure=False,
        )
    return None


def when_unreachable(
    job: JobRecord, *, abnormal: bool, health: str, now: datetime
) -> FenceRun | Hold | None:
    """The directive's action for a job whose live run's cluster did not answer."""
    directive = job.directive
    run = _live(job)
    if directive is None or directive.phase != Phase.DRAIN or run is None:
        return None
    if run.cluster != directive.source:
        return None
    prefix = f"{directive.describe()}: cannot reach {run.cluster}"
    if not abnormal:
        return _held(
            job, f"{prefix}, which is NORMAL: run {run.id} is not fenced (mark it abnormal)"
        )
    fencing = self_fencing(run, now)
    if fencing is True:
        return FenceRun(run, f"fenced: {prefix} ({health}); run {run.id} is self-fencing")
    if directive.force_unfenced:
        return FenceRun(
            run,
            f"fenced: {prefix} ({health}); run {run.id} is not self-fencing, fence forced by the "
            "operator",
        )
    return _held(
        job, f"{prefix} ({health}): run {run.id} is not self-fencing, not fenced unless forced"
    )


def _held(job: JobRecord, reason: str) -> Hold | None:
    return Hold(reason) if job.state_reason != reason else None


def fence_path(job: JobRecord) -> list[JobState]:
    """The states a job passes through when its run is fenced: to QUEUED (desired RUNNING) or
    STOPPED, through STOPPING where the table needs it (RUNNING, STARTING)."""
    after = JobState.QUEUED if job.desired_state == DesiredState.RUNNING else JobState.STOPPED
    if job.state == after or can_transition(job.state, after):
        return [after]
    return [JobState.STOPPING, after]
