"""In-memory stand-ins for the reconciler's two interfaces: a ledger and cluster backends.

:class:`FakeLedger` honours the ledger's rules (``scheduler.core.ledger``): every write is
conditional on the job's version and on the claim's fence (NotOwner / StaleWrite otherwise, nothing
changed), bumps the version and ``updated_at``, and records one event per state passed through. It
also plays the other writers (an operator through the API, another node's claim) and can crash right
before or after a method (``crash``), to test what a restarted reconciler does.

:class:`FakeBackend` is one cluster: applications by submission id, looked up by name, killed
(confirmed at once or only when told), rejected or unreachable on demand. Both are thread-safe
(the reconciler submits from a pool of threads) and log every call in one shared ``calls`` list,
so a test can check the order of "recorded" and "acted".
"""

from __future__ import annotations

import itertools
import secrets
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from scheduler.backends.changes import ChangeLog, Changes, Mark
from scheduler.core.backend import (
    AppInfo,
    AppState,
    AppStatus,
    ClusterBackend,
    ProbeResult,
    Submission,
    SubmitRequest,
    app_name_for,
)
from scheduler.core.errors import ClusterUnreachable, NotOwner, StaleWrite, SubmissionRejected
from scheduler.core.ledger import FailureQuery, Intent, LedgerView, Observation, Submitted
from scheduler.core.ownership import Claim, Fence, owner_index
from scheduler.core.records import ClusterRecord, Failures, JobRecord, RunRecord
from scheduler.core.states import DesiredState, JobState, Priority, RunState, transition

START = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)


class Crash(BaseException):  # noqa: N818 - a simulated process death, not an error
    """A simulated crash: not an Exception, so nothing in the reconciler catches it."""


class Clock:
    """A manual UTC clock (``now()``) and monotonic clock (``monotonic()``)."""

    def __init__(self, start: datetime = START) -> None:
        self.at = start
        self.mono = 1000.0
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            self.at += timedelta(microseconds=1)  # every write gets its own instant
            return self.at

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.at += timedelta(seconds=seconds)
            self.mono += seconds


@dataclass
class Event:
    job_id: int
    run_id: int | None
    from_state: str | None
    to_state: str | None
    message: str
    node_id: str


def cluster(name: str = "c1", health: str = "NORMAL") -> ClusterRecord:
    return ClusterRecord(
        name=name,
        kind="standalone",
        master_url=f"spark://{name}:7077",
        rest_url=f"http://{name}:6066",
        ui_url=f"http://{name}:8080",
        az="az-1",
        cloud="local",
        storage_root=f"file:///ck/{name}",
        health=health,
        max_concurrent_submissions=0,
    )


