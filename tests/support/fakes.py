"""In-memory stand-ins for the reconciler's two interfaces: a ledger and cluster backends.

:class:`FakeLedger` honours the ledger's rules (``scheduler.core.ledger``): an ``apply`` lands
every write's effect (``effect_of``, the same for every ledger) or none, each conditional on the
job's version and on the claim's fence (NotOwner / StaleWrite otherwise, nothing changed). It also
plays the other writers (an operator through the API, another node's claim) and can crash right
before or after a call (``crash``), to test what a restarted reconciler does.

:class:`FakeBackend` is one cluster: applications by submission id, looked up by name, killed
(confirmed at once or only when told), rejected or unreachable on demand. Both are thread-safe
(the reconciler submits from a pool of threads) and log every call in one shared ``calls`` list,
so a test can check the order of "recorded" and "acted".
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from scheduler.backends.changes import ChangeLog, Changes, Mark
from scheduler.core.backend import (
    AppInfo,
    AppState,
    AppStatus,
    ClusterBackend,
    LogChunk,
    ProbeResult,
    Submission,
    SubmitRequest,
    app_name_for,
    log_window,
)
from scheduler.core.errors import (
    ClusterUnreachable,
    InvalidInput,
    NotFound,
    NotOwner,
    StaleWrite,
    SubmissionRejected,
)
from scheduler.core.ledger import (
    Effect,
    FailureQuery,
    Intent,
    LedgerView,
    Write,
    effect_of,
    fencing_digest,
    new_fencing_token,
)
from scheduler.core.ownership import Claim, Fence, owner_index
from scheduler.core.records import ClusterRecord, Failures, JobRecord, RunRecord
from scheduler.core.states import DesiredState, JobState, Priority, RunState
from scheduler.decisions import revisions as rev

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


def add_unreachable_clusters(
    session: Any, root: str, names: Sequence[str], *, group: str | None = None
) -> None:
    """Standalone clusters ``names`` in the store's catalog (``session``: a store transaction),
    their URLs on hosts that never resolve (a :class:`FakeBackend` stands for each) and their
    storage under the URI ``root``; with ``group``, a group whose primary is the first of them and
    whose failover is the second (none if there is no second)."""
    from scheduler.decisions import catalog
    from scheduler.store import catalog as catalog_store

    for name in names:
        host = f"{name.lower()}.invalid"
        catalog_store.create_cluster(
            session,
            name,
            catalog.ClusterSpec(
                kind="standalone",
                storage_root=f"{root}/{name}",
                master_url=f"spark://{host}:7077",
                rest_url=f"http://{host}:6066",
                ui_url=f"http://{host}:8080",
            ),
        )
    if group is not None:
        failover = names[1] if len(names) > 1 else None
        catalog_store.create_group(
            session, group, primary_cluster=names[0], failover_cluster=failover
        )


def job_record(job_id: int, name: str, now: datetime, **fields: Any) -> JobRecord:
    """A job as the store holds it once created at ``now`` (its restart window an hour old):
    wanted RUNNING, QUEUED, in group ``default``, no cluster, run nor owner; ``fields`` replace
    any of that."""
    job = JobRecord(
        id=job_id,
        name=name,
        group="default",
        team="t",
        business="b",
        priority=Priority.NORMAL,
        entrypoint=f"file:///pipelines/{name}.py",
        args=(),
        conf={},
        checkpoint_location="",
        desired_state=DesiredState.RUNNING,
        state=JobState.QUEUED,
        state_reason="created",
        cluster=None,
        current_run_id=None,
        generation=0,
        attempts_reset_at=now - timedelta(hours=1),
        not_before=None,
        owner=None,
        owner_epoch=0,
        version=1,
        spec_version=1,
        created_at=now,
        updated_at=now,
    )
    return replace(job, **fields)


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
        #: the kinds of the writes of every apply, in order (one tuple per apply)
        self.applied: list[tuple[str, ...]] = []
        #: method name or write kind -> ("before" | "after", how many more times)
        self._crashes: dict[str, tuple[str, int]] = {}
        #: method name or write kind -> a function run (once) right before the call
        self._before: dict[str, Callable[[], object]] = {}
        #: job writes that changed something (not proofs)
        self.writes = 0
        #: closed runs that counted as failures
        self._failed_runs: set[int] = set()
        #: (job id, revision) -> spec (scheduler.decisions.revisions), for RevisionRestore
        self.revisions: dict[tuple[int, int], dict[str, Any]] = {}
        self._ids = itertools.count(1)
        self._run_ids = itertools.count(100)
        self._lock = threading.RLock()

    # -- test controls ------------------------------------------------------------------------

    def crash(self, call: str, when: str = "after", times: int = 1) -> None:
        """Raise :class:`Crash` right ``before`` or ``after`` (committed) the next call(s):
        ``call`` a method (``read``), or a write's kind (``Intent``: an apply that carries one)."""
        self._crashes[call] = (when, times)

    def before(self, call: str, action: Callable[[], object]) -> None:
        """Run ``action`` once, right before the next ``call`` (as for :meth:`crash`): a
        concurrent writer."""
        self._before[call] = action

    def applies(self, kind: str) -> list[int]:
        """How many writes of ``kind`` each apply carrying one had, in order."""
        with self._lock:
            return [n for kinds in self.applied if (n := kinds.count(kind))]

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
            job = job_record(
                next(self._ids),
                name,
                now,
                group=group,
                desired_state=desired,
                state=state,
                owner=owner.node_id if owner else None,
                owner_epoch=owner.epoch if owner else 0,
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

    def apply(self, fence: Fence, writes: Sequence[Write]) -> list[JobRecord]:
        kinds = [type(w).__name__ for w in writes]
        with self._call("apply", kinds):
            if len({w.job.id for w in writes}) != len(writes):
                raise StaleWrite("a job appears twice in one apply")
            effects = []
            for w in writes:
                new_run = None
                if isinstance(w, Intent):
                    run_id = next(self._run_ids)
                    new_run = self._new_run(
                        w.job, run_id, w.cluster, fence, w.checkpoint_location, w.fencing_token
                    )
                effects.append(effect_of(w, new_run))
            lost = [w.job for w in writes if not self._owns(w.job.id, fence)]
            if lost:
                raise NotOwner(f"job {lost[0].name!r} is not owned by {fence}")
            for w in writes:
                if self.jobs[w.job.id].version != w.job.version:
                    raise StaleWrite(f"job {w.job.name!r} changed since version {w.job.version}")
            for e in effects:
                if e.run_fields is not None and self.runs[e.run_id or 0].state.is_final:
                    raise StaleWrite(f"run {e.run_id} is already closed")
            now = self.clock.now()  # every check passed: all of it lands
            for e in effects:
                self._land(e, now)
            return [self._with_run(self.jobs[w.job.id]) for w in writes]

    def add_event(self, job: JobRecord, message: str, *, run_id: int | None = None) -> None:
        with self._call("add_event"):
            self._event(job.id, run_id, None, None, message)

    # -- inside -------------------------------------------------------------------------------

    def _call(self, method: str, kinds: Sequence[str] = ()) -> _Call:
        return _Call(self, method, kinds)

    def _owns(self, job_id: int, fence: Fence) -> bool:
        stored = self.jobs.get(job_id)
        return stored is not None and (stored.owner, stored.owner_epoch) == (
            fence.node_id,
            fence.epoch,
        )

    def _land(self, effect: Effect, now: datetime) -> None:
        """One write's effect (its conditions were checked)."""
        stored = self.jobs[effect.job.id]
        if effect.new_run is not None:
            self.runs[effect.new_run.id] = effect.new_run
        if effect.run_fields is not None and effect.run_id is not None:
            self.runs[effect.run_id] = effect.run_written(self.runs[effect.run_id])
            if effect.run_fields.get("counts_as_failure"):
                self._failed_runs.add(effect.run_id)
        changes = dict(effect.job_fields)
        if effect.bumps:
            changes.update(version=stored.version + 1, updated_at=now)
            self.writes += 1
        if effect.restore is not None:
            changes.update(self._restored(stored, effect, now))
        self.jobs[stored.id] = replace(stored, **changes)
        if effect.restore is not None:
            written = self.jobs[stored.id]
            self.revisions[(stored.id, written.spec_version)] = rev.spec_of(written)
        for from_state, to_state, message in effect.events:
            self._event(
                stored.id,
                effect.run_id,
                None if from_state is None else from_state.value,
                None if to_state is None else to_state.value,
                message,
            )

    def _restored(self, stored: JobRecord, effect: Effect, now: datetime) -> dict[str, Any]:
        """The job's fields once the restored revision's spec is its next one (as the store's
        spec change makes them: a new generation, queued again when at rest)."""
        assert effect.restore is not None
        spec = self.revisions[(stored.id, effect.restore)]
        changes = rev.rollback_changes(rev.spec_of(stored), spec)
        fields = {
            k: tuple(v) if k == "args" else v
            for k, v in changes.items()
            if k in ("entrypoint", "args", "conf", "checkpoint_location")
        }
        if stored.state.is_at_rest:
            reason = effect.events[-1][2]
            self._event(stored.id, stored.current_run_id, stored.state.value, "QUEUED", reason)
            fields.update(state=JobState.QUEUED, state_reason=reason)
        self.writes += 1
        return {
            **fields,
            "generation": stored.generation + 1,
            "spec_version": stored.spec_version + 1,
            "version": stored.version + 1,
            "updated_at": now,
            "attempts_reset_at": now,
            "not_before": None,
        }

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
        self,
        job: JobRecord,
        run_id: int,
        cluster: str,
        fence: Fence,
        checkpoint: str,
        token: str = "",
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
            fencing_token=fencing_digest(token or new_fencing_token()),
            fencing_secret=token or None,  # kept here too: the twin returns what it stores
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
            submit_intent_at=self.clock.at,
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
    """One ledger call: serialised, logged, with the crash points and concurrent writers.

    A call is logged as ``ledger.<method>``; an apply as ``ledger.apply <kind>`` for one write
    and ``ledger.apply <kind>*<n>`` for n writes of one kind (kinds joined by ``+`` when they
    differ). Crash points and concurrent writers are keyed by method, or by a write's kind for
    the next apply that carries one."""

    def __init__(self, ledger: FakeLedger, method: str, kinds: Sequence[str] = ()) -> None:
        self._ledger = ledger
        self._kinds = tuple(kinds)
        self._keys = [method, *dict.fromkeys(kinds)]
        self._label = method
        if kinds:
            distinct = "+".join(dict.fromkeys(kinds))
            self._label += f" {distinct}" + (f"*{len(kinds)}" if len(kinds) > 1 else "")

    def __enter__(self) -> None:
        ledger = self._ledger
        for key in self._keys:
            action = ledger._before.pop(key, None)
            if action is not None:
                action()
        ledger._lock.acquire()
        ledger.calls.append(f"ledger.{self._label}")
        if self._kinds:
            ledger.applied.append(self._kinds)
        crash = self._crash("before")
        if crash is not None:
            ledger._lock.release()
            raise Crash(f"before {crash}")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._ledger._lock.release()
        if exc_type is None:
            crash = self._crash("after")
            if crash is not None:
                raise Crash(f"after {crash}")

    def _crash(self, when: str) -> str | None:
        """The key of a crash point due now (spent once), if any."""
        crashes = self._ledger._crashes
        for key in self._keys:
            crash = crashes.get(key)
            if crash is None or crash[0] != when:
                continue
            if crash[1] <= 1:
                del crashes[key]
            else:
                crashes[key] = (when, crash[1] - 1)
            return key
        return None


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
    #: run id -> the fencing token its driver was given (the store keeps only its digest)
    tokens: dict[int, str] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    #: the change feed (scheduler/backends/changes.py): a "listing" of every app per call
    _changes: ChangeLog = field(default_factory=ChangeLog)
    #: each submission's driver log streams (``write_log`` adds to them)
    logs: dict[tuple[str, str], bytearray] = field(default_factory=dict)
    log_streams: ClassVar[tuple[str, ...]] = ("stdout", "stderr")

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
                self.tokens[request.run_id] = request.fencing_token
                app = FakeApp(
                    f"driver-{n}",
                    request.app_name,
                    AppState.RUNNING if self.start_running else AppState.STARTING,
                    f"app-{n}",
                )
                self.apps[app.submission_id] = app
                for stream in self.log_streams:
                    self.logs[(app.submission_id, stream)] = bytearray()
                self.logs[(app.submission_id, "stdout")] += (
                    f"driver of {request.app_name} started as {app.app_id}\n".encode()
                )
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

    def driver_log(
        self, submission_id: str, stream: str, offset: int | None, limit: int
    ) -> LogChunk:
        with self._lock:
            if self.unreachable:
                raise ClusterUnreachable("the cluster does not answer")
            if stream not in self.log_streams:
                raise InvalidInput(f"no log stream {stream!r}")
            log = self.logs.get((submission_id, stream))
            if log is None:
                raise NotFound(f"no driver {submission_id!r}")
            start, end = log_window(len(log), offset, limit)
            return LogChunk(stream, bytes(log[start:end]), start, len(log))

    # -- test controls ------------------------------------------------------------------------

    def live(self, job_name: str | None = None) -> list[FakeApp]:
        with self._lock:
            return [
                a
                for a in self.apps.values()
                if a.state.is_alive and (job_name is None or a.app_name.split(":")[1] == job_name)
            ]

    def write_log(self, submission_id: str, text: str, stream: str = "stdout") -> None:
        """The driver of ``submission_id`` writes ``text`` to its ``stream``."""
        with self._lock:
            self.logs[(submission_id, stream)] += text.encode("utf-8")

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
