"""The reconcile loop's body: drive each job from its observed state toward its desired state.

One ``tick()`` reads the jobs that may need work and, for each, runs the phases

1. observe  — ask the job's cluster about the current run's application (or look it up by name
              when the run's submission was never recorded: adopt before resubmitting);
2. plan     — ``planning.plan`` (pure) picks one action;
3. record   — a conditional write in the store records the intent (fenced by the job's version);
4. act      — only then submit or kill on the cluster, and record the outcome.

Fencing (invariant 3): a tick starts from the node's current :class:`~scheduler.ownership.Claim`
on the group (its slot in the pool under a membership epoch). No claim -- membership not
confirmed, session suspended or lost, or this node not in the pool -- means the tick does
nothing at all. Otherwise the tick first claims the jobs of its slot in the store (a job claimed
under a newer epoch is never taken back), then works only on jobs the store says it owns, and
every write (and a no-op proof write before every kill and submission) carries the claim as a
condition: a node with a stale view cannot act.

One job's error never stops the others, and nothing here raises out of ``tick()``. This class
does blocking I/O (store, cluster); the reconciler actor runs it off its event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlparse

from scheduler import catalog, faults, storage
from scheduler.backends.base import AppState, AppStatus, ClusterBackend, SubmitRequest, app_name_for
from scheduler.backends.registry import BackendRegistry
from scheduler.errors import ClusterUnreachable, NotOwner, StaleWrite, SubmissionRejected
from scheduler.health import abnormal_job_reason
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
from scheduler.records import ClusterRecord, JobRecord, RunRecord
from scheduler.states import DesiredState, JobState, RunState, can_transition
from scheduler.store import catalog as catalog_store
from scheduler.store import journal, ledger
from scheduler.store.db import Store
from scheduler.store.models import utcnow

log = logging.getLogger("drover.reconciler")

CAUSE = "reconciler"


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


class Reconciler:
    def __init__(
        self,
        store: Store,
        backends: BackendRegistry,
        *,
        node_id: str,
        group: str,
        claim: Callable[[], Claim | None],
        policy: RestartPolicy,
        unknown_after_polls: int = 3,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._store = store
        self._backends = backends
        self._node_id = node_id
        self._group = group
        self._current_claim = claim
        self._claim: Claim | None = None
        self._policy = policy
        self._unknown_after = unknown_after_polls
        self._clock = clock
        self._poll_failures: dict[int, int] = {}
        self._last_error: dict[int, str] = {}
        self._clusters: dict[str, ClusterRecord] = {}
        self._every_cluster: list[ClusterRecord] | None = None
        self._primaries: dict[str, str] = {}
        #: extras every submission carries (the fencing check's URLs, the runtime's py-files)
        self.fence_urls: tuple[str, ...] = ()
        self.py_files: tuple[str, ...] = ()

    def _check_lease(self) -> None:
        """Raise LeaseExpired unless the claim is still valid (renewed once if it ran out)."""
        if self._claim is not None and self._claim.valid(time.monotonic()):
            return
        fresh = self._current_claim() if self._claim is not None else None
        if fresh is None or self._claim is None or fresh.fence != self._claim.fence:
            raise LeaseExpired(self._group)  # a changed view is picked up by the next tick
        if not fresh.valid(time.monotonic()):
            raise LeaseExpired(self._group)
        self._claim = fresh

    @property
    def _fence(self) -> Fence:
        assert self._claim is not None, "acting outside a tick"
        return self._claim.fence

    # -- the loop body ----------------------------------------------------------------------

    def tick(self) -> TickStats:
        started = time.monotonic()
        stats = TickStats()
        # cluster records may change between ticks, not within one
        self._clusters = {}
        self._primaries = {}
        self._every_cluster = None
        self._claim = claim = self._current_claim()
        if claim is None:
            stats.paused = True
            stats.seconds = time.monotonic() - started
            return stats
        stats.epoch = claim.fence.epoch
        try:
            with self._store.transaction() as session:
                stats.claimed = ledger.claim_jobs(session, claim)
            with self._store.session() as session:
                jobs = ledger.jobs_to_reconcile(session, [self._group], claim.fence)
        except Exception:
            log.exception("cannot read the jobs to reconcile")
            stats.errors += 1
            stats.seconds = time.monotonic() - started
            return stats
        stats.jobs = len(jobs)
        for job in jobs:
            try:
                self._check_lease()
                if self.reconcile(job):
                    stats.actions += 1
                self._last_error.pop(job.id, None)
            except LeaseExpired:
                log.warning(
                    "the claim on group %s expired mid-tick; waiting for membership", self._group
                )
                stats.paused = True
                break
            except NotOwner as exc:
                log.info("job %s: %s; left to its owner", job.name, exc)
            except StaleWrite as exc:
                log.info(
                    "job %s changed while reconciling (%s); it is re-read next tick", job.name, exc
                )
            except Exception as exc:  # one job's error never stops the loop
                stats.errors += 1
                self._note_error(job, exc)
        else:
            stats.complete = True
        stats.seconds = time.monotonic() - started
        return stats

    def reconcile(self, job: JobRecord) -> bool:
        """Observe, plan, record, act for one job. Returns whether anything was done."""
        now = self._clock()
        observation = self._observe(job)
        if observation is None:  # the cluster could not be asked: never guess
            return False
        job, observed = observation
        failures = self._failures(job, observed, now)
        cluster = self._job_cluster(job)
        held = abnormal_job_reason(cluster.name, cluster.health, cluster.health_reason)
        action = plan(
            job,
            observed,
            failures=failures,
            policy=self._policy,
            now=now,
            cluster_abnormal=catalog.is_abnormal(cluster.health),
            abnormal_reason=held,
        )
        if isinstance(action, Noop):
            return False
        log.debug("job %s: %s", job.name, action)
        self._check_lease()
        self._act(job, action, failures, now)
        return True

    # -- observe ----------------------------------------------------------------------------

    def _observe(self, job: JobRecord) -> tuple[JobRecord, AppStatus | None] | None:
        run = job.current_run
        if run is None or run.state.is_final:
            return job, None
        backend = self._backend(run.cluster)
        try:
            if run.submission_id is None:
                found = backend.find(run.app_name)
                if found is None:
                    status = AppStatus(AppState.NOT_FOUND)
                else:
                    run = self._adopt(job, run, found.submission_id, found.app_id)
                    job = replace(job, current_run=run)
                    status = backend.status(found.submission_id, run.app_name)
            else:
                status = backend.status(run.submission_id, run.app_name)
        except ClusterUnreachable as exc:
            polls = self._poll_failures.get(run.id, 0) + 1
            self._poll_failures[run.id] = polls
            if polls >= self._unknown_after and job.state != JobState.UNKNOWN:
                with self._store.transaction() as session:
                    self._transition(
                        session,
                        job,
                        JobState.UNKNOWN,
                        reason=f"cluster {run.cluster} unreachable for {polls} polls: {exc}",
                    )
            return None
        self._poll_failures.pop(run.id, None)
        return job, status

    def _adopt(
        self, job: JobRecord, run: RunRecord, submission_id: str, app_id: str | None
    ) -> RunRecord:
        with self._store.transaction() as session:
            ledger.check_owner(session, job, self._fence)
            adopted = ledger.update_run(
                session,
                run,
                submission_id=submission_id,
                app_id=app_id,
                submitted_at=run.submitted_at or self._clock(),
            )
            journal.add_job_event(
                session,
                job,
                cause=CAUSE,
                node_id=self._node_id,
                run_id=run.id,
                message=f"adopted application {run.app_name} ({submission_id}) instead of "
                "resubmitting",
            )
        return adopted

    def _failures(self, job: JobRecord, observed: AppStatus | None, now: datetime) -> Failures:
        if job.desired_state != DesiredState.RUNNING:
            return Failures()
        if observed is not None and not observed.state.is_terminal:
            return Failures()
        since = self._policy.window_start(now, job.attempts_reset_at)
        with self._store.session() as session:
            count, last = ledger.failures_since(session, job, since)
        return Failures(count, last)

    # -- record and act -----------------------------------------------------------------------

    def _act(self, job: JobRecord, action: Action, failures: Failures, now: datetime) -> None:
        if isinstance(action, SetState):
            self._set_state(job, action.state, action.reason)
        elif isinstance(action, GiveUp):
            if not can_transition(job.state, JobState.FAILED):
                job = self._set_state(job, JobState.QUEUED, action.reason)
            self._set_state(job, JobState.FAILED, action.reason, not_before=None)
        elif isinstance(action, Submit):
            self._submit_new_run(job, action.reason)
        elif isinstance(action, Resubmit):
            self._submit(job, action.run, self._cluster(action.run.cluster))
        elif isinstance(action, Observed):
            self._record_observed(job, action, now)
        elif isinstance(action, Kill):
            self._kill(job, action)
        elif isinstance(action, CloseRun):
            self._close_run(job, action, failures, now)
        elif isinstance(action, Hold):
            self._set_state(job, job.state, action.reason, force=True)

    def _transition(
        self, session: Any, job: JobRecord, state: JobState, *, reason: str, **fields: Any
    ) -> int:
        """This reconciler's state write: version-conditional and fenced by its claim."""
        return ledger.transition_job(
            session,
            job,
            state,
            reason=reason,
            cause=CAUSE,
            node_id=self._node_id,
            fence=self._fence,
            **fields,
        )

    def _set_state(
        self, job: JobRecord, state: JobState, reason: str, *, force: bool = False, **fields: Any
    ) -> JobRecord:
        """Move the job to ``state`` (``force``: write even when only the reason changes)."""
        if state == job.state and not fields and not force:
            return job
        with self._store.transaction() as session:
            version = self._transition(
                session,
                job,
                state,
                reason=reason,
                **fields,
            )
        return replace(job, state=state, version=version)

    def _submit_new_run(self, job: JobRecord, reason: str) -> None:
        cluster = self._job_cluster(job)
        checkpoint = storage.checkpoint_location(cluster, job, self._all_clusters())
        with self._store.transaction() as session:
            if job.state != JobState.QUEUED:
                version = self._transition(
                    session,
                    job,
                    JobState.QUEUED,
                    reason=reason,
                )
                job = replace(job, state=JobState.QUEUED, version=version)
            run = ledger.create_run(
                session,
                job,
                cluster=cluster.name,
                node_id=self._node_id,
                owner_epoch=self._fence.epoch,
                checkpoint_location=checkpoint,
                app_name_for=app_name_for,
            )
            version = self._transition(
                session,
                job,
                JobState.SUBMITTING,
                run_id=run.id,
                reason=f"submitting attempt {run.attempt} to cluster {cluster.name}",
                current_run_id=run.id,
                cluster_name=cluster.name,
                not_before=None,
            )
            if self._claim is not None and self._claim.degraded:
                journal.add_job_event(
                    session,
                    job,
                    cause=CAUSE,
                    node_id=self._node_id,
                    run_id=run.id,
                    message="DEGRADED MODE: started while ZooKeeper is unreachable, on the "
                    f"last known membership (epoch {self._fence.epoch})",
                )
        job = replace(
            job,
            state=JobState.SUBMITTING,
            version=version,
            current_run_id=run.id,
            current_run=run,
            cluster=cluster.name,
        )
        # the intent transaction above was the fenced proof: no second one before acting
        self._submit(job, run, cluster, proven=True)

    def _submit(
        self, job: JobRecord, run: RunRecord, cluster: ClusterRecord, *, proven: bool = False
    ) -> None:
        backend = self._backends.for_cluster(cluster)
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
        if not proven:
            with self._store.transaction() as session:  # the claim is current before acting
                ledger.check_owner(session, job, self._fence)
        self._check_lease()
        try:
            submission = backend.submit(request)
            faults.hit("after-submit")  # a crash here must never lead to a second application
        except SubmissionRejected as exc:
            now = self._clock()
            failures = self._failures(job, None, now)
            self._close_run(
                job,
                CloseRun(
                    run,
                    RunState.FAILED,
                    JobState.FAILED,
                    f"submission rejected: {exc}",
                    None,
                    counts_as_failure=True,
                ),
                failures,
                now,
            )
            return
        except ClusterUnreachable as exc:
            self._record_event(
                job,
                f"submission outcome unknown ({exc}); the application is looked up by name "
                "before any resubmission",
                run_id=run.id,
            )
            return
        with self._store.transaction() as session:
            run = ledger.update_run(
                session,
                run,
                submission_id=submission.submission_id,
                app_id=submission.app_id,
                submitted_at=self._clock(),
                state=RunState.STARTING,
            )
            self._transition(
                session,
                job,
                JobState.STARTING,
                run_id=run.id,
                reason=f"submitted as {submission.submission_id}",
            )

    def _record_observed(self, job: JobRecord, action: Observed, now: datetime) -> None:
        fields: dict[str, Any] = {"state": action.run_state}
        if action.status.app_id and action.status.app_id != action.run.app_id:
            fields["app_id"] = action.status.app_id
        if action.run_state == RunState.RUNNING and action.run.started_at is None:
            fields["started_at"] = now
        with self._store.transaction() as session:
            if job.state == action.job_state:  # otherwise the fenced transition is the proof
                ledger.check_owner(session, job, self._fence)
            ledger.update_run(session, action.run, **fields)
            if job.state != action.job_state:
                self._transition(
                    session,
                    job,
                    action.job_state,
                    reason=f"application {action.status.app_id or action.run.app_name} is "
                    f"{action.status.state}",
                )

    def _kill(self, job: JobRecord, action: Kill) -> None:
        run = action.run
        with self._store.transaction() as session:  # proves the claim before every kill
            if job.state == JobState.STOPPING:  # otherwise the fenced transition is the proof
                ledger.check_owner(session, job, self._fence)
            if run.state != RunState.STOPPING:
                run = ledger.update_run(session, run, state=RunState.STOPPING)
            if job.state != JobState.STOPPING:
                self._transition(
                    session,
                    job,
                    JobState.STOPPING,
                    reason=f"stopping: {action.reason}",
                )
        assert run.submission_id is not None, "a live application always has a submission id"
        self._check_lease()
        # Repeated on every tick until the cluster confirms the application is gone.
        self._backend(run.cluster).kill(run.submission_id)

    def _close_run(
        self, job: JobRecord, action: CloseRun, failures: Failures, now: datetime
    ) -> None:
        fields: dict[str, Any] = {}
        if action.counts_as_failure and job.desired_state == DesiredState.RUNNING:
            delay = self._policy.backoff(failures.count + 1)
            fields["not_before"] = now + timedelta(seconds=delay)
        with self._store.transaction() as session:
            ledger.update_run(
                session,
                action.run,
                state=action.run_state,
                reason=action.reason,
                exit_code=action.exit_code,
                ended_at=now,
                counts_as_failure=action.counts_as_failure,
            )
            self._transition(
                session,
                job,
                action.job_state,
                run_id=action.run.id,
                reason=action.reason,
                **fields,
            )
        self._poll_failures.pop(action.run.id, None)

    # -- helpers ------------------------------------------------------------------------------

    def _record_event(self, job: JobRecord, message: str, run_id: int | None = None) -> None:
        """An event that is not a state change, in a transaction of its own."""
        with self._store.transaction() as session:
            journal.add_job_event(
                session, job, cause=CAUSE, node_id=self._node_id, message=message, run_id=run_id
            )

    def _cluster(self, name: str) -> ClusterRecord:
        """The cluster's record, read once per tick (every live job of a tick needs it)."""
        cluster = self._clusters.get(name)
        if cluster is None:
            with self._store.session() as session:
                cluster = self._clusters[name] = catalog_store.get_cluster(session, name)
        return cluster

    def _all_clusters(self) -> list[ClusterRecord]:
        """Every cluster's record (for the storage-root rule), read once per tick."""
        if self._every_cluster is None:
            with self._store.session() as session:
                self._every_cluster = catalog_store.list_clusters(session)
        return self._every_cluster

    def _job_cluster(self, job: JobRecord) -> ClusterRecord:
        """The cluster of the job's live run, else the job's cluster, else its group's primary."""
        run = job.current_run
        if run is not None and not run.state.is_final:
            return self._cluster(run.cluster)
        return self._cluster(job.cluster or self._primary_cluster(job.group))

    def _primary_cluster(self, group: str) -> str:
        """The group's primary cluster, read once per tick (jobs without a cluster need it)."""
        primary = self._primaries.get(group)
        if primary is None:
            with self._store.session() as session:
                primary = self._primaries[group] = catalog_store.get_group(
                    session, group
                ).primary_cluster
        return primary

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
            self._record_event(job, f"reconcile error (retried every tick): {message}")
        except Exception:
            log.exception("cannot record the error of job %s", job.name)


def _entrypoint_path(entrypoint: str) -> str:
    parsed = urlparse(entrypoint)
    if parsed.scheme == "file":
        return parsed.path
    return entrypoint
