"""What to do next for one job: a pure function of what was read and what was observed.

``plan()`` looks at the job as stored (desired state, observed state, current run) and at what the
cluster said about the current run's application, and returns one :class:`Action`. The reconciler
records the action's intent in the store (a conditional write) and only then acts on the cluster.

Restart policy (owned by Drover, not by Spark's ``supervise``): a run that ends on its own while
the job should run counts as a failure; after ``max_attempts`` failures within
``validity_interval`` seconds (counted from the later of that window and the last explicit
start) the job is FAILED for good, until an operator starts it again: a FAILED job whose reason
starts with :data:`GAVE_UP` stays so even once its failures have left the window. Between
attempts the reconciler waits ``backoff_initial * 2**(n-1)`` seconds, at most ``backoff_max``.

Abnormal cluster (``cluster_abnormal=True``: the cluster the job runs on, or would be submitted
to, has a health other than NORMAL): nothing is submitted there. A job that should run waits in
QUEUED with :data:`CLUSTER_ABNORMAL` as its reason (no Submit, no Resubmit, no GiveUp), and a run
that ends meanwhile does not count against the restart budget. Observing, killing and stopping
work as usual.

Graceful stop: a live run that is no longer wanted (a stop, a restart, an upgrade) and whose
pipeline fences itself (it has made a fence check: ``run.fence_checked_at``) is first asked to
finish its micro-batch and exit (:class:`Drain`: the fence answer tells the pipeline); it is
killed once the grace period is over (the job's ``grace_seconds`` as the request asked, else
``RestartPolicy.stop_grace``; 0 = kill at once). A plain pipeline, one that has not made its
first check yet, and a run still starting are killed directly. A run asked to stop stays so
even if the job is wanted again meanwhile: it ends, then a new run starts.

Fence leases (``scheduler.decisions.leases``): no new run of the job is submitted, on any
cluster, while its last run was closed without its cluster confirming the application gone
(LOST) and a fence lease granted to its driver may still be valid: that driver may still commit.
The job waits (its reason says until when) and is submitted once the lease surely lapsed. Nor is
a run that was never recorded as submitted submitted again while its driver holds a lease: it
runs somewhere, though its cluster cannot find it.

Submissions in doubt: a run still SUBMITTING without a submission id whose application the
cluster does not list may still get one -- a submission whose request timed out may sit in the
cluster manager's queue (a standalone master's inbox, a YARN client still uploading) and become
a driver after the lookup said "none". Such a run is not submitted again (:class:`Resubmit`, with
a fresh token) nor closed as never submitted before :func:`in_doubt_until`, ``policy.
in_doubt_grace`` seconds after its latest submission was decided (its intent or its latest
reissue, ``RunRecord.submit_intent_at``): the job is held with a reason that says until when,
and a driver that shows up meanwhile is adopted. A late driver after the grace is a duplicate
the stray sweep kills (``scheduler.decisions.strays``).

Upgrades with a deadline (``scheduler.decisions.revisions.upgrade_step``): once a run of the job's
generation is RUNNING the deadline is cleared (:class:`UpgradeDone`); if the deadline passes
first, or the new spec's restart budget is spent, the job rolls back (:class:`RollBack`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler.core.backend import AppState, AppStatus
from scheduler.core.records import Failures, JobRecord, RunRecord
from scheduler.core.states import DesiredState, JobState, RunState, can_transition
from scheduler.decisions import leases, revisions, steering
from scheduler.decisions.actions import (
    Action,
    CloseRun,
    Drain,
    GiveUp,
    Hold,
    Kill,
    Noop,
    Observed,
    Resubmit,
    RollBack,
    SetState,
    Submit,
    UpgradeDone,
)

#: the default of ``RestartPolicy.in_doubt_grace`` (and of the setting
#: ``submit_in_doubt_grace``). Spark standalone: a create is answered in 30-60 ms and Drover's
#: client gives up after 3 s (``StandaloneRestBackend.timeout_s``), but the master's REST server
#: hands the request to the master's message loop and waits for it up to the RPC ask timeout
#: (``spark.rpc.askTimeout``, 120 s by default), so a create the client gave up on can still
#: become a driver some seconds later while the master is busy. YARN: the client of a node that
#: died dies with it (no late submission), and on a live node ``find`` refuses to answer while
#: its own submission of the run is in flight. 60 s is twenty times the standalone client
#: timeout and delays a truly lost submission's retry by about a minute; a driver that appears
#: later still (a master stalled longer, a YARN client on a cut-off node, which may run up to
#: its 300 s submit timeout) is a duplicate the stray sweep kills
DEFAULT_IN_DOUBT_GRACE_S = 60.0


@dataclass(frozen=True)
class RestartPolicy:
    max_attempts: int = 3
    validity_interval: float = 600.0
    backoff_initial: float = 2.0
    backoff_max: float = 60.0
    #: seconds a graceful stop waits for the pipeline before a kill, unless the request said
    #: (0: no graceful stop, kill at once)
    stop_grace: float = 0.0
    #: seconds added to a run's recorded fence lease end before it surely lapsed (the nodes'
    #: clock margin, ``scheduler.decisions.leases``)
    lease_margin: float = leases.DEFAULT_MARGIN_S
    #: seconds after a run's latest submission was decided during which a run without a
    #: submission id that its cluster does not list is in doubt: neither submitted again nor
    #: closed (:func:`in_doubt_until`; 0: resubmitted at once)
    in_doubt_grace: float = DEFAULT_IN_DOUBT_GRACE_S

    def grace(self, job: JobRecord) -> float:
        """The grace period of a stop of ``job``'s live run."""
        return self.stop_grace if job.grace_seconds is None else max(0.0, job.grace_seconds)

    def backoff(self, failures: int) -> float:
        """Seconds to wait before the next attempt after ``failures`` failures in the window."""
        if failures <= 0:
            return 0.0
        return min(self.backoff_initial * (2 ** (failures - 1)), self.backoff_max)

    def window_start(self, now: datetime, attempts_reset_at: datetime) -> datetime:
        return max(now - timedelta(seconds=self.validity_interval), attempts_reset_at)