class FakeLedger:
    """The ledger in memory (see the module docstring). ``node_id``: who writes runs/events."""

    def __init__(self, clock: Clock, *, node_id: str = "node-a") -> None:
        self.clock = clock
        self.node_id = node_id
        self.jobs: dict[int, JobRecord] = {}
        self.runs: dict[int, RunRecord] = {}
        self.events: list[Event] = []
        self.clusters: dict[str, ClusterRecord] = {"c1": cluster("c1")}
        self.primary = "c1"
        self.calls: list[str] = []
        #: method name -> ("before" | "after", how many more times)
        self._crashes: dict[str, tuple[str, int]] = {}
        #: method name -> a function run (once) right before the method
        self._before: dict[str, Callable[[], object]] = {}
        self.writes = 0
        #: closed runs that counted as failures
        self._failed_runs: set[int] = set()
        #: (job id, revision) -> spec (scheduler.decisions.revisions), for roll_back
        self.revisions: dict[tuple[int, int], dict[str, Any]] = {}
        self._ids = itertools.count(1)
        self._run_ids = itertools.count(100)
        self._lock = threading.RLock()

    # -- test controls ------------------------------------------------------------------------

    def crash(self, method: str, when: str = "after", times: int = 1) -> None:
        """Raise :class:`Crash` right ``before`` or ``after`` (committed) the next call(s)."""
        self._crashes[method] = (when, times)

    def before(self, method: str, action: Callable[[], object]) -> None:
        """Run ``action`` once, right before the next call of ``method`` (a concurrent writer)."""
        self._before[method] = action

    def add_job(
        self,
        name: str,
        *,
        desired: DesiredState = DesiredState.RUNNING,
        state: JobState = JobState.QUEUED,
        group: str = "default",
        owner: Fence | None = None,
    ) -> JobRecord:
        with self._lock:
            now = self.clock.now()
            job = JobRecord(
                id=next(self._ids),
                name=name,
                group=group,
                team="t",
                business="b",
                priority=Priority.NORMAL,
                entrypoint=f"file:///pipelines/{name}.py",
                args=(),
                conf={},
                checkpoint_location="",
                desired_state=desired,
                state=state,
                state_reason="created",
                cluster=None,
                current_run_id=None,
                generation=0,
                attempts_reset_at=now - timedelta(hours=1),
                not_before=None,
                owner=owner.node_id if owner else None,
                owner_epoch=owner.epoch if owner else 0,
                version=1,
                spec_version=1,
                created_at=now,
                updated_at=now,
            )
            self.jobs[job.id] = job
            return job

    def job(self, job_id: int) -> JobRecord:
        """The job as stored, with its current run."""
        with self._lock:
            return self._with_run(self.jobs[job_id])

    def runs_of(self, job_id: int) -> list[RunRecord]:
        with self._lock:
            mine = [r for r in self.runs.values() if self._job_of_run(r) == job_id]
            return sorted(mine, key=lambda r: r.id)

    def api_write(self, job_id: int, **changes: Any) -> JobRecord:
        """An operator's write through the API (not fenced; bumps version and updated_at)."""
        with self._lock:
            job = self.jobs[job_id]
            self.jobs[job_id] = replace(
                job, version=job.version + 1, updated_at=self.clock.now(), **changes
            )
            return self.jobs[job_id]

    def other_claims(self, job_id: int, fence: Fence) -> None:
        """Another node takes the job under ``fence`` (its newer epoch)."""
        with self._lock:
            self.jobs[job_id] = replace(
                self.jobs[job_id], owner=fence.node_id, owner_epoch=fence.epoch
            )

    def add_failure(self, job_id: int, ended_ago: float = 1.0) -> None:
        """A closed run of ``job_id`` that counted as a failure, ``ended_ago`` seconds ago."""
        with self._lock:
            job = self.jobs[job_id]
            run_id = next(self._run_ids)
            ended = self.clock.at - timedelta(seconds=ended_ago)
            self.runs[run_id] = self._new_run(job, run_id, "c1", Fence(self.node_id, 0), "")
            self.runs[run_id] = replace(self.runs[run_id], state=RunState.FAILED, ended_at=ended)
            self._failed_runs.add(run_id)

    # -- the ledger ---------------------------------------------------------------------------

    def claim(self, claim: Claim, *, only_unowned: bool = False) -> int:
        with self._call("claim"):
            fence = claim.fence
            taken = 0
            for job in list(self.jobs.values()):
                if job.group != claim.group:
                    continue
                if owner_index(job.name, claim.size) != claim.index:
                    continue
                if job.owner_epoch > fence.epoch:
                    continue
                if job.owner == fence.node_id and job.owner_epoch == fence.epoch:
                    continue
                if only_unowned and job.owner is not None:
                    continue
                self.jobs[job.id] = replace(job, owner=fence.node_id, owner_epoch=fence.epoch)
                taken += 1
            return taken

    def read(
        self,
        fence: Fence,
        group: str,
        *,
        changed_since: datetime | None = None,
        ids: Iterable[int] = (),
    ) -> LedgerView:
        wanted = set(ids)
        with self._call("read"):
            jobs = []
            for job in sorted(self.jobs.values(), key=lambda j: j.id):
                if job.group != group or (job.owner, job.owner_epoch) != (
                    fence.node_id,
                    fence.epoch,
                ):
                    continue
                if changed_since is None:
                    at_rest = job.state in (JobState.STOPPED, JobState.FINISHED, JobState.FAILED)
                    if job.desired_state != DesiredState.RUNNING and at_rest:
                        continue
                elif job.updated_at < changed_since and job.id not in wanted:
                    continue
                jobs.append(self._with_run(job))
            return LedgerView(jobs, dict(self.clusters), self.primary)

    def failures(self, queries: Sequence[FailureQuery]) -> dict[int, Failures]:
        with self._call("failures"):
            answer: dict[int, Failures] = {}
            for query in queries:
                ended = [
                    r.ended_at
                    for r in self.runs.values()
                    if r.id in self._failed_runs
                    and self._job_of_run(r) == query.job_id
                    and r.ended_at is not None
                    and r.ended_at >= query.since
                ]
                if ended:
                    answer[query.job_id] = Failures(len(ended), max(ended))
            return answer

    def record_state(
        self,
        job: JobRecord,
        fence: Fence,
        path: Sequence[JobState],
        reason: str,
        *,
        not_before: Any = "unset",
    ) -> JobRecord:
        with self._call("record_state"):
            self._check(job, fence)
            fields = {} if not_before == "unset" else {"not_before": not_before}
            return self._with_run(self._write(job, path, reason, job.current_run_id, **fields))

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
        with self._call("record_intent"):
            self._check(job, fence)
            run_id = next(self._run_ids)
            run = self._new_run(job, run_id, cluster, fence, checkpoint_location)
            path = [JobState.SUBMITTING]
            if job.state != JobState.QUEUED:
                path.insert(0, JobState.QUEUED)
            self._validate(job.state, path)
            self.runs[run_id] = run
            written = self._write(
                job,
                path,
                f"submitting attempt {run.attempt} to cluster {cluster}",
                run_id,
                current_run_id=run_id,
                cluster=cluster,
                not_before=None,
            )
            if note:
                self._event(job.id, run_id, None, None, note)
            return self._with_run(written)

    def record_intents(self, fence: Fence, intents: Sequence[Intent]) -> list[JobRecord]:
        with self._call("record_intents"):
            for i in intents:  # all or nothing
                try:
                    self._check(i.job, fence)
                except NotOwner as exc:
                    raise StaleWrite(str(exc)) from exc
                path = [JobState.SUBMITTING]
                if i.job.state != JobState.QUEUED:
                    path.insert(0, JobState.QUEUED)
                self._validate(i.job.state, path)
            if len({i.job.id for i in intents}) != len(intents):
                raise StaleWrite("a job appears twice in a batch")
            written = []
            for i in intents:
                run_id = next(self._run_ids)
                run = self._new_run(i.job, run_id, i.cluster, fence, i.checkpoint_location)
                path = [JobState.SUBMITTING]
                if i.job.state != JobState.QUEUED:
                    path.insert(0, JobState.QUEUED)
                self.runs[run_id] = run
                job = self._write(
                    i.job,
                    path,
                    f"submitting attempt {run.attempt} to cluster {i.cluster}",
                    run_id,
                    current_run_id=run_id,
                    cluster=i.cluster,
                    not_before=None,
                )
                if i.note:
                    self._event(i.job.id, run_id, None, None, i.note)
                written.append(self._with_run(job))
            return written

    def prove(self, job: JobRecord, fence: Fence) -> None:
        with self._call("prove"):
            self._check(job, fence)

    def prove_all(self, fence: Fence, jobs: Sequence[JobRecord]) -> None:
        with self._call("prove_all"):
            for job in jobs:
                try:
                    self._check(job, fence)
                except NotOwner as exc:
                    raise StaleWrite(str(exc)) from exc

    def record_submitted(
        self, job: JobRecord, fence: Fence, *, submission_id: str, app_id: str | None, at: datetime
    ) -> JobRecord:
        with self._call("record_submitted"):
            self._check(job, fence)
            run = self._open_run(job)
            self._validate(job.state, [JobState.STARTING])
            self.runs[run.id] = replace(
                run,
                submission_id=submission_id,
                app_id=app_id,
                submitted_at=at,
                state=RunState.STARTING,
            )
            return self._with_run(
                self._write(job, [JobState.STARTING], f"submitted as {submission_id}", run.id)
            )

    def record_submitted_all(self, fence: Fence, outcomes: Sequence[Submitted]) -> list[JobRecord]:
        with self._call("record_submitted_all"):
            for o in outcomes:  # all or nothing
                try:
                    self._check(o.job, fence)
                except NotOwner as exc:
                    raise StaleWrite(str(exc)) from exc
                self._open_run(o.job)
                self._validate(o.job.state, [JobState.STARTING])
            if len({o.job.id for o in outcomes}) != len(outcomes):
                raise StaleWrite("a job appears twice in a batch")
            written = []
            for o in outcomes:
                run = self._open_run(o.job)
                self.runs[run.id] = replace(
                    run,
                    submission_id=o.submission_id,
                    app_id=o.app_id,
                    submitted_at=o.at,
                    state=RunState.STARTING,
                )
                job = self._write(
                    o.job, [JobState.STARTING], f"submitted as {o.submission_id}", run.id
                )
                written.append(self._with_run(job))
            return written

    def record_adopted(
        self, job: JobRecord, fence: Fence, *, submission_id: str, app_id: str | None, at: datetime
    ) -> JobRecord:
        with self._call("record_adopted"):
            self._check(job, fence)
            run = self._open_run(job)
            self.runs[run.id] = replace(
                run,
                submission_id=submission_id,
                app_id=app_id,
                submitted_at=run.submitted_at or at,
            )
            written = self._write(job, [], job.state_reason, run.id)
            self._event(job.id, run.id, None, None, f"adopted application {run.app_name}")
            return self._with_run(written)

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
        with self._call("record_observed"):
            self._check(job, fence)
            run = self._open_run(job)
            path = [job_state] if job_state != job.state else []
            self._validate(job.state, path)
            self.runs[run.id] = replace(
                run,
                state=run_state,
                app_id=app_id or run.app_id,
                started_at=started_at or run.started_at,
            )
            return self._with_run(
                self._write(job, path, reason if path else job.state_reason, run.id)
            )

    def record_observed_all(
        self, fence: Fence, observations: Sequence[Observation]
    ) -> list[JobRecord]:
        with self._call("record_observed_all"):
            for o in observations:  # all or nothing
                try:
                    self._check(o.job, fence)
                except NotOwner as exc:
                    raise StaleWrite(str(exc)) from exc
                self._open_run(o.job)
                self._validate(o.job.state, [o.job_state])
            written = []
            for o in observations:
                run = self._open_run(o.job)
                path = [o.job_state] if o.job_state != o.job.state else []
                self.runs[run.id] = replace(
                    run,
                    state=o.run_state,
                    app_id=o.app_id or run.app_id,
                    started_at=o.started_at or run.started_at,
                )
                reason = o.reason if path else o.job.state_reason
                written.append(self._with_run(self._write(o.job, path, reason, run.id)))
            return written

    def record_kill_intent(self, job: JobRecord, fence: Fence, *, reason: str) -> JobRecord:
        with self._call("record_kill_intent"):
            self._check(job, fence)
            run = self._open_run(job)
            if job.state == JobState.STOPPING and run.state == RunState.STOPPING:
                return job  # the proof
            path = [JobState.STOPPING] if job.state != JobState.STOPPING else []
            self._validate(job.state, path)
            self.runs[run.id] = replace(run, state=RunState.STOPPING)
            return self._with_run(self._write(job, path, f"stopping: {reason}", run.id))

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
        with self._call("close_run"):
            self._check(job, fence)
            run = self._open_run(job)
            self._validate(job.state, [job_state])
            self.runs[run.id] = replace(
                run, state=run_state, reason=reason, exit_code=exit_code, ended_at=ended_at
            )
            if counts_as_failure:
                self._failed_runs.add(run.id)
            fields = {} if not_before is None else {"not_before": not_before}
            return self._with_run(self._write(job, [job_state], reason, run.id, **fields))

    def fence_run(
        self, job: JobRecord, fence: Fence, *, reason: str, path: Sequence[JobState], at: datetime
    ) -> JobRecord:
        with self._call("fence_run"):
            self._check(job, fence)
            run = self._open_run(job)
            self._validate(job.state, path)
            self.runs[run.id] = replace(
                run, state=RunState.LOST, reason=reason, ended_at=at, fenced_at=at
            )
            return self._with_run(self._write(job, path, reason, run.id))

    def record_drain(
        self, job: JobRecord, fence: Fence, *, deadline: datetime, reason: str
    ) -> JobRecord:
        with self._call("record_drain"):
            self._check(job, fence)
            run = self._open_run(job)
            path = [JobState.STOPPING] if job.state != JobState.STOPPING else []
            self._validate(job.state, path)
            self.runs[run.id] = replace(run, drain_deadline=deadline)
            return self._with_run(self._write(job, path, f"stopping gracefully: {reason}", run.id))

    def roll_back(self, job: JobRecord, fence: Fence, *, revision: int, reason: str) -> JobRecord:
        from scheduler.decisions import revisions as rev

        with self._call("roll_back"):
            self._check(job, fence)
            spec = self.revisions[(job.id, revision)]
            stored = self.jobs[job.id]
            changes = rev.rollback_changes(rev.spec_of(stored), spec)
            fields: dict[str, Any] = {
                k: tuple(v) if k == "args" else v
                for k, v in changes.items()
                if k in ("entrypoint", "args", "conf", "checkpoint_location")
            }
            path = [JobState.QUEUED] if stored.state.is_at_rest else []
            self._event(job.id, job.current_run_id, None, None, reason)
            written = self._write(
                job,
                path,
                stored.state_reason if not path else reason,
                job.current_run_id,
                generation=stored.generation + 1,
                spec_version=stored.spec_version + 1,
                upgrade_deadline=None,
                upgrade_from=None,
                attempts_reset_at=self.clock.now(),
                not_before=None,
                **fields,
            )
            self.revisions[(job.id, written.spec_version)] = rev.spec_of(written)
            return self._with_run(written)

    def finish_upgrade(self, job: JobRecord, fence: Fence, *, reason: str) -> JobRecord:
        with self._call("finish_upgrade"):
            self._check(job, fence)
            self._event(job.id, job.current_run_id, None, None, reason)
            return self._with_run(
                self._write(
                    job,
                    [],
                    job.state_reason,
                    job.current_run_id,
                    upgrade_deadline=None,
                    upgrade_from=None,
                )
            )

    def add_event(self, job: JobRecord, message: str, *, run_id: int | None = None) -> None:
        with self._call("add_event"):
            self._event(job.id, run_id, None, None, message)

    # -- inside -------------------------------------------------------------------------------

    def _call(self, method: str) -> _Call:
        return _Call(self, method)

    def _check(self, job: JobRecord, fence: Fence) -> None:
        stored = self.jobs.get(job.id)
        if stored is None or (stored.owner, stored.owner_epoch) != (fence.node_id, fence.epoch):
            raise NotOwner(f"job {job.name!r} is not owned by {fence}")
        if stored.version != job.version:
            raise StaleWrite(f"job {job.name!r} changed since version {job.version}")

    @staticmethod
    def _validate(state: JobState, path: Sequence[JobState]) -> None:
        for step in path:
            if step != state:
                transition(state, step)
                state = step

    def _open_run(self, job: JobRecord) -> RunRecord:
        run = self.runs.get(job.current_run_id) if job.current_run_id is not None else None
        if run is None or run.state.is_final:
            raise StaleWrite(f"job {job.name!r} has no open run")
        return run

    def _write(
        self,
        job: JobRecord,
        path: Sequence[JobState],
        reason: str,
        run_id: int | None,
        **fields: Any,
    ) -> JobRecord:
        self._validate(job.state, path)
        state = job.state
        for step in path:
            if step != state:
                self._event(job.id, run_id, state.value, step.value, reason)
                state = step
        stored = self.jobs[job.id]
        written = replace(
            stored,
            state=state,
            state_reason=reason,
            version=stored.version + 1,
            updated_at=self.clock.now(),
            **fields,
        )
        self.jobs[job.id] = written
        self.writes += 1
        return written

    def _event(
        self,
        job_id: int,
        run_id: int | None,
        from_state: str | None,
        to_state: str | None,
        message: str,
    ) -> None:
        self.events.append(Event(job_id, run_id, from_state, to_state, message, self.node_id))

    def _new_run(
        self, job: JobRecord, run_id: int, cluster: str, fence: Fence, checkpoint: str
    ) -> RunRecord:
        attempts = [r.attempt for r in self.runs.values() if r.job_name == job.name]
        return RunRecord(
            id=run_id,
            job_name=job.name,
            attempt=max(attempts, default=0) + 1,
            generation=job.generation,
            cluster=cluster,
            node_id=fence.node_id,
            owner_epoch=fence.epoch,
            fencing_token=secrets.token_hex(8),
            app_name=app_name_for(job.name, run_id),
            checkpoint_location=checkpoint,
            submission_id=None,
            app_id=None,
            state=RunState.SUBMITTING,
            reason="",
            exit_code=None,
            created_at=self.clock.at,
            submitted_at=None,
            started_at=None,
            ended_at=None,
        )

    def _job_of_run(self, run: RunRecord) -> int | None:
        for job in self.jobs.values():
            if job.name == run.job_name:
                return job.id
        return None

    def _with_run(self, job: JobRecord) -> JobRecord:
        run = self.runs.get(job.current_run_id) if job.current_run_id is not None else None
        return replace(self.jobs.get(job.id, job), current_run=run)


