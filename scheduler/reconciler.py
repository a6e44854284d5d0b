"""The reconcile loop's body: drive each job from its observed state toward its desired state.

One ``tick()`` reads the jobs that may need work and, for each, runs the phases

1. observe  — ask the job's cluster about the current run's application (or look it up by name
              when the run's submission was never recorded: adopt before resubmitting);
2. plan     — ``planning.plan`` (pure) picks one action; the decisions around an action's outcome
              (a rejected submission, backoff, UNKNOWN after unanswered polls) are pure too;
3. act      — through two narrow interfaces (``scheduler.ledger``): the *ledger* records the
              intent in one fenced transaction, and only then a *backend* submits or kills; the
              outcome is recorded in another.

Fencing (invariant 3): a tick starts from the node's current :class:`~scheduler.ownership.Claim`
on the group (its slot in the pool under a membership epoch). No claim -- membership not
confirmed, session suspended or lost, or this node not in the pool -- means the tick does
nothing at all. Otherwise the tick first claims the jobs of its slot (a job claimed under a newer
epoch is never taken back), then works only on jobs the ledger says it owns, and every ledger
write carries the claim's fence and the job's version as conditions: a node with a stale view
cannot act, and every submit and kill follows a fenced write.

Cost (what a steady tick reads): the jobs are kept between ticks. A tick reads in full after a
claim change, after jobs changed hands, and every ``full_read_every`` seconds (a safety net);
otherwise only the rows whose ``updated_at`` moved since the last read (minus ``change_margin``
seconds for clock skew between nodes and transactions still open at the last read). Failure
counts are read for all jobs of a tick in one query. Submissions run in a bounded pool of
``submit_workers`` threads (each with its own store session), so one slow submission does not
hold the others back.

One job's error never stops the others, and nothing here raises out of ``tick()``. This class
does blocking I/O (store, cluster); the reconciler actor runs it off its event loop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlparse

from scheduler import catalog, faults, planning, storage
from scheduler.backends.base import AppState, AppStatus, ClusterBackend, SubmitRequest
from scheduler.errors import ClusterUnreachable, NotOwner, StaleWrite, SubmissionRejected
from scheduler.health import abnormal_job_reason
from scheduler.ledger import Backends, FailureQuery, Ledger, LedgerView, Observation
from scheduler.ownership import Claim, Fence
from scheduler.planning import (
    Action,
    CloseRun,
    Failures,
    GiveUp,
    Hold,
    Kill,
    Noop,
    Observed,
    RestartPolicy,
    Resubmit,
    SetState,
    Submit,
    plan,
)
from scheduler.records import ClusterRecord, JobRecord
from scheduler.states import DesiredState, JobState, RunState
from scheduler.store.models import utcnow

log = logging.getLogger("drover.reconciler")

#: submissions one reconciler has in flight at once (each holds a store session and a request)
SUBMIT_WORKERS = 8
#: a full read at least this often (seconds), whatever changed
FULL_READ_EVERY = 30.0
#: an incremental read goes back this far before the last read (seconds)
CHANGE_MARGIN = 5.0

#: observations recorded in one transaction at most
OBSERVATION_BATCH = 500
#: how many jobs the observation loop looks at between two checks of the lease
LEASE_CHECK_EVERY = 256

_OPEN_RUN = frozenset(s for s in RunState if not s.is_final)
_AT_REST = frozenset({JobState.STOPPED, JobState.FINISHED, JobState.FAILED})


class LeaseExpired(Exception):
    """The claim's lease ran out during a tick (frozen process, lost ZooKeeper): stop acting."""


@dataclass
class TickStats:
    jobs: int = 0
    actions: int = 0
    errors: int = 0
    seconds: float = 0.0
    #: jobs that changed hands to this node at the start of the tick
    claimed: int = 0
    #: no current claim: the tick did nothing
    paused: bool = False
    #: the membership epoch of the claim the tick ran under (None: no claim)
    epoch: int | None = None
    #: every owned job was looked at (not paused mid-tick, jobs could be read)
    complete: bool = False
    #: the jobs were read in full (not only the changed ones)
    full_read: bool = False
    #: job rows the tick read from the ledger
    rows_read: int = 0
    #: submissions the tick started
    submissions: int = 0