CLUSTER_ABNORMAL = (
    "waiting: the job's cluster is abnormal; no restart there until it is NORMAL again "
    "or the job fails over"
)

#: how the reason of a job whose restart budget is spent begins (see :func:`_gave_up`)
GAVE_UP = "gave up after "

_FINAL_RUN_STATE = {
    AppState.FINISHED: RunState.FINISHED,
    AppState.FAILED: RunState.FAILED,
    AppState.KILLED: RunState.KILLED,
    AppState.NOT_FOUND: RunState.LOST,
}


def plan(
    job: JobRecord,
    observed: AppStatus | None,
    *,
    failures: Failures,
    policy: RestartPolicy,
    now: datetime,
    cluster_abnormal: bool = False,
    abnormal_reason: str = CLUSTER_ABNORMAL,
) -> Action:
    """Decide the next action for ``job``.

    ``observed`` is the cluster's view of the current run's application (``None`` when the job has
    no live run). For a run still SUBMITTING without a submission id, it is the result of looking
    the application up by name (NOT_FOUND when none carries the run's name).
    ``cluster_abnormal``: the job's cluster is not NORMAL (see the module docstring);
    ``abnormal_reason``: the state reason a job held for it shows (which cluster, its health and
    why: ``scheduler.decisions.health.abnormal_job_reason``).

    A job that carries a directive (an operation such as a failover moves it) is steered by
    ``scheduler.decisions.steering.steer`` first.
    """
    doubt = _in_doubt(job, observed, policy, now)
    if doubt is not None:  # before a directive too: a drain must not close it either
        return doubt
    if job.directive is not None:
        steered = steering.steer(job, observed)
        if steered is not None:
            return steered
    upgrade = _plan_upgrade(job, now)
    if upgrade is not None:
        return upgrade
    run = job.current_run
    if run is not None and not run.state.is_final:
        if observed is None:
            return Noop("the current run's application has not been observed")
        return _plan_live_run(
            job,
            run,
            observed,
            failures=failures,
            policy=policy,
            abnormal=cluster_abnormal,
            abnormal_reason=abnormal_reason,
            now=now,
        )
    if job.desired_state == DesiredState.RUNNING and _given_up(job):
        return Noop("gave up; waiting for an operator to start the job again")
    if cluster_abnormal and job.desired_state == DesiredState.RUNNING:
        return _wait_for_cluster(job, abnormal_reason)
    return _plan_without_run(job, failures=failures, policy=policy, now=now)