class _Call:
    """One ledger call: serialised, logged, with the crash points and concurrent writers."""

    def __init__(self, ledger: FakeLedger, method: str) -> None:
        self._ledger = ledger
        self._method = method

    def __enter__(self) -> None:
        ledger = self._ledger
        action = ledger._before.pop(self._method, None)
        if action is not None:
            action()
        ledger._lock.acquire()
        ledger.calls.append(f"ledger.{self._method}")
        crash = ledger._crashes.get(self._method)
        if crash is not None and crash[0] == "before":
            self._spend(crash)
            ledger._lock.release()
            raise Crash(f"before {self._method}")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        ledger = self._ledger
        ledger._lock.release()
        crash = ledger._crashes.get(self._method)
        if exc_type is None and crash is not None and crash[0] == "after":
            self._spend(crash)
            raise Crash(f"after {self._method}")

    def _spend(self, crash: tuple[str, int]) -> None:
        when, times = crash
        if times <= 1:
            del self._ledger._crashes[self._method]
        else:
            self._ledger._crashes[self._method] = (when, times - 1)


@dataclass
class FakeApp:
    submission_id: str
    app_name: str
    state: AppState
    app_id: str


@dataclass
class FakeBackend:
    """One cluster's applications (see the module docstring)."""

    calls: list[str] = field(default_factory=list)
    apps: dict[str, FakeApp] = field(default_factory=dict)
    #: kills take effect at once (else only via ``confirm_kills``)
    kills_confirm: bool = True
    #: submissions start RUNNING at once (else STARTING until ``start_all``)
    start_running: bool = False
    unreachable: bool = False
    reject_next: int = 0
    #: raise Crash right after the next submission was accepted (before it is returned)
    crash_after_submit: bool = False
    #: called at the start of every submit (e.g. to hold it until a test lets it go)
    on_submit: Callable[[SubmitRequest], None] | None = None
    in_flight: int = 0
    max_in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    #: the change feed (scheduler/backends/changes.py): a "listing" of every app per call
    _changes: ChangeLog = field(default_factory=ChangeLog)

    def submit(self, request: SubmitRequest) -> Submission:
        with self._lock:
            self.calls.append(f"backend.submit {request.app_name}")
            if self.unreachable:
                raise ClusterUnreachable("the cluster does not answer")
            if self.reject_next:
                self.reject_next -= 1
                raise SubmissionRejected("bad request")
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.on_submit is not None:
                self.on_submit(request)
            with self._lock:
                n = next(self._ids)
                app = FakeApp(
                    f"driver-{n}",
                    request.app_name,
                    AppState.RUNNING if self.start_running else AppState.STARTING,
                    f"app-{n}",
                )
                self.apps[app.submission_id] = app
                if self.crash_after_submit:
                    self.crash_after_submit = False
                    raise Crash("after submit")
            return Submission(app.submission_id, app.app_id)
        finally:
            with self._lock:
                self.in_flight -= 1

    def status(
        self, submission_id: str, app_name: str | None = None, app_id: str | None = None
    ) -> AppStatus:
        with self._lock:
            self.calls.append(f"backend.status {submission_id}")
            if self.unreachable:
                raise ClusterUnreachable("the cluster does not answer")
            app = self.apps.get(submission_id)
            if app is None:
                return AppStatus(AppState.NOT_FOUND)
            return AppStatus(
                app.state, app.app_id, exit_code=1 if app.state == AppState.FAILED else None
            )

    def changes(self, since: Mark | None) -> Changes:
        """What changed since ``since``: every app whose state or app id differs (however it
        was changed: a test may set a state directly)."""
        with self._lock:
            if self.unreachable:
                raise ClusterUnreachable("the cluster does not answer")
            prints = {a.submission_id: (a.state, a.app_id) for a in self.apps.values()}
        self._changes.advance(prints)
        return self._changes.changes(since)

    def kill(self, submission_id: str) -> None:
        with self._lock:
            self.calls.append(f"backend.kill {submission_id}")
            if self.unreachable:
                raise ClusterUnreachable("the cluster does not answer")
            app = self.apps.get(submission_id)
            if app is not None and self.kills_confirm:
                app.state = AppState.KILLED

    def list_applications(self) -> list[AppInfo]:
        with self._lock:
            if self.unreachable:
                raise ClusterUnreachable("the cluster does not answer")
            return [
                AppInfo(a.submission_id, a.app_name, a.state, a.app_id) for a in self.apps.values()
            ]

    def find(self, app_name: str) -> Submission | None:
        with self._lock:
            self.calls.append(f"backend.find {app_name}")
            if self.unreachable:
                raise ClusterUnreachable("the cluster does not answer")
            for app in self.apps.values():
                if app.app_name == app_name and app.state.is_alive:
                    return Submission(app.submission_id, app.app_id)
            return None

    def probe(self) -> ProbeResult:
        return ProbeResult(not self.unreachable, "fake", 0.0)

    # -- test controls ------------------------------------------------------------------------

    def live(self, job_name: str | None = None) -> list[FakeApp]:
        with self._lock:
            return [
                a
                for a in self.apps.values()
                if a.state.is_alive and (job_name is None or a.app_name.split(":")[1] == job_name)
            ]

    def start_all(self) -> None:
        with self._lock:
            for app in self.apps.values():
                if app.state == AppState.STARTING:
                    app.state = AppState.RUNNING

    def set_state(self, submission_id: str, state: AppState) -> None:
        with self._lock:
            self.apps[submission_id].state = state

    def confirm_kills(self) -> None:
        with self._lock:
            for app in self.apps.values():
                if app.state.is_alive and f"backend.kill {app.submission_id}" in self.calls:
                    app.state = AppState.KILLED


class FakeBackends:
    """``scheduler.core.ledger.Backends`` over one fake backend per cluster name."""

    def __init__(self, **backends: FakeBackend) -> None:
        self.backends = backends

    def for_cluster(self, cluster: ClusterRecord) -> ClusterBackend:
        return self.backends[cluster.name]