def needs_work(job: JobRecord) -> bool:
    """Whether a reconciler keeps looking at ``job`` (desired RUNNING, or not at rest)."""
    return job.desired_state == DesiredState.RUNNING or job.state not in _AT_REST


class Reconciler:
    def __init__(
        self,
        ledger: Ledger,
        backends: Backends,
        *,
        node_id: str,
        group: str,
        claim: Callable[[], Claim | None],
        policy: RestartPolicy,
        unknown_after_polls: int = 3,
        clock: Callable[[], datetime] = utcnow,
        submit_workers: int = SUBMIT_WORKERS,
        full_read_every: float = FULL_READ_EVERY,
        change_margin: float = CHANGE_MARGIN,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ledger = ledger
        self._backends = backends
        self._node_id = node_id
        self._group = group
        self._current_claim = claim
        self._claim: Claim | None = None
        self._claim_lock = threading.Lock()
        self._policy = policy
        self._unknown_after = unknown_after_polls
        self._clock = clock
        self._monotonic = monotonic
        self._poll_failures: dict[int, int] = {}
        self._last_error: dict[int, str] = {}
        self._view = LedgerView([])
        #: the jobs that may need work, as last read or written (by id)
        self._jobs: dict[int, JobRecord] = {}
        #: the claim last taken in full (then only new jobs are claimed, until the next full read)
        self._claimed: tuple[Fence, int, int] | None = None
        #: what the kept jobs were read under, and when (monotonic / ledger clock)
        self._read_fence: Fence | None = None
        self._full_read_at = -float("inf")
        self._read_mark: datetime | None = None
        #: per job whose last plan was Noop with a live run: (version, app status) it was planned
        #: on; the same again next tick skips the plan (forgotten when a cluster's health moves)
        self._quiet: dict[int, tuple[int, AppStatus]] = {}
        #: this tick's backend per cluster name
        self._tick_backends: dict[str, ClusterBackend] = {}
        #: jobs to read again next tick whatever their ``updated_at`` (a write found them moved)
        self._reread: set[int] = set()
        self._full_read_every = full_read_every
        self._change_margin = timedelta(seconds=change_margin)
        self._submit_workers = max(1, submit_workers)
        self._submitter: ThreadPoolExecutor | None = None
        #: extras every submission carries (the fencing check's URLs, the runtime's py-files)
        self.fence_urls: tuple[str, ...] = ()
        self.py_files: tuple[str, ...] = ()

    def close(self) -> None:
        """Stop the submission pool (after the submissions under way)."""
        if self._submitter is not None:
            self._submitter.shutdown(wait=True)
            self._submitter = None

    def _check_lease(self) -> None:
        """Raise LeaseExpired unless the claim is still valid (renewed once if it ran out)."""
        with self._claim_lock:
            claim = self._claim
            if claim is not None and claim.valid(self._monotonic()):
                return
            fresh = self._current_claim() if claim is not None else None
            if fresh is None or claim is None or fresh.fence != claim.fence:
                raise LeaseExpired(self._group)  # a changed view is picked up by the next tick
            if not fresh.valid(self._monotonic()):
                raise LeaseExpired(self._group)
            self._claim = fresh

    @property
    def _fence(self) -> Fence:
        claim = self._claim
        assert claim is not None, "acting outside a tick"
        return claim.fence

    # -- the loop body ----------------------------------------------------------------------

    def tick(self) -> TickStats:
        started = time.perf_counter()
        stats = TickStats()
        with self._claim_lock:
            self._claim = claim = self._current_claim()
        if claim is None:
            stats.paused = True
            stats.seconds = time.perf_counter() - started
            return stats
        stats.epoch = claim.fence.epoch
        try:
            # in full after a claim change and with every full read; else only new jobs
            slot = (claim.fence, claim.index, claim.size)
            cheap = slot == self._claimed and not self._full_read_due()
            stats.claimed = self._ledger.claim(claim, only_unowned=cheap)
            self._claimed = slot
            self._read(claim.fence, stats)
        except Exception:
            log.exception("cannot read the jobs to reconcile")
            self._read_fence = None  # read everything again next time
            self._claimed = None
            stats.errors += 1
            stats.seconds = time.perf_counter() - started
            return stats
        jobs = sorted(self._jobs.values(), key=lambda j: j.id)
        stats.jobs = len(jobs)
        try:
            stats.complete = self._reconcile_all(jobs, stats)
        except LeaseExpired:
            log.warning(
                "the claim on group %s expired mid-tick; waiting for membership", self._group
            )
            stats.paused = True
        stats.seconds = time.perf_counter() - started
        return stats

    def _full_read_due(self) -> bool:
        return (
            self._read_mark is None
            or self._monotonic() - self._full_read_at >= self._full_read_every
        )

    def _read(self, fence: Fence, stats: TickStats) -> None:
        """Bring the kept jobs up to date: in full, or only the rows that changed."""
        mark = self._clock()
        full = fence != self._read_fence or stats.claimed > 0 or self._full_read_due()
        if full:
            view = self._ledger.read(fence, self._group)
            self._jobs = {j.id: j for j in view.jobs if needs_work(j)}
            self._quiet = {i: key for i, key in self._quiet.items() if i in self._jobs}
            self._full_read_at = self._monotonic()
            self._read_fence = fence
        else:
            assert self._read_mark is not None
            view = self._ledger.read(
                fence,
                self._group,
                changed_since=self._read_mark - self._change_margin,
                ids=sorted(self._reread),
            )
            for job in view.jobs:
                if needs_work(job):
                    self._jobs[job.id] = job
                else:
                    self._jobs.pop(job.id, None)
            for job_id in self._reread - {j.id for j in view.jobs}:
                self._jobs.pop(job_id, None)  # gone, or no longer ours
        self._reread.clear()
        health = {c.name: c.health for c in view.clusters.values()}
        if health != {c.name: c.health for c in self._view.clusters.values()}:
            self._quiet.clear()  # a plan also depends on the health of the job's cluster
        self._tick_backends = {}
        self._view = view
        self._read_mark = mark
        stats.full_read = full
        stats.rows_read = len(view.jobs)

    def _reconcile_all(self, jobs: list[JobRecord], stats: TickStats) -> bool:
        """Observe every job, read the failure counts the plans need at once, plan and act.

        Returns whether every job was looked at. Raises LeaseExpired when the claim ran out.
        """
        observed: list[tuple[JobRecord, AppStatus | None]] = []
        quiet = self._quiet
        for i, job in enumerate(jobs):
            if i % LEASE_CHECK_EVERY == 0:  # and before every action
                self._check_lease()
            try:
                observation = self._observe(job)
            except Exception as exc:
                self._failed(job, exc, stats)
                continue
            if observation is None:  # the cluster could not be asked: never guess
                continue
            seen, status = observation
            if status is not None and quiet.get(seen.id) == self._quiet_key(seen, status):
                continue  # neither the row nor the application changed: the plan is Noop again
            observed.append(observation)
        now = self._clock()
        failures = self._failures(observed, now)
        submissions: list[tuple[JobRecord, Future[JobRecord]]] = []
        observations: list[Observation] = []
        try:
            for job, status in observed:
                job_failures = failures.get(job.id, Failures())
                try:
                    action = self._plan(job, status, job_failures, now)
                    if isinstance(action, Noop):
                        if status is not None:  # a live run: nothing else moves the plan
                            quiet[job.id] = self._quiet_key(job, status)
                        self._done(job)
                        continue
                    log.debug("job %s: %s", job.name, action)
                    self._check_lease()
                    stats.actions += 1
                    if isinstance(action, Observed):  # recorded together below
                        observations.append(self._observation(job, action, now))
                    elif isinstance(action, Submit | Resubmit):
                        stats.submissions += 1
                        future = self._submission_pool().submit(
                            self._submit, job, action, job_failures, now
                        )
                        submissions.append((job, future))
                    else:
                        self._done(self._act(job, action, job_failures, now))
                except LeaseExpired:
                    raise
                except Exception as exc:
                    self._failed(job, exc, stats)
            self._record_observations(observations, stats)
        finally:
            lease_expired = self._collect(submissions, stats)
        if lease_expired:
            raise LeaseExpired(self._group)
        return True

    def _collect(
        self, submissions: list[tuple[JobRecord, Future[JobRecord]]], stats: TickStats
    ) -> bool:
        """Wait for the tick's submissions; returns whether one found the lease expired."""
        expired = False
        for job, future in submissions:
            try:
                self._done(future.result())
            except LeaseExpired:
                expired = True
            except Exception as exc:
                self._failed(job, exc, stats)
        return expired

    @staticmethod
    def _quiet_key(job: JobRecord, status: AppStatus) -> tuple[int, AppStatus]:
        return (job.version, status)

    def _submission_pool(self) -> ThreadPoolExecutor:
        if self._submitter is None:
            self._submitter = ThreadPoolExecutor(
                self._submit_workers, thread_name_prefix=f"submit-{self._group}"
            )
        return self._submitter

    def _done(self, job: JobRecord) -> None:
        """``job`` as written: keep it (or drop it once at rest), forget its last error."""
        if needs_work(job):
            self._jobs[job.id] = job
        else:
            self._jobs.pop(job.id, None)
            self._quiet.pop(job.id, None)
        if self._last_error:
            self._last_error.pop(job.id, None)

    def _failed(self, job: JobRecord, exc: Exception, stats: TickStats) -> None:
        self._quiet.pop(job.id, None)
        if isinstance(exc, NotOwner):
            log.info("job %s: %s; left to its owner", job.name, exc)
            self._jobs.pop(job.id, None)
            self._reread.add(job.id)
        elif isinstance(exc, StaleWrite):
            log.info(
                "job %s changed while reconciling (%s); it is re-read next tick", job.name, exc
            )
            self._jobs.pop(job.id, None)
            self._reread.add(job.id)
        else:  # one job's error never stops the loop
            stats.errors += 1
            self._note_error(job, exc)

    def reconcile(self, job: JobRecord) -> bool:
        """Observe, plan, record, act for one job (no batching). Returns whether it acted."""
        observation = self._observe(job)
        if observation is None:
            return False
        job, status = observation
        now = self._clock()
        failures = self._failures([(job, status)], now).get(job.id, Failures())
        action = self._plan(job, status, failures, now)
        if isinstance(action, Noop):
            return False
        self._check_lease()
        if isinstance(action, Submit | Resubmit):
            self._done(self._submit(job, action, failures, now))
        else:
            self._done(self._act(job, action, failures, now))
        return True

    def _plan(
        self, job: JobRecord, status: AppStatus | None, failures: Failures, now: datetime
    ) -> Action:
        cluster = self._job_cluster(job)
        return plan(
            job,
            status,
            failures=failures,
            policy=self._policy,
            now=now,
            cluster_abnormal=catalog.is_abnormal(cluster.health),
            abnormal_reason=abnormal_job_reason(
                cluster.name, cluster.health, cluster.health_reason
            ),
        )

    # -- observe ----------------------------------------------------------------------------

    def _observe(self, job: JobRecord) -> tuple[JobRecord, AppStatus | None] | None:
        """What the cluster says about the current run (None: it could not be asked)."""
        run = job.current_run
        if run is None or run.state not in _OPEN_RUN:
            return job, None
        backend = self._tick_backends.get(run.cluster)
        if backend is None:
            backend = self._tick_backends[run.cluster] = self._backend(run.cluster)
        try:
            if run.submission_id is None:  # re-attach before any resubmission (invariant 4)
                found = backend.find(run.app_name)
                if found is None:
                    status = AppStatus(AppState.NOT_FOUND)
                else:
                    job = self._ledger.record_adopted(
                        job,
                        self._fence,
                        submission_id=found.submission_id,
                        app_id=found.app_id,
                        at=self._clock(),
                    )
                    self._jobs[job.id] = job
                    status = backend.status(found.submission_id, run.app_name, found.app_id)
            else:
                # the recorded link (tag and app id): a node taking over learns nothing again
                status = backend.status(run.submission_id, run.app_name, run.app_id)
        except ClusterUnreachable as exc:
            polls = self._poll_failures.get(run.id, 0) + 1
            self._poll_failures[run.id] = polls
            unknown = planning.on_unreachable(
                job, run, polls=polls, threshold=self._unknown_after, error=str(exc)
            )
            if unknown is not None:
                self._done(
                    self._ledger.record_state(job, self._fence, [unknown.state], unknown.reason)
                )
            return None
        self._poll_failures.pop(run.id, None)
        return job, status

    def _failures(
        self, observed: list[tuple[JobRecord, AppStatus | None]], now: datetime
    ) -> dict[int, Failures]:
        """The failure counts of the jobs whose plan needs one, in one read."""
        queries = [
            FailureQuery(job.id, self._policy.window_start(now, job.attempts_reset_at))
            for job, status in observed
            if planning.needs_failures(job, status)
        ]
        return self._ledger.failures(queries) if queries else {}

    # -- act ----------------------------------------------------------------------------------

    def _act(self, job: JobRecord, action: Action, failures: Failures, now: datetime) -> JobRecord:
        """Record the action (and for a kill, then act); returns the job as written."""
        fence = self._fence
        if isinstance(action, SetState):
            if action.state == job.state:
                return job
            return self._ledger.record_state(job, fence, [action.state], action.reason)
        if isinstance(action, GiveUp):
            return self._ledger.record_state(
                job, fence, action.path, action.reason, not_before=None
            )
        if isinstance(action, Hold):
            return self._ledger.record_state(job, fence, [], action.reason)
        if isinstance(action, Observed):
            return self._record_observed(job, action, now)
        if isinstance(action, Kill):
            return self._kill(job, action)
        if isinstance(action, CloseRun):
            return self._close(job, action, failures, now)
        raise AssertionError(f"not an action to record here: {action!r}")

    @staticmethod
    def _observation(job: JobRecord, action: Observed, now: datetime) -> Observation:
        app_id = action.status.app_id
        run = action.run
        return Observation(
            job,
            run_state=action.run_state,
            job_state=action.job_state,
            reason=f"application {app_id or run.app_name} is {action.status.state}",
            app_id=app_id if app_id and app_id != run.app_id else None,
            started_at=now
            if action.run_state == RunState.RUNNING and run.started_at is None
            else None,
        )

    def _record_observed(self, job: JobRecord, action: Observed, now: datetime) -> JobRecord:
        o = self._observation(job, action, now)
        return self._ledger.record_observed(
            job,
            self._fence,
            run_state=o.run_state,
            job_state=o.job_state,
            reason=o.reason,
            app_id=o.app_id,
            started_at=o.started_at,
        )

    def _record_observations(self, observations: list[Observation], stats: TickStats) -> None:
        """The tick's observations, in transactions of up to OBSERVATION_BATCH jobs (one by one
        when a batch does not land: each then gets its own NotOwner or StaleWrite)."""
        for start in range(0, len(observations), OBSERVATION_BATCH):
            batch = observations[start : start + OBSERVATION_BATCH]
            self._check_lease()
            if len(batch) > 1:
                try:
                    for job in self._ledger.record_observed_all(self._fence, batch):
                        self._done(job)
                    continue
                except StaleWrite:
                    log.info("a batch of %d observations did not land; one by one", len(batch))
                except Exception as exc:
                    log.warning(
                        "a batch of %d observations failed (%s); one by one", len(batch), exc
                    )
            for o in batch:
                try:
                    self._done(
                        self._ledger.record_observed(
                            o.job,
                            self._fence,
                            run_state=o.run_state,
                            job_state=o.job_state,
                            reason=o.reason,
                            app_id=o.app_id,
                            started_at=o.started_at,
                        )
                    )
                except LeaseExpired:
                    raise
                except Exception as exc:
                    self._failed(o.job, exc, stats)

    def _kill(self, job: JobRecord, action: Kill) -> JobRecord:
        # the fenced write first; repeated on every tick until the cluster confirms the kill
        job = self._ledger.record_kill_intent(job, self._fence, reason=action.reason)
        run = job.current_run
        assert run is not None and run.submission_id is not None, "a live app has a submission"
        self._check_lease()
        self._backend(run.cluster).kill(run.submission_id)
        return job

    def _close(
        self, job: JobRecord, action: CloseRun, failures: Failures, now: datetime
    ) -> JobRecord:
        written = self._ledger.close_run(
            job,
            self._fence,
            run_state=action.run_state,
            job_state=action.job_state,
            reason=action.reason,
            exit_code=action.exit_code,
            counts_as_failure=action.counts_as_failure,
            ended_at=now,
            not_before=planning.retry_not_before(
                job, action, failures, policy=self._policy, now=now
            ),
        )
        self._poll_failures.pop(action.run.id, None)
        return written

    def _submit(
        self, job: JobRecord, action: Submit | Resubmit, failures: Failures, now: datetime
    ) -> JobRecord:
        """Record the intent (a new run, or a proof for a run to resubmit), then submit, then
        record the outcome. Runs in the submission pool."""
        fence = self._fence
        if isinstance(action, Submit):
            cluster = self._job_cluster(job)
            claim = self._claim
            note = (
                "DEGRADED MODE: started while ZooKeeper is unreachable, on the last known "
                f"membership (epoch {fence.epoch})"
                if claim is not None and claim.degraded
                else None
            )
            job = self._ledger.record_intent(
                job,
                fence,
                cluster=cluster.name,
                checkpoint_location=storage.checkpoint_location(
                    cluster, job, list(self._view.clusters.values())
                ),
                reason=action.reason,
                note=note,
            )
        else:
            cluster = self._cluster(action.run.cluster)
            self._ledger.prove(job, fence)
        run = job.current_run
        assert run is not None
        request = SubmitRequest(
            job_name=job.name,
            run_id=run.id,
            fencing_token=run.fencing_token,
            entrypoint=_entrypoint_path(job.entrypoint),
            args=job.args,
            conf=job.conf,
            checkpoint_location=run.checkpoint_location,
            py_files=self.py_files,
            fence_urls=self.fence_urls,
        )
        self._check_lease()
        try:
            submission = self._backends.for_cluster(cluster).submit(request)
            faults.hit("after-submit")  # a crash here must never lead to a second application
        except SubmissionRejected as exc:
            return self._close(job, planning.on_rejected(job, run, str(exc)), failures, now)
        except ClusterUnreachable as exc:
            self._ledger.add_event(
                job,
                f"submission outcome unknown ({exc}); the application is looked up by name "
                "before any resubmission",
                run_id=run.id,
            )
            return job
        return self._ledger.record_submitted(
            job,
            fence,
            submission_id=submission.submission_id,
            app_id=submission.app_id,
            at=self._clock(),
        )

    # -- helpers ------------------------------------------------------------------------------

    def _cluster(self, name: str) -> ClusterRecord:
        """The cluster's record as read this tick."""
        cluster = self._view.clusters.get(name)
        if cluster is None:
            raise KeyError(f"no cluster named {name!r}")
        return cluster

    def _job_cluster(self, job: JobRecord) -> ClusterRecord:
        """The cluster of the job's live run, else the job's cluster, else its group's primary."""
        run = job.current_run
        if run is not None and not run.state.is_final:
            return self._cluster(run.cluster)
        return self._cluster(job.cluster or self._view.primary_cluster)

    def _backend(self, cluster_name: str) -> ClusterBackend:
        return self._backends.for_cluster(self._cluster(cluster_name))

    def _note_error(self, job: JobRecord, exc: Exception) -> None:
        message = f"{type(exc).__name__}: {exc}"
        if self._last_error.get(job.id) == message:
            log.debug("job %s: same error again: %s", job.name, message)
            return
        self._last_error[job.id] = message
        log.warning("job %s: reconcile failed: %s", job.name, message, exc_info=exc)
        try:
            self._ledger.add_event(job, f"reconcile error (retried every tick): {message}")
        except Exception:
            log.exception("cannot record the error of job %s", job.name)


def _entrypoint_path(entrypoint: str) -> str:
    parsed = urlparse(entrypoint)
    if parsed.scheme == "file":
        return parsed.path
    return entrypoint