def _plan_upgrade(job: JobRecord, now: datetime) -> Action | None:
    step = revisions.upgrade_step(job, now, given_up=_given_up(job))
    if step is None or step == revisions.UpgradeStep.WAIT:
        return None
    if step == revisions.UpgradeStep.DONE:
        return UpgradeDone(f"upgrade to revision {job.spec_version} is over")
    assert job.upgrade_from is not None and job.upgrade_deadline is not None
    why = (
        "its restart budget is spent"
        if _given_up(job)
        else f"it was not RUNNING by {job.upgrade_deadline.isoformat()}"
    )
    return RollBack(
        job.upgrade_from,
        f"upgrade to revision {job.spec_version} rolled back to revision {job.upgrade_from}: "
        f"{why} (state {job.state}: {job.state_reason})",
    )


def _wait_for_cluster(job: JobRecord, reason: str) -> Action:
    if job.state != JobState.QUEUED and can_transition(job.state, JobState.QUEUED):
        return SetState(JobState.QUEUED, reason)
    if job.state_reason != reason:
        return Hold(reason)
    return Noop(reason)


def _plan_live_run(
    job: JobRecord,
    run: RunRecord,
    observed: AppStatus,
    *,
    failures: Failures,
    policy: RestartPolicy,
    abnormal: bool,
    abnormal_reason: str = CLUSTER_ABNORMAL,
    now: datetime,
) -> Action:
    wanted = job.desired_state == DesiredState.RUNNING and run.generation == job.generation
    if observed.state.is_terminal:
        if run.state == RunState.SUBMITTING and run.submission_id is None:
            held = leases.held_until(run, now, policy.lease_margin)
            if held is not None:  # its driver checked in: it runs, though it cannot be found
                return Noop(
                    f"run {run.id} is not found on {run.cluster} but its driver holds a fence "
                    f"lease until {held.isoformat(timespec='seconds')}: not submitted again"
                )
            if wanted and not abnormal:
                return Resubmit(run)
            return CloseRun(
                run,
                RunState.LOST,
                _after_stop(job),
                f"never submitted; {abnormal_reason}" if wanted else "never submitted",
                None,
                counts_as_failure=False,
            )
        if run.state == RunState.STOPPING:
            return CloseRun(
                run,
                RunState.KILLED,
                _after_stop(job),
                "stopped by Drover",
                observed.exit_code,
                counts_as_failure=False,
            )
        if run.drain_deadline is not None:  # the pipeline stopped as it was asked
            final = _FINAL_RUN_STATE[observed.state]
            batch = f" after batch {run.stop_batch}" if run.stop_batch is not None else ""
            how = "" if final == RunState.FINISHED else f" (application {observed.state})"
            return CloseRun(
                run,
                final,
                _after_stop(job),
                f"stopped gracefully{batch}{how}",
                observed.exit_code,
                counts_as_failure=False,
            )
        final = _FINAL_RUN_STATE[observed.state]
        reason = (
            observed.reason
            or {
                RunState.FINISHED: "application finished",
                RunState.FAILED: "application failed",
                RunState.KILLED: "application killed outside Drover",
                RunState.LOST: "the cluster no longer knows the application",
            }[final]
        )
        job_state = JobState.FINISHED if final == RunState.FINISHED else JobState.FAILED
        if observed.exit_code == leases.LEASE_LAPSED_EXIT:  # Drover's absence, not the job's
            return CloseRun(
                run,
                final,
                _after_stop(job),
                f"its fence lease lapsed while no Drover node answered it: the pipeline stopped "
                f"committing and exited (code {leases.LEASE_LAPSED_EXIT}); started again, not "
                "counted as a failure",
                observed.exit_code,
                counts_as_failure=False,
            )
        if abnormal:  # the cluster's fault, not the job's: no failure, no giving up
            if job.desired_state == DesiredState.RUNNING:
                reason = f"{reason} (on an abnormal cluster: not counted as a failure)"
            if not can_transition(job.state, job_state):
                job_state = JobState.FAILED
            return CloseRun(
                run, final, job_state, reason, observed.exit_code, counts_as_failure=False
            )
        if job.desired_state == DesiredState.RUNNING and failures.count + 1 >= policy.max_attempts:
            job_state = JobState.FAILED
            reason = _gave_up(failures.count + 1, policy, reason)
        return CloseRun(run, final, job_state, reason, observed.exit_code, counts_as_failure=True)
    # the application is alive
    if run.state == RunState.STOPPING:  # a kill is under way: finish it before anything else
        return Kill(run, "a stop is under way")
    if run.drain_deadline is not None:  # a graceful stop is under way
        if now >= run.drain_deadline:
            return Kill(run, "the graceful stop's grace period is over")
        if job.grace_seconds == 0:  # a later stop, restart or upgrade asked for no grace
            return Kill(run, "a stop without grace was asked while stopping gracefully")
        return Noop("stopping gracefully: waiting for the pipeline to finish its micro-batch")
    if not wanted:
        why = "desired state is STOPPED" if job.desired_state == DesiredState.STOPPED else "restart"
        grace = policy.grace(job)
        if grace > 0 and drains(run, observed):
            return Drain(
                run,
                now + timedelta(seconds=grace),
                f"{why}: the pipeline is asked to finish its micro-batch and exit "
                f"(killed after {grace:g} s)",
            )
        return Kill(run, why)
    if observed.state == AppState.RUNNING:
        if run.state != RunState.RUNNING or job.state != JobState.RUNNING:
            return Observed(run, observed, JobState.RUNNING, RunState.RUNNING)
        return Noop("running")
    if run.state == RunState.RUNNING:
        return Noop("running (the cluster reports it starting again)")
    if run.state == RunState.SUBMITTING or job.state != JobState.STARTING:
        return Observed(run, observed, JobState.STARTING, RunState.STARTING)
    return Noop("starting")


