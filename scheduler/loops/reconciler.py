"""The reconcile loop's body: drive each job from its observed state toward its desired state.

One ``tick()`` reads the jobs that may need work and, for each, runs the phases

1. observe  — ask the job's cluster about the current run's application (or look it up by name
              when the run's submission was never recorded: adopt before resubmitting);
2. plan     — ``planning.plan`` (pure) picks one action; the decisions around an action's outcome
              (a rejected submission, backoff, UNKNOWN after unanswered polls) are pure too;
3. act      — through two narrow interfaces (``scheduler.core.ledger``): the *ledger* records the
              intent in one fenced transaction, and only then a *backend* submits or kills; the
              outcome is recorded in another.

Fencing (invariant 3): a tick starts from the node's current
:class:`~scheduler.core.ownership.Claim` on the group (its slot in the pool under a membership
epoch). No claim -- membership not confirmed, session suspended or lost, or this node not in the
pool -- means the tick does nothing at all. Otherwise the tick first claims the jobs of its slot (a
job claimed under a newer epoch is never taken back), then works only on jobs the ledger says it
owns, and every ledger write carries the claim's fence and the job's version as conditions: a node
with a stale view cannot act, and every submit and kill follows a fenced write.

Cost (what a steady tick reads): the jobs are kept between ticks. A tick reads in full after a
claim change, after jobs changed hands, and every ``full_read_every`` seconds (a safety net);
otherwise only the rows whose ``updated_at`` moved since the last read (minus ``change_margin``
seconds for clock skew between nodes and transactions still open at the last read). Failure
counts are read for all jobs of a tick in one query. The tick's other writes (observations,
kill intents, run closes, state moves) are recorded together, in transactions of up to
``WRITE_BATCH`` jobs. Submissions, and the kills whose intents were recorded, run in a bounded
pool of ``submit_workers`` threads (each with its own store session), so one slow request does
not hold the others back.

One job's error never stops the others, and nothing here raises out of ``tick()``. This class
does blocking I/O (store, cluster); the reconciler actor runs it off its event loop.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any, TypeVar, assert_never
from urllib.parse import urlparse

from scheduler.backends.changes import feed_of
from scheduler.core import faults
from scheduler.core.backend import AppState, AppStatus, ClusterBackend, SubmitRequest
from scheduler.core.clock import utcnow
from scheduler.core.combining import land_in_halves
from scheduler.core.errors import (
    ClusterUnreachable,
    LeaseExpired,
    NotOwner,
    StaleWrite,
    SubmissionRejected,
)
from scheduler.core.ledger import (
    Adopted,
    Backends,
    DrainRequest,
    FailureQuery,
    Intent,
    KillIntent,
    Ledger,
    LedgerView,
    Observation,
    Proof,
    Reissue,
    RevisionRestore,
    RunClose,
    RunFence,
    StateMove,
    Submitted,
    UpgradeEnd,
    Write,
)
from scheduler.core.logs import log_context
from scheduler.core.ownership import Claim, Fence
from scheduler.core.records import ClusterRecord, Failures, JobRecord
from scheduler.core.states import DesiredState, JobState, RunState, can_transition
from scheduler.decisions import catalog, planning, steering, storage
from scheduler.decisions.actions import (
    Action,
    CloseRun,
    Drain,
    FenceRun,
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
from scheduler.decisions.health import abnormal_job_reason
from scheduler.decisions.planning import RestartPolicy, plan, timed
from scheduler.loops.gate import SubmissionGate
from scheduler.loops.quiet import KeptJobs

log = logging.getLogger("drover.reconciler")

#: submissions one reconciler has in flight at once (each holds a store session and a request)
SUBMIT_WORKERS = 8
#: jobs per batch of submissions at most: their intents and their outcomes are recorded in one
#: transaction each (so a crash between submitted and recorded leaves at most this many runs per
#: worker to look up on the cluster before anything is submitted again)
SUBMIT_BATCH = 16
#: seconds a batch's proof of its claim (the intents' fenced write) may be old when a submission
#: of it is sent; an older one is renewed first (one statement for the rest of the batch)
PROOF_TTL = 0.1
#: a full read at least this often (seconds), whatever changed
FULL_READ_EVERY = 30.0
#: an incremental read goes back this far before the last read (seconds)
CHANGE_MARGIN = 5.0

#: a tick's writes (observations, kill intents, run closes, ...) recorded in one transaction at
#: most
WRITE_BATCH = 500
#: a batch of writes that did not land is split in halves down to this size, then written one
#: at a time
SPLIT_BELOW = 8
#: how many jobs the observation loop looks at between two checks of the lease
LEASE_CHECK_EVERY = 256

_T = TypeVar("_T")

_OPEN_RUN = frozenset(s for s in RunState if not s.is_final)
_AT_REST = frozenset({JobState.STOPPED, JobState.FINISHED, JobState.FAILED})


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
    #: jobs the tick looked at (the busy ones, and the quiet ones something moved for)
    looked_at: int = 0
    #: kept jobs whose last plan was Noop on a live run (after the tick's read)
    quiet: int = 0
    #: seconds the tick spent per phase: claim, read, observe, plan, act, record (metrics)
    phases: dict[str, float] = field(default_factory=dict)
    #: submissions the submission gate held back (the jobs stay QUEUED)
    gated: int = 0
    #: actions the tick took, by kind (the action's class name: Submit, Kill, ...)
    action_kinds: dict[str, int] = field(default_factory=dict)

    def timed(self, phase: str, since: float) -> float:
        """Add the time since ``since`` (perf_counter) to ``phase``; returns the time now."""
        now = time.perf_counter()
        self.phases[phase] = self.phases.get(phase, 0.0) + (now - since)
        return now

    def acted(self, action: Action) -> None:
        kind = type(action).__name__
        self.action_kinds[kind] = self.action_kinds.get(kind, 0) + 1


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
        gate: SubmissionGate | None = None,
    ) -> None:
        self._ledger = ledger
        #: the submission gate every planned Submit passes (None: no quotas, no caps)
        self._gate = gate
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
        #: the jobs that may need work, as last read or written; which of them are quiet (their
        #: last plan was Noop on a live run: looked at again only when something moved)
        self._jobs = KeptJobs()
        #: the claim last taken in full (then only new jobs are claimed, until the next full read)
        self._claimed: tuple[Fence, int, int] | None = None
        #: what the kept jobs were read under, and when (monotonic / ledger clock)
        self._read_fence: Fence | None = None
        self._full_read_at = -float("inf")
        self._read_mark: datetime | None = None
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
        with log_context(group=self._group):
            return self._tick()

    def _tick(self) -> TickStats:
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
            mark = stats.timed("claim", started)
            self._read(claim.fence, stats)
        except Exception:
            log.exception("cannot read the jobs to reconcile")
            self._read_fence = None  # read everything again next time
            self._claimed = None
            stats.errors += 1
            stats.seconds = time.perf_counter() - started
            return stats
        stats.jobs = len(self._jobs)
        try:
            jobs = self._due(stats)
            stats.timed("read", mark)
        except LeaseExpired:
            stats.paused = True
            stats.seconds = time.perf_counter() - started
            return stats
        stats.looked_at = len(jobs)
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
            self._jobs.replace_all(j for j in view.jobs if needs_work(j))
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
                    self._jobs.put(job)  # busy again if its row moved
                else:
                    self._jobs.drop(job.id)
            for job_id in self._reread - {j.id for j in view.jobs}:
                self._jobs.drop(job_id)  # gone, or no longer ours
        self._reread.clear()
        health = {c.name: c.health for c in view.clusters.values()}
        if health != {c.name: c.health for c in self._view.clusters.values()}:
            self._jobs.wake_all()  # a plan also depends on the health of the job's cluster
        self._tick_backends = {}
        self._view = view
        self._read_mark = mark
        stats.full_read = full
        stats.rows_read = len(view.jobs)

    def _due(self, stats: TickStats) -> list[JobRecord]:
        """The jobs to look at this tick, by id: the busy ones, and the quiet ones whose
        cluster's change feed names their submission (all of a cluster's quiet jobs when its
        backend has no feed, cannot tell, or cannot be asked); every job after a full read."""
        due = self._jobs.busy()
        # the busy jobs' clusters too: a job that turns quiet this tick needs a mark taken
        # before its status was asked, or the next tick cannot tell what changed since
        clusters = set(self._jobs.quiet_clusters())
        for job_id in due:
            run = job.current_run if (job := self._jobs.get(job_id)) is not None else None
            if run is not None and run.submission_id is not None and not run.state.is_final:
                clusters.add(run.cluster)
        for cluster_name in sorted(clusters):
            changes = None
            try:
                feed = feed_of(self._backend(cluster_name))
                if feed is not None:
                    changes = feed.changes(self._jobs.mark(cluster_name))
            except Exception as exc:  # the statuses tell (or the next tick does)
                log.debug("no change feed from cluster %s: %s", cluster_name, exc)
            due.update(self._jobs.changed(cluster_name, changes))
        stats.quiet = self._jobs.quiet_count()
        self._check_lease()
        if stats.full_read:  # the safety net: every job's application is asked about
            due = set(self._jobs)
        return [job for i in sorted(due) if (job := self._jobs.get(i)) is not None]

    def _reconcile_all(self, jobs: list[JobRecord], stats: TickStats) -> bool:
        """Observe every job, read the failure counts the plans need at once, plan and act.

        Returns whether every job was looked at. Raises LeaseExpired when the claim ran out.
        """
        observed: list[tuple[JobRecord, AppStatus | None]] = []
        kept = self._jobs
        mark = time.perf_counter()
        for i, job in enumerate(jobs):
            if i % LEASE_CHECK_EVERY == 0:  # and before every action
                self._check_lease()
            try:
                with log_context(job=job.name, run=job.current_run_id):
                    observation = self._observe(job)
            except Exception as exc:
                self._failed(job, exc, stats)
                continue
            if observation is None:  # the cluster could not be asked: never guess
                continue
            seen, status = observation
            if status is not None and kept.is_quiet(seen, status):
                continue  # neither the row nor the application changed: the plan is Noop again
            observed.append(observation)
        mark = stats.timed("observe", mark)
        now = self._clock()
        failures = self._failures(observed, now)
        mark = stats.timed("plan", mark)
        pending: list[tuple[JobRecord, Submit | Resubmit, Failures]] = []
        submissions: list[tuple[list[JobRecord], Future[list[tuple[JobRecord, Any]]]]] = []
        writes: list[Write] = []
        try:
            for job, status in observed:
                job_failures = failures.get(job.id, Failures())
                try:
                    with log_context(job=job.name, run=job.current_run_id):
                        action = self._plan(job, status, job_failures, now)
                        mark = stats.timed("plan", mark)
                        if isinstance(action, Noop):
                            self._done(job)
                            # a live run: nothing else moves the plan (but time, for some)
                            if status is not None and not timed(job):
                                kept.set_quiet(job, status)
                            continue
                        log.debug("job %s: %s", job.name, action)
                        self._check_lease()
                        stats.actions += 1
                        stats.acted(action)
                        if isinstance(action, Submit | Resubmit):
                            stats.submissions += 1
                            pending.append((job, action, job_failures))
                        else:  # recorded together below
                            write = self._write_of(job, action, job_failures, now)
                            if write is None:
                                self._done(job)
                            else:
                                writes.append(write)
                except LeaseExpired:
                    raise
                except Exception as exc:
                    self._failed(job, exc, stats)
                finally:
                    mark = stats.timed("act", mark)
            pending = self._gated(pending, now, stats)
            submissions = self._dispatch(pending, now)
            mark = stats.timed("act", mark)
            submissions += self._record(writes, stats)
            mark = stats.timed("record", mark)
        finally:
            lease_expired = self._collect(submissions, stats)
            stats.timed("act", mark)
        if lease_expired:
            raise LeaseExpired(self._group)
        return True

    def _gated(
        self,
        pending: list[tuple[JobRecord, Submit | Resubmit, Failures]],
        now: datetime,
        stats: TickStats,
    ) -> list[tuple[JobRecord, Submit | Resubmit, Failures]]:
        """The submissions the gate admits now (``scheduler.loops.gate``); the jobs it holds back
        stay QUEUED (are moved there) with their position and reason (the gate's rows and
        events).
        A Resubmit was admitted with its intent and passes. A gate that cannot decide (the
        store failing) admits nothing this tick."""
        gate = self._gate
        if gate is None:
            return pending
        starts = [
            (job, self._job_cluster(job).name) for job, a, _ in pending if isinstance(a, Submit)
        ]
        if not starts and not gate.waiting:
            return pending
        try:
            decided = gate.admit(starts, self._view.clusters, now)
        except Exception as exc:
            log.warning("the submission gate cannot decide (%s); nothing is submitted", exc)
            stats.errors += 1
            stats.submissions -= len(starts)
            return [p for p in pending if not isinstance(p[1], Submit)]
        go = {job.id for job in decided.admitted}
        stats.submissions -= len(starts) - len(go)
        stats.gated = len(decided.held)
        for held in decided.held:
            job, reason = held.job, held.waiting.reason
            try:
                self._check_lease()
                if job.state != JobState.QUEUED and can_transition(job.state, JobState.QUEUED):
                    self._done(self._apply(StateMove(job, (JobState.QUEUED,), reason)))
            except LeaseExpired:
                raise
            except Exception as exc:
                self._failed(job, exc, stats)
        return [p for p in pending if not isinstance(p[1], Submit) or p[0].id in go]

    def _dispatch(
        self, pending: list[tuple[JobRecord, Submit | Resubmit, Failures]], now: datetime
    ) -> list[tuple[list[JobRecord], Future[list[tuple[JobRecord, Any]]]]]:
        """Hand the tick's submissions to the pool in batches: as many batches as workers (one
        job each for a few jobs), at most ``SUBMIT_BATCH`` jobs each."""
        return self._spread(
            pending, partial(self._submit_batch, now=now), lambda p: p[0], SUBMIT_BATCH
        )

    def _spread(
        self,
        work: list[_T],
        do: Callable[[list[_T]], list[tuple[JobRecord, Any]]],
        job_of: Callable[[_T], JobRecord],
        most: int | None = None,
    ) -> list[tuple[list[JobRecord], Future[list[tuple[JobRecord, Any]]]]]:
        """``work`` handed to the submission pool in batches (``do`` each): as many batches as
        workers (one job each for a few jobs), at most ``most`` jobs each."""
        if not work:
            return []
        size = max(1, -(-len(work) // self._submit_workers))
        if most is not None:
            size = min(most, size)
        pool = self._submission_pool()
        futures = []
        for start in range(0, len(work), size):
            batch = work[start : start + size]
            # the batch's log records carry the tick's ids (its group)
            run = contextvars.copy_context().run
            futures.append(([job_of(w) for w in batch], pool.submit(run, do, batch)))
        return futures

    def _collect(
        self,
        submissions: list[tuple[list[JobRecord], Future[list[tuple[JobRecord, Any]]]]],
        stats: TickStats,
    ) -> bool:
        """Wait for the tick's submissions; returns whether one found the lease expired."""
        expired = False
        for jobs, future in submissions:
            try:
                results = future.result()
            except Exception as exc:  # the batch itself failed: every job of it did
                results = [(job, exc) for job in jobs]
            for job, result in results:
                if isinstance(result, LeaseExpired):
                    expired = True
                elif isinstance(result, Exception):
                    self._failed(job, result, stats)
                else:
                    self._done(result)
        return expired

    def _submission_pool(self) -> ThreadPoolExecutor:
        if self._submitter is None:
            self._submitter = ThreadPoolExecutor(
                self._submit_workers, thread_name_prefix=f"submit-{self._group}"
            )
        return self._submitter

    def _done(self, job: JobRecord) -> None:
        """``job`` as written: keep it (or drop it once at rest), forget its last error."""
        if needs_work(job):
            self._jobs.put(job)
        else:
            self._jobs.drop(job.id)
        if self._last_error:
            self._last_error.pop(job.id, None)

    def _failed(self, job: JobRecord, exc: Exception, stats: TickStats) -> None:
        self._jobs.wake(job.id)
        if isinstance(exc, NotOwner):
            log.info("job %s: %s; left to its owner", job.name, exc)
            self._jobs.drop(job.id)
            self._reread.add(job.id)
        elif isinstance(exc, StaleWrite):
            log.info(
                "job %s changed while reconciling (%s); it is re-read next tick", job.name, exc
            )
            self._jobs.drop(job.id)
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
            if not self._gated([(job, action, failures)], now, TickStats()):
                return False  # held back at the submission gate
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
                    job = self._apply(
                        Adopted(job, found.submission_id, found.app_id, self._clock())
                    )
                    self._jobs.put(job)
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
                job = self._act(job, unknown, Failures(), self._clock())
                self._done(job)
            if job.directive is not None:  # a failover drains the job: fence, or say why not
                self._steer_unreachable(job)
            return None
        self._poll_failures.pop(run.id, None)
        return job, status

    def _steer_unreachable(self, job: JobRecord) -> None:
        """The job's run's cluster did not answer while a directive drains the job: fence the run
        when the cluster is abnormal (``scheduler.decisions.steering.when_unreachable``)."""
        cluster = self._job_cluster(job)
        action = steering.when_unreachable(
            job,
            abnormal=catalog.is_abnormal(cluster.health),
            health=cluster.health,
            now=self._clock(),
        )
        if action is None:
            return
        self._check_lease()
        self._done(self._act(job, action, Failures(), self._clock()))

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
        write = self._write_of(job, action, failures, now)
        if write is None:
            return job
        written = self._apply(write)
        if isinstance(write, KillIntent):
            self._kill(written)
        self._after(write, job)
        return written

    def _kill(self, job: JobRecord) -> None:
        """Kill the application of ``job``'s current run, whose kill intent is recorded
        (repeated on every tick until the cluster confirms the kill)."""
        run = job.current_run
        assert run is not None and run.submission_id is not None, "a live app is submitted"
        self._check_lease()
        self._backend(run.cluster).kill(run.submission_id)

    def _after(self, write: Write, job: JobRecord) -> None:
        """What follows a write that landed (but the kill of a KillIntent)."""
        match write:
            case RunClose():
                self._polls_over(job)
            case RunFence():
                self._polls_over(job)
                log.warning("job %s: %s", job.name, write.reason)
            case DrainRequest():
                log.info("job %s: %s", job.name, write.reason)
            case RevisionRestore():
                log.warning("job %s: %s", job.name, write.reason)

    def _polls_over(self, job: JobRecord) -> None:
        """The job's run is closed: its count of unanswered polls is over."""
        if job.current_run_id is not None:
            self._poll_failures.pop(job.current_run_id, None)

    def _write_of(
        self, job: JobRecord, action: Action, failures: Failures, now: datetime
    ) -> Write | None:
        """The ledger write that records ``action`` (None: nothing to record)."""
        match action:
            case SetState(state=state, reason=reason):
                return None if state == job.state else StateMove(job, (state,), reason)
            case GiveUp(reason=reason, path=path):
                return StateMove(job, path, reason, clear_backoff=True)
            case Hold(reason=reason):
                return StateMove(job, (), reason)
            case Observed():
                return self._observation(job, action, now)
            case Kill(reason=reason):
                return KillIntent(job, reason)
            case CloseRun():
                return RunClose(
                    job,
                    action.run_state,
                    action.job_state,
                    action.reason,
                    action.exit_code,
                    action.counts_as_failure,
                    ended_at=now,
                    not_before=planning.retry_not_before(
                        job, action, failures, policy=self._policy, now=now
                    ),
                )
            case Drain(deadline=deadline, reason=reason):
                return DrainRequest(job, deadline, reason)
            case RollBack(revision=revision, reason=reason):
                return RevisionRestore(job, revision, reason)
            case UpgradeDone(reason=reason):
                return UpgradeEnd(job, reason)
            case FenceRun(reason=reason):
                return RunFence(job, reason, tuple(steering.fence_path(job)), now)
            case Noop() | Submit() | Resubmit():
                raise AssertionError(f"not an action to record here: {action!r}")
            case _:
                assert_never(action)

    def _apply(self, write: Write) -> JobRecord:
        """One write, in a transaction of its own: the job as written."""
        [written] = self._ledger.apply(self._fence, [write])
        return written

    def _apply_all(
        self, fence: Fence, writes: list[Write], what: str
    ) -> list[JobRecord | Exception]:
        """``writes`` in one transaction; when that does not land, in halves (a few at most:
        one at a time, each then getting its own NotOwner or StaleWrite): per write, its job as
        written or what stopped it. A job that moved meanwhile costs a few transactions more,
        not one per write of the batch."""

        def split(size: int, exc: Exception) -> None:
            if isinstance(exc, StaleWrite):
                log.info("a batch of %d %s did not land (%s); split", size, what, exc)
            else:
                log.warning("a batch of %d %s failed (%s); split", size, what, exc)

        return land_in_halves(
            writes,
            partial(self._ledger.apply, fence),
            splits=(Exception,),
            on_split=split,
            smallest=SPLIT_BELOW,
        )

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

    def _record(
        self, writes: list[Write], stats: TickStats
    ) -> list[tuple[list[JobRecord], Future[list[tuple[JobRecord, Any]]]]]:
        """The tick's writes (observations, kill intents, state moves, run closes, ...), in
        transactions of up to WRITE_BATCH jobs (split when a batch does not land: each job then
        gets its own NotOwner or StaleWrite); then the kills whose intents landed, sent from the
        submission pool (their futures, for ``_collect``)."""
        kills: list[JobRecord] = []
        for start in range(0, len(writes), WRITE_BATCH):
            batch = writes[start : start + WRITE_BATCH]
            self._check_lease()
            for write, result in zip(
                batch, self._apply_all(self._fence, batch, "writes"), strict=True
            ):
                if isinstance(result, Exception):
                    self._failed(write.job, result, stats)
                    continue
                self._done(result)
                if isinstance(write, KillIntent):
                    kills.append(result)
                else:
                    self._after(write, write.job)
        return self._spread(kills, self._kill_batch, lambda job: job)

    def _kill_batch(self, jobs: list[JobRecord]) -> list[tuple[JobRecord, Any]]:
        """Send the kills of ``jobs`` (runs in the submission pool): per job, the job, or the
        exception that stopped its kill (LeaseExpired for every kill after the lease ran out:
        their intents are recorded, the next tick under a claim sends them)."""
        results: list[tuple[JobRecord, Any]] = []
        expired: LeaseExpired | None = None
        for job in jobs:
            if expired is not None:
                results.append((job, expired))
                continue
            try:
                with log_context(job=job.name, run=job.current_run_id):
                    self._kill(job)
            except LeaseExpired as exc:
                expired = exc
                results.append((job, exc))
            except Exception as exc:
                results.append((job, exc))
            else:
                results.append((job, job))
        return results

    def _submit(
        self, job: JobRecord, action: Submit | Resubmit, failures: Failures, now: datetime
    ) -> JobRecord:
        """Record the intent (a new run, or a proof for a run to resubmit), then submit, then
        record the outcome (one job: ``reconcile``)."""
        [(_, result)] = self._submit_batch([(job, action, failures)], now)
        if isinstance(result, BaseException):
            raise result
        return result

    def _submit_batch(
        self, batch: list[tuple[JobRecord, Submit | Resubmit, Failures]], now: datetime
    ) -> list[tuple[JobRecord, JobRecord | BaseException]]:
        """Submit a batch of jobs (runs in the submission pool): record every intent (a new run,
        or the proof of a run to resubmit; in one transaction, else one by one), submit them one
        after the other, record the outcomes (in one transaction, else one by one). Returns
        each job as written, or the
        exception that stopped it (LeaseExpired for those not submitted once the lease ran out:
        their runs are looked up on the cluster before anything is submitted again)."""
        fence = self._fence
        try:
            self._check_lease()  # the batches of a tick wait their turn in the pool
        except LeaseExpired as exc:
            return [(job, exc) for job, _, _ in batch]
        results: dict[int, JobRecord | BaseException] = {}
        # the intents of new runs and the proofs of runs to resubmit, in one transaction
        writes: list[Write] = []
        targets: dict[int, tuple[ClusterRecord, Failures]] = {}
        for job, action, failures in batch:
            try:
                if isinstance(action, Submit):
                    intent = self._intent(job, action)
                    writes.append(intent)
                    targets[job.id] = (self._cluster(intent.cluster), failures)
                else:  # its first submission's token is not known here: a fresh one
                    writes.append(Reissue(job, at=now))
                    targets[job.id] = (self._cluster(action.run.cluster), failures)
            except Exception as exc:
                results[job.id] = exc
        ready: list[tuple[JobRecord, ClusterRecord, Failures]] = []
        for write, result in zip(writes, self._apply_all(fence, writes, "intents"), strict=True):
            if isinstance(result, Exception):
                results[write.job.id] = result
            else:
                ready.append((result, *targets[write.job.id]))
        outcomes: list[Submitted] = []
        expired: LeaseExpired | None = None
        proved_at = self._monotonic()
        for n, (job, cluster, failures) in enumerate(ready):
            if expired is not None:
                results[job.id] = expired
                continue
            if job.id in results:  # its proof did not hold
                continue
            if self._monotonic() - proved_at > PROOF_TTL:
                # a takeover looks a run without a submission id up on the cluster and, finding
                # none, submits it: the intent must have been proven a moment ago, as for a
                # single submission (one statement for the rest of the batch)
                rest: list[Write] = [Proof(j) for j, _, _ in ready[n:] if j.id not in results]
                for proof, result in zip(rest, self._apply_all(fence, rest, "proofs"), strict=True):
                    if isinstance(result, Exception):
                        results[proof.job.id] = result
                proved_at = self._monotonic()
                if job.id in results:
                    continue
            try:
                self._check_lease()
                with log_context(job=job.name, run=job.current_run_id):
                    outcome = self._send(job, cluster, failures, now)
            except LeaseExpired as exc:
                expired = results[job.id] = exc
                continue
            except Exception as exc:
                results[job.id] = exc
                continue
            if isinstance(outcome, Submitted):
                outcomes.append(outcome)
            else:
                results[job.id] = outcome
        recorded: list[Write] = [*outcomes]
        for write, result in zip(
            recorded, self._apply_all(fence, recorded, "outcomes"), strict=True
        ):
            results[write.job.id] = result
        return [(job, results[job.id]) for job, _, _ in batch]

    def _intent(self, job: JobRecord, action: Submit) -> Intent:
        cluster = self._job_cluster(job)
        claim = self._claim
        note = (
            "DEGRADED MODE: started while ZooKeeper is unreachable, on the last known "
            f"membership (epoch {claim.fence.epoch})"
            if claim is not None and claim.degraded
            else None
        )
        checkpoint = storage.checkpoint_location(cluster, job, list(self._view.clusters.values()))
        return Intent(job, cluster.name, checkpoint, action.reason, note)

    def _send(
        self, job: JobRecord, cluster: ClusterRecord, failures: Failures, now: datetime
    ) -> Submitted | JobRecord:
        """Submit the job's current run: what to record, or the job as written after a refusal
        (the run closed) or an unknown outcome (an event; the run is looked up next tick)."""
        run = job.current_run
        assert run is not None
        if run.fencing_secret is None:  # only an intent or a reissue just written carries it
            raise StaleWrite(f"run {run.id} of job {job.name!r} has no fencing token to submit")
        request = SubmitRequest(
            job_name=job.name,
            run_id=run.id,
            fencing_token=run.fencing_secret,
            entrypoint=_entrypoint_path(job.entrypoint),
            args=job.args,
            conf=job.conf,
            checkpoint_location=run.checkpoint_location,
            py_files=self.py_files,
            fence_urls=self.fence_urls,
            team=job.team,
            business=job.business,
        )
        try:
            submission = self._backends.for_cluster(cluster).submit(request)
            faults.hit("after-submit")  # a crash here must never lead to a second application
        except SubmissionRejected as exc:
            return self._act(job, planning.on_rejected(job, run, str(exc)), failures, now)
        except ClusterUnreachable as exc:
            self._ledger.add_event(
                job,
                f"submission outcome unknown ({exc}); the application is looked up by name "
                "before any resubmission",
                run_id=run.id,
            )
            return job
        return Submitted(job, submission.submission_id, submission.app_id, self._clock())

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