def _in_doubt(
    job: JobRecord, observed: AppStatus | None, policy: RestartPolicy, now: datetime
) -> Action | None:
    """Hold (or Noop once its reason is written) a run in doubt: SUBMITTING without a submission
    id, not found by its cluster, its latest submission decided less than the grace ago (see the
    module docstring). None: not in doubt."""
    run = job.current_run
    if run is None or run.state != RunState.SUBMITTING or run.submission_id is not None:
        return None
    if observed is None or not observed.state.is_terminal:
        return None
    doubt = in_doubt_until(run, policy)
    if now >= doubt:
        return None
    held = leases.held_until(run, now, policy.lease_margin)
    if held is not None:  # the lease says more: its driver checked in
        return Noop(
            f"run {run.id} is not found on {run.cluster} but its driver holds a fence "
            f"lease until {held.isoformat(timespec='seconds')}: not submitted again"
        )
    reason = (
        f"submission of run {run.id} is in doubt until {doubt.isoformat(timespec='seconds')}: "
        f"looking it up on cluster {run.cluster} before submitting again"
    )
    return Noop(reason) if job.state_reason == reason else Hold(reason)


def in_doubt_until(run: RunRecord, policy: RestartPolicy) -> datetime:
    """Until when a run without a submission id may still get a driver from its latest
    submission (see the module docstring): ``policy.in_doubt_grace`` after it was decided."""
    decided = run.submit_intent_at or run.created_at
    return decided + timedelta(seconds=policy.in_doubt_grace)


def drains(run: RunRecord, observed: AppStatus) -> bool:
    """Whether a stop of ``run`` can be graceful: its application is RUNNING and its pipeline
    fences itself (it has asked the fence endpoint, so it will read the stop request there)."""
    return (
        observed.state == AppState.RUNNING
        and run.state == RunState.RUNNING
        and run.fence_checked_at is not None
    )


def timed(job: JobRecord) -> bool:
    """Whether the job's plan may change with time alone (a graceful stop's or an upgrade's
    deadline, a fence lease or the doubt of a run that cannot be found): such a job is never
    quiet."""
    run = job.current_run
    draining = run is not None and run.drain_deadline is not None and not run.state.is_final
    unfound = run is not None and run.submission_id is None and not run.state.is_final
    return draining or unfound or job.upgrade_deadline is not None


def _after_stop(job: JobRecord) -> JobState:
    """The job's state once its run is gone because Drover stopped or replaced it."""
    return JobState.QUEUED if job.desired_state == DesiredState.RUNNING else JobState.STOPPED


def _plan_without_run(
    job: JobRecord, *, failures: Failures, policy: RestartPolicy, now: datetime
) -> Action:
    if job.desired_state == DesiredState.STOPPED:
        if job.state.is_at_rest:
            return Noop("stopped")
        return SetState(JobState.STOPPED, "desired state is STOPPED")
    if failures.count >= policy.max_attempts:
        if job.state == JobState.FAILED:
            return Noop("gave up; waiting for an operator to start the job again")
        reason = _gave_up(failures.count, policy, job.state_reason or "no reason recorded")
        if can_transition(job.state, JobState.FAILED):
            return GiveUp(reason)
        return GiveUp(reason, (JobState.QUEUED, JobState.FAILED))
    if job.not_before is not None and now < job.not_before:
        return Noop(f"backing off until {job.not_before.isoformat()}")
    last = job.current_run
    held = leases.holds(last, now, policy.lease_margin)
    if last is not None and held is not None:
        return _wait_for_cluster(
            job, f"waiting: {leases.describe(last, held)}; no new run before then"
        )
    if failures.count:
        return Submit(f"restart attempt {failures.count + 1} after: {job.state_reason}")
    return Submit("desired state is RUNNING")


def _given_up(job: JobRecord) -> bool:
    """The restart budget was spent (GiveUp, or the CloseRun that spent it), and no operator has
    started the job since (a start or restart moves it out of FAILED)."""
    return job.state == JobState.FAILED and job.state_reason.startswith(GAVE_UP)


def _gave_up(count: int, policy: RestartPolicy, reason: str) -> str:
    return f"{GAVE_UP}{count} failures within {policy.validity_interval:g} s: {reason}"


# -- decisions around an action's outcome ----------------------------------------------------


def needs_failures(job: JobRecord, observed: AppStatus | None) -> bool:
    """Whether ``plan`` needs the job's failure count (else ``Failures()`` is exact enough)."""
    if job.desired_state != DesiredState.RUNNING:
        return False
    return observed is None or observed.state.is_terminal


def retry_not_before(
    job: JobRecord, action: CloseRun, failures: Failures, *, policy: RestartPolicy, now: datetime
) -> datetime | None:
    """When the next attempt may start after ``action`` closed a run (None: no backoff)."""
    if not action.counts_as_failure or job.desired_state != DesiredState.RUNNING:
        return None
    return now + timedelta(seconds=policy.backoff(failures.count + 1))


def on_rejected(job: JobRecord, run: RunRecord, error: str) -> CloseRun:
    """The cluster refused the submission of ``run``: the run failed and counts as a failure
    (the restart policy then backs off, retries or gives up)."""
    return CloseRun(
        run,
        RunState.FAILED,
        JobState.FAILED,
        f"submission rejected: {error}",
        None,
        counts_as_failure=True,
    )


def on_unreachable(
    job: JobRecord, run: RunRecord, *, polls: int, threshold: int, error: str
) -> SetState | None:
    """The cluster of ``run`` did not answer ``polls`` times in a row: the job's state becomes
    UNKNOWN after ``threshold`` polls (nothing is guessed about the application)."""
    if polls < threshold or job.state == JobState.UNKNOWN:
        return None
    if not can_transition(job.state, JobState.UNKNOWN):
        return None
    return SetState(
        JobState.UNKNOWN, f"cluster {run.cluster} unreachable for {polls} polls: {error}"
    )
