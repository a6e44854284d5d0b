"""The ledger: the fenced transactions the reconciler acts through (DESIGN §2, invariant 3).

Claiming a pool slot's jobs, reading the jobs to reconcile, proving a claim, conditional state
transitions, and runs (intent, outcome, close). Every write that acts on a job is conditional on
the version the caller read and, with a fence, on the claim still owning the job: StaleWrite or
NotOwner otherwise, and nothing changes.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, NoReturn

from sqlalchemy import case, func, insert, or_, select, tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from scheduler.core.clock import utcnow
from scheduler.core.errors import (
    NotFound,
    NotOwner,
    StaleWrite,
)
from scheduler.core.ledger import FailureQuery, Intent, LedgerView, Observation, Submitted
from scheduler.core.ownership import Claim, Fence
from scheduler.core.records import (
    JobRecord,
    RunRecord,
)
from scheduler.core.states import DesiredState, JobState, RunState, transition
from scheduler.decisions.planning import Failures
from scheduler.store import reads
from scheduler.store.db import Store
from scheduler.store.mapping import run_record
from scheduler.store.models import BusinessQuota, Group, Job, JobEvent, Run

#: the job table, for the reads of a tick: Core rows, not ORM objects (a tick may read tens
#: of thousands of rows; an ORM object costs several times a row's decoding)
_JOBS = Job.__table__


def jobs_to_reconcile(
    session: Session, groups: Iterable[str] | None, fence: Fence | None = None
) -> list[JobRecord]:
    """Jobs that may need work: desired RUNNING or not at rest; with ``fence``, only its own."""
    at_rest = [s.value for s in (JobState.STOPPED, JobState.FINISHED, JobState.FAILED)]
    c = _JOBS.c
    stmt = select(*c).where(
        (c.desired_state == DesiredState.RUNNING.value) | c.state.not_in(at_rest)
    )
    if groups is not None:
        stmt = stmt.where(c.group_name.in_(list(groups)))
    if fence is not None:
        stmt = stmt.where(*_owned_by(fence))
    return _records(session, stmt)


def _records(session: Session, stmt: Any) -> list[JobRecord]:
    """The records of the job rows ``stmt`` selects (``select(*_JOBS.c)``), by id, with their
    current runs and those runs' progress."""
    rows = session.connection().execute(stmt.order_by(_JOBS.c.id)).all()
    return reads.with_runs(session, rows)


def _owned_by(fence: Fence) -> tuple[Any, ...]:
    return (Job.owner == fence.node_id, Job.owner_epoch == fence.epoch)


def claim_jobs(
    session: Session,
    claim: Claim,
    *,
    only_unowned: bool = False,
    bound_elsewhere: Iterable[str] = (),
) -> int:
    """Take the group's jobs that hash to this node's pool slot; returns how many changed hands.

    ``CRC32(name) % size = index`` runs in the database (SQLite gets a ``crc32`` function from
    the store). A job already claimed under a newer epoch is left alone: a node with a stale
    view can never take a job back. The version is not bumped: ownership is not a spec change.
    ``only_unowned``: only jobs nobody owns (new jobs), found through the owner index.

    Dedicated groups (``scheduler.decisions.quotas``): the jobs of ``bound_elsewhere`` (businesses
    bound to another group: :func:`businesses_bound_elsewhere`) are never claimed here, whatever
    group row they sit in. (A list, not a subquery: an UPDATE's subquery on MariaDB takes shared
    locks on the quota rows that the submission gate's token writes then deadlock with.)
    """
    fence = claim.fence
    candidates = (
        Job.owner.is_(None)  # the owner index finds them without a scan of the group
        if only_unowned
        else or_(Job.owner.is_(None), Job.owner != fence.node_id, Job.owner_epoch < fence.epoch)
    )
    excluded = sorted(set(bound_elsewhere))
    result = session.execute(
        update(Job)
        .where(
            Job.owner_epoch <= fence.epoch,
            candidates,
            Job.group_name == claim.group,
            func.crc32(Job.name) % claim.size == claim.index,
            *([Job.business.not_in(excluded)] if excluded else []),
        )
        .values(owner=fence.node_id, owner_epoch=fence.epoch)
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


def businesses_bound_elsewhere(session: Session, group: str) -> list[str]:
    """The businesses bound to a dedicated group other than ``group`` (a plain read)."""
    return list(
        session.scalars(
            select(BusinessQuota.business).where(
                BusinessQuota.dedicated_group.is_not(None),
                BusinessQuota.dedicated_group != group,
            )
        )
    )


def jobs_per_owner(session: Session, group: str) -> dict[str | None, int]:
    """How many of ``group``'s jobs each node owns in the store (None: not claimed yet)."""
    rows = session.execute(
        select(Job.owner, func.count()).where(Job.group_name == group).group_by(Job.owner)
    )
    return {owner: int(count) for owner, count in rows}


def check_owner(session: Session, job: JobRecord, fence: Fence) -> None:
    """Prove in this transaction that ``fence`` still owns ``job``; raises NotOwner otherwise.

    A no-op UPDATE, so that on MySQL it also locks the row until the transaction ends: a
    concurrent claim by another node waits for this transaction instead of racing it.
    """
    result = session.execute(
        update(Job)
        .where(Job.id == job.id, *_owned_by(fence))
        .values(owner_epoch=Job.owner_epoch)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        raise NotOwner(
            f"job {job.name!r} is no longer owned by {fence.node_id} under epoch {fence.epoch}"
        )


def transition_job(
    session: Session,
    job: JobRecord,
    new_state: JobState,
    *,
    reason: str,
    cause: str,
    node_id: str,
    run_id: int | None = None,
    fence: Fence | None = None,
    **fields: Any,
) -> int:
    """Conditionally move ``job`` (as last read) to ``new_state``; returns the new version.

    The write only lands if the job is still at the version the caller read: a concurrent API
    write or another node's action makes it raise StaleWrite, and nothing is changed. With a
    ``fence`` it also only lands while that claim owns the job (NotOwner otherwise).
    """
    transition(job.state, new_state)
    values: dict[str, Any] = {
        "state": new_state.value,
        "version": job.version + 1,
        "updated_at": utcnow(),
        **fields,
    }
    if new_state != job.state or reason != job.state_reason:
        values["state_reason"] = reason
    conditions = [Job.id == job.id, Job.version == job.version]
    if fence is not None:
        conditions.extend(_owned_by(fence))
    result = session.execute(update(Job).where(*conditions).values(**values))
    if result.rowcount != 1:  # type: ignore[attr-defined]
        if fence is not None:
            check_owner(session, job, fence)  # raises NotOwner when that is the reason
        raise StaleWrite(f"job {job.name!r} changed since version {job.version}")
    if new_state != job.state:
        session.add(
            JobEvent(
                job_id=job.id,
                run_id=run_id if run_id is not None else job.current_run_id,
                from_state=job.state.value,
                to_state=new_state.value,
                cause=cause,
                message=reason,
                node_id=node_id,
            )
        )
    return job.version + 1


def create_run(
    session: Session,
    job: JobRecord,
    *,
    cluster: str,
    node_id: str,
    owner_epoch: int,
    checkpoint_location: str,
    app_name_for: Any,
) -> RunRecord:
    """Record the intent to submit a new run (state SUBMITTING) with a fresh fencing token."""
    last = session.scalar(select(func.max(Run.attempt)).where(Run.job_id == job.id)) or 0
    run = Run(
        job_id=job.id,
        attempt=last + 1,
        generation=job.generation,
        cluster_name=cluster,
        node_id=node_id,
        owner_epoch=owner_epoch,
        fencing_token=secrets.token_hex(16),
        app_name="",
        checkpoint_location=checkpoint_location,
        state=RunState.SUBMITTING.value,
        reason="",
        created_at=utcnow(),
    )
    session.add(run)
    session.flush()
    run.app_name = app_name_for(job.name, run.id)
    session.flush()
    return run_record(run, job.name)


RUN_FIELDS = frozenset(
    {
        "submission_id",
        "app_id",
        "state",
        "reason",
        "exit_code",
        "submitted_at",
        "started_at",
        "ended_at",
        "counts_as_failure",
    }
)


def update_run(session: Session, run: RunRecord, **fields: Any) -> RunRecord:
    unknown = set(fields) - RUN_FIELDS
    if unknown:
        raise ValueError(f"not run fields: {sorted(unknown)}")
    row = session.get(Run, run.id)
    if row is None:
        raise NotFound(f"no run {run.id}")
    if RunState(row.state).is_final:
        raise StaleWrite(f"run {run.id} is already closed ({row.state})")
    for key, value in fields.items():
        setattr(row, key, value.value if isinstance(value, RunState) else value)
    session.flush()
    return run_record(row, run.job_name)


def failures_since(
    session: Session, job: JobRecord, since: datetime
) -> tuple[int, datetime | None]:
    """Runs whose end counted as a failure (``counts_as_failure``) since ``since``, and the last
    end: not kills by Drover, runs never submitted, or failures on an abnormal cluster."""
    row = session.execute(
        select(func.count(), func.max(Run.ended_at)).where(
            Run.job_id == job.id, Run.counts_as_failure.is_(True), Run.ended_at >= since
        )
    ).one()
    last = row[1]
    return int(row[0]), last


# -- the ledger the reconciler acts through (scheduler.core.ledger.Ledger)
# --------------------------


class _Unset:
    """Marks an argument that was not given (None is a value: "no backoff")."""


_UNSET = _Unset()


#: run states a run write may start from (a closed run is never written again)
_OPEN_RUN_STATES = tuple(s.value for s in RunState if not s.is_final)
#: ids per ``IN (...)`` list
_CHUNK = 1000
#: seconds a reconciler trusts its read of the dedicated-group bindings
BINDINGS_TTL = 5.0


class SqlLedger:
    """:class:`scheduler.core.ledger.Ledger` in SQL: one transaction per method, few statements.

    A write is one fenced ``UPDATE jobs ... WHERE id AND version AND owner AND owner_epoch``
    (bumping the version and ``updated_at``), the run's ``UPDATE ... WHERE state is open`` and
    one multi-row event insert: no read before a write. When the fenced update matches no row,
    one read tells NotOwner from StaleWrite and the transaction rolls back.
    """

    def __init__(
        self,
        store: Store,
        *,
        node_id: str,
        cause: str = "reconciler",
        app_name_for: Callable[[str, int], str],
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._store = store
        self._node_id = node_id
        self._cause = cause
        self._app_name_for = app_name_for
        self._clock = clock
        #: group -> (when read, businesses bound to other dedicated groups)
        self._bindings: dict[str, tuple[float, list[str]]] = {}

    # -- reads --------------------------------------------------------------------------------

    def claim(self, claim: Claim, *, only_unowned: bool = False) -> int:
        with self._store.transaction() as session:
            return claim_jobs(
                session,
                claim,
                only_unowned=only_unowned,
                bound_elsewhere=self._bound_elsewhere(session, claim.group),
            )

    def _bound_elsewhere(self, session: Session, group: str) -> list[str]:
        """The businesses bound to other dedicated groups, read at most every
        ``BINDINGS_TTL`` seconds (binding a business refuses while it has jobs elsewhere, so
        this only guards against rows written around that rule)."""
        now = time.monotonic()
        cached = self._bindings.get(group)
        if cached is not None and now - cached[0] < BINDINGS_TTL:
            return cached[1]
        bound = businesses_bound_elsewhere(session, group)
        self._bindings[group] = (now, bound)
        return bound

    def read(
        self,
        fence: Fence,
        group: str,
        *,
        changed_since: datetime | None = None,
        ids: Iterable[int] = (),
    ) -> LedgerView:
        with self._store.transaction() as session:  # ends in COMMIT: no ROLLBACK per tick
            if changed_since is None:
                jobs = jobs_to_reconcile(session, [group], fence)
            else:
                c = _JOBS.c
                changed = c.updated_at >= changed_since
                wanted = list(ids)
                stmt = select(*c).where(
                    c.group_name == group,
                    *_owned_by(fence),
                    or_(changed, c.id.in_(wanted)) if wanted else changed,
                )
                jobs = _records(session, stmt)
            clusters = {c.name: c for c in reads.clusters(session)}
            primary = session.scalar(select(Group.primary_cluster).where(Group.name == group))
        return LedgerView(jobs, clusters, primary or "")

    def failures(self, queries: Sequence[FailureQuery]) -> dict[int, Failures]:
        if not queries:
            return {}
        since = {q.job_id: q.since for q in queries}
        counts: dict[int, tuple[int, datetime | None]] = {}
        ids = sorted(since)
        with self._store.transaction() as session:
            for start in range(0, len(ids), _CHUNK):
                chunk = ids[start : start + _CHUNK]
                rows = session.execute(
                    select(Run.job_id, Run.ended_at).where(
                        Run.job_id.in_(chunk),
                        Run.counts_as_failure.is_(True),
                        Run.ended_at >= min(since[i] for i in chunk),
                    )
                )
                for job_id, ended_at in rows:
                    if ended_at is None or ended_at < since[job_id]:
                        continue
                    count, last = counts.get(job_id, (0, None))
                    counts[job_id] = (count + 1, ended_at if last is None else max(last, ended_at))
        return {i: Failures(*counts[i]) for i in counts}

    # -- writes -------------------------------------------------------------------------------

    def record_state(
        self,
        job: JobRecord,
        fence: Fence,
        path: Sequence[JobState],
        reason: str,
        *,
        not_before: datetime | None | _Unset = _UNSET,
    ) -> JobRecord:
        state = _walk(job.state, path)
        values: dict[str, Any] = {}
        if not isinstance(not_before, _Unset):
            values["not_before"] = not_before
        with self._store.transaction() as session:
            written = self._write_job(session, job, fence, state, reason, **values)
            self._events(session, job, path, reason, job.current_run_id, epoch=fence.epoch)
        return written

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
        path = [] if job.state == JobState.QUEUED else [JobState.QUEUED]
        path.append(JobState.SUBMITTING)
        _walk(job.state, path)
        current = job.current_run
        last_attempt = current.attempt if current is not None else None
        now = self._clock()
        with self._store.transaction() as session:
            if last_attempt is None and job.current_run_id is not None:
                last_attempt = session.scalar(
                    select(func.max(Run.attempt)).where(Run.job_id == job.id)
                )
            values: dict[str, Any] = {
                "job_id": job.id,
                "attempt": (last_attempt or 0) + 1,
                "generation": job.generation,
                "cluster_name": cluster,
                "node_id": self._node_id,
                "owner_epoch": fence.epoch,
                "fencing_token": secrets.token_hex(16),
                "app_name": "",
                "checkpoint_location": checkpoint_location,
                "state": RunState.SUBMITTING.value,
                "reason": "",
                "counts_as_failure": False,
                "created_at": now,
            }
            try:
                inserted = session.execute(insert(Run).values(**values))
            except IntegrityError as exc:  # that attempt exists: the job moved on meanwhile
                raise StaleWrite(f"job {job.name!r} changed since version {job.version}") from exc
            run_id = int(inserted.inserted_primary_key[0])  # type: ignore[attr-defined]
            # the name is written with the submission id (it is derived from the run id until
            # then: scheduler.store.mapping), which saves a statement here
            app_name = self._app_name_for(job.name, run_id)
            submitting = f"submitting attempt {values['attempt']} to cluster {cluster}"
            written = self._write_job(
                session,
                job,
                fence,
                JobState.SUBMITTING,
                submitting,
                current_run_id=run_id,
                cluster_name=cluster,
                not_before=None,
            )
            steps = [(s, reason if s == JobState.QUEUED else submitting) for s in path]
            self._events(session, job, steps, submitting, run_id, note=note, epoch=fence.epoch)
        run = RunRecord(
            id=run_id,
            job_name=job.name,
            attempt=values["attempt"],
            generation=job.generation,
            cluster=cluster,
            node_id=self._node_id,
            owner_epoch=fence.epoch,
            fencing_token=values["fencing_token"],
            app_name=app_name,
            checkpoint_location=checkpoint_location,
            submission_id=None,
            app_id=None,
            state=RunState.SUBMITTING,
            reason="",
            exit_code=None,
            created_at=now,
            submitted_at=None,
            started_at=None,
            ended_at=None,
        )
        return replace(
            written, current_run_id=run_id, current_run=run, cluster=cluster, not_before=None
        )

    def record_intents(self, fence: Fence, intents: Sequence[Intent]) -> list[JobRecord]:
        """``record_intent`` for a batch: one multi-row run INSERT, one SELECT of the new run
        ids (portable: MySQL has no INSERT ... RETURNING), one fenced UPDATE of the jobs, one
        event INSERT, one COMMIT; a row count short of the batch rolls it all back."""
        if not intents:
            return []
        paths: dict[int, list[JobState]] = {}
        for i in intents:
            path = [] if i.job.state == JobState.QUEUED else [JobState.QUEUED]
            path.append(JobState.SUBMITTING)
            _walk(i.job.state, path)
            paths[i.job.id] = path
        if len({i.job.id for i in intents}) != len(intents):
            raise StaleWrite("a job appears twice in a batch of intents")
        now = self._clock()
        with self._store.transaction() as session:
            attempts = {
                i.job.id: i.job.current_run.attempt
                for i in intents
                if i.job.current_run is not None
            }
            unknown = [
                i.job.id
                for i in intents
                if i.job.current_run is None and i.job.current_run_id is not None
            ]
            if unknown:
                maxima = session.execute(
                    select(Run.job_id, func.max(Run.attempt))
                    .where(Run.job_id.in_(unknown))
                    .group_by(Run.job_id)
                )
                attempts.update({int(j): int(a or 0) for j, a in maxima})
            values: list[dict[str, Any]] = [
                {
                    "job_id": i.job.id,
                    "attempt": attempts.get(i.job.id, 0) + 1,
                    "generation": i.job.generation,
                    "cluster_name": i.cluster,
                    "node_id": self._node_id,
                    "owner_epoch": fence.epoch,
                    "fencing_token": secrets.token_hex(16),
                    "app_name": "",
                    "checkpoint_location": i.checkpoint_location,
                    "state": RunState.SUBMITTING.value,
                    "reason": "",
                    "counts_as_failure": False,
                    "created_at": now,
                }
                for i in intents
            ]
            try:
                session.execute(insert(Run), values)
            except IntegrityError as exc:  # an attempt exists: a job moved on meanwhile
                raise StaleWrite("a job of the batch changed meanwhile") from exc
            keys = [(v["job_id"], v["attempt"]) for v in values]
            run_ids = {
                int(job_id): int(run_id)
                for job_id, run_id in session.execute(
                    select(Run.job_id, Run.id).where(tuple_(Run.job_id, Run.attempt).in_(keys))
                )
            }
            if len(run_ids) != len(intents):
                raise StaleWrite("the runs of a batch of intents were not all recorded")
            by_job = {v["job_id"]: v for v in values}
            reasons = {
                i.job.id: f"submitting attempt {by_job[i.job.id]['attempt']} to cluster {i.cluster}"
                for i in intents
            }
            ids = [i.job.id for i in intents]
            result = session.execute(
                update(Job)
                .where(
                    Job.id.in_(ids),
                    Job.version == case({i.job.id: i.job.version for i in intents}, value=Job.id),
                    *_owned_by(fence),
                )
                .values(
                    state=JobState.SUBMITTING.value,
                    version=Job.version + 1,
                    updated_at=now,
                    state_reason=case(reasons, value=Job.id),
                    current_run_id=case(run_ids, value=Job.id),
                    cluster_name=case({i.job.id: i.cluster for i in intents}, value=Job.id),
                    not_before=None,
                )
                .execution_options(synchronize_session=False)
            )
            if result.rowcount != len(intents):  # type: ignore[attr-defined]
                raise StaleWrite(f"{len(intents) - result.rowcount} of a batch moved")  # type: ignore[attr-defined]
            rows: list[dict[str, Any]] = []
            for i in intents:
                before = i.job.state
                run_id = run_ids[i.job.id]
                for step in paths[i.job.id]:
                    if step == before:
                        continue
                    message = i.reason if step == JobState.QUEUED else reasons[i.job.id]
                    rows.append(
                        self._event(
                            i.job, run_id, now, before.value, step.value, message, epoch=fence.epoch
                        )
                    )
                    before = step
                if i.note is not None:
                    rows.append(
                        self._event(i.job, run_id, now, None, None, i.note, epoch=fence.epoch)
                    )
            if rows:
                session.execute(insert(JobEvent), rows)
        written = []
        for i in intents:
            v = by_job[i.job.id]
            run_id = run_ids[i.job.id]
            run = RunRecord(
                id=run_id,
                job_name=i.job.name,
                attempt=int(v["attempt"]),
                generation=i.job.generation,
                cluster=i.cluster,
                node_id=self._node_id,
                owner_epoch=fence.epoch,
                fencing_token=str(v["fencing_token"]),
                app_name=self._app_name_for(i.job.name, run_id),
                checkpoint_location=i.checkpoint_location,
                submission_id=None,
                app_id=None,
                state=RunState.SUBMITTING,
                reason="",
                exit_code=None,
                created_at=now,
                submitted_at=None,
                started_at=None,
                ended_at=None,
            )
            written.append(
                replace(
                    i.job,
                    state=JobState.SUBMITTING,
                    state_reason=reasons[i.job.id],
                    version=i.job.version + 1,
                    updated_at=now,
                    current_run_id=run_id,
                    current_run=run,
                    cluster=i.cluster,
                    not_before=None,
                )
            )
        return written

    def prove(self, job: JobRecord, fence: Fence) -> None:
        with self._store.transaction() as session:
            result = session.execute(
                update(Job)
                .where(Job.id == job.id, Job.version == job.version, *_owned_by(fence))
                .values(owner_epoch=Job.owner_epoch)
                .execution_options(synchronize_session=False)
            )
            if result.rowcount != 1:  # type: ignore[attr-defined]
                self._refuse(session, job, fence)

    def prove_all(self, fence: Fence, jobs: Sequence[JobRecord]) -> None:
        if not jobs:
            return
        with self._store.transaction() as session:
            result = session.execute(
                update(Job)
                .where(
                    Job.id.in_([j.id for j in jobs]),
                    Job.version == case({j.id: j.version for j in jobs}, value=Job.id),
                    *_owned_by(fence),
                )
                .values(owner_epoch=Job.owner_epoch)
                .execution_options(synchronize_session=False)
            )
            if result.rowcount != len(jobs):  # type: ignore[attr-defined]
                raise StaleWrite(f"{len(jobs) - result.rowcount} of a batch moved")  # type: ignore[attr-defined]

    def record_submitted(
        self, job: JobRecord, fence: Fence, *, submission_id: str, app_id: str | None, at: datetime
    ) -> JobRecord:
        run = _open_run(job)
        _walk(job.state, [JobState.STARTING])
        reason = f"submitted as {submission_id}"
        with self._store.transaction() as session:
            written = self._write_job(session, job, fence, JobState.STARTING, reason)
            self._write_run(
                session,
                run,
                app_name=run.app_name,
                submission_id=submission_id,
                app_id=app_id,
                submitted_at=at,
                state=RunState.STARTING.value,
            )
            self._events(session, job, [JobState.STARTING], reason, run.id, epoch=fence.epoch)
        return replace(
            written,
            current_run=replace(
                run,
                submission_id=submission_id,
                app_id=app_id,
                submitted_at=at,
                state=RunState.STARTING,
            ),
        )

    def record_submitted_all(self, fence: Fence, outcomes: Sequence[Submitted]) -> list[JobRecord]:
        """``record_submitted`` for a batch: one fenced UPDATE of the jobs, one of the runs, one
        event INSERT, one COMMIT; a row count short of the batch rolls it all back."""
        if not outcomes:
            return []
        runs = {o.job.id: _open_run(o.job) for o in outcomes}
        if len(runs) != len(outcomes):
            raise StaleWrite("a job appears twice in a batch of submissions")
        for o in outcomes:
            _walk(o.job.state, [JobState.STARTING])
        now = self._clock()
        reasons = {o.job.id: f"submitted as {o.submission_id}" for o in outcomes}
        by_run = {runs[o.job.id].id: o for o in outcomes}
        with self._store.transaction() as session:
            result = session.execute(
                update(Job)
                .where(
                    Job.id.in_(list(runs)),
                    Job.version == case({o.job.id: o.job.version for o in outcomes}, value=Job.id),
                    *_owned_by(fence),
                )
                .values(
                    state=JobState.STARTING.value,
                    version=Job.version + 1,
                    updated_at=now,
                    state_reason=case(reasons, value=Job.id),
                )
                .execution_options(synchronize_session=False)
            )
            if result.rowcount != len(outcomes):  # type: ignore[attr-defined]
                raise StaleWrite(f"{len(outcomes) - result.rowcount} of a batch moved")  # type: ignore[attr-defined]
            app_ids = {r: o.app_id for r, o in by_run.items() if o.app_id is not None}
            values: dict[str, Any] = {
                "state": RunState.STARTING.value,
                "app_name": case(
                    {r: runs[o.job.id].app_name for r, o in by_run.items()}, value=Run.id
                ),
                "submission_id": case(
                    {r: o.submission_id for r, o in by_run.items()}, value=Run.id
                ),
                "submitted_at": case({r: o.at for r, o in by_run.items()}, value=Run.id),
            }
            if app_ids:
                values["app_id"] = case(app_ids, value=Run.id, else_=Run.app_id)
            result = session.execute(
                update(Run)
                .where(Run.id.in_(list(by_run)), Run.state.in_(_OPEN_RUN_STATES))
                .values(**values)
                .execution_options(synchronize_session=False)
            )
            if result.rowcount != len(outcomes):  # type: ignore[attr-defined]
                raise StaleWrite("a run of the batch is closed or gone")
            rows = [
                self._event(
                    o.job,
                    runs[o.job.id].id,
                    now,
                    o.job.state.value,
                    JobState.STARTING.value,
                    reasons[o.job.id],
                    epoch=fence.epoch,
                )
                for o in outcomes
                if o.job.state != JobState.STARTING
            ]
            if rows:
                session.execute(insert(JobEvent), rows)
        return [
            replace(
                o.job,
                state=JobState.STARTING,
                state_reason=reasons[o.job.id],
                version=o.job.version + 1,
                updated_at=now,
                current_run=replace(
                    runs[o.job.id],
                    submission_id=o.submission_id,
                    app_id=o.app_id,
                    submitted_at=o.at,
                    state=RunState.STARTING,
                ),
            )
            for o in outcomes
        ]

    def record_adopted(
        self, job: JobRecord, fence: Fence, *, submission_id: str, app_id: str | None, at: datetime
    ) -> JobRecord:
        run = _open_run(job)
        submitted_at = run.submitted_at or at
        message = f"adopted application {run.app_name} ({submission_id}) instead of resubmitting"
        with self._store.transaction() as session:
            written = self._write_job(session, job, fence, job.state, job.state_reason)
            self._write_run(
                session,
                run,
                app_name=run.app_name,
                submission_id=submission_id,
                app_id=app_id,
                submitted_at=submitted_at,
            )
            self._events(session, job, [], message, run.id, note=message, epoch=fence.epoch)
        return replace(
            written,
            current_run=replace(
                run, submission_id=submission_id, app_id=app_id, submitted_at=submitted_at
            ),
        )

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
        run = _open_run(job)
        fields: dict[str, Any] = {"state": run_state.value}
        if app_id is not None:
            fields["app_id"] = app_id
        if started_at is not None:
            fields["started_at"] = started_at
        path = [job_state] if job_state != job.state else []
        _walk(job.state, path)
        with self._store.transaction() as session:
            written = self._write_job(
                session, job, fence, job_state, reason if path else job.state_reason
            )
            self._write_run(session, run, **fields)
            self._events(session, job, path, reason, run.id, epoch=fence.epoch)
        return replace(
            written,
            current_run=replace(
                run,
                state=run_state,
                app_id=app_id if app_id is not None else run.app_id,
                started_at=started_at if started_at is not None else run.started_at,
            ),
        )

    def record_observed_all(
        self, fence: Fence, observations: Sequence[Observation]
    ) -> list[JobRecord]:
        """One fenced UPDATE per (job state, run state, start time) for all the jobs, one per
        runs, one event INSERT, one COMMIT; a row count short of the batch rolls it all back."""
        if not observations:
            return []
        runs = {o.job.id: _open_run(o.job) for o in observations}
        for o in observations:
            _walk(o.job.state, [o.job_state])
        now = self._clock()
        groups: dict[tuple[JobState, RunState, datetime | None], list[Observation]] = {}
        for o in observations:
            groups.setdefault((o.job_state, o.run_state, o.started_at), []).append(o)
        rows: list[dict[str, Any]] = []
        with self._store.transaction() as session:
            for (job_state, run_state, started_at), batch in groups.items():
                ids = [o.job.id for o in batch]
                reasons = {
                    o.job.id: o.reason if o.job_state != o.job.state else o.job.state_reason
                    for o in batch
                }
                result = session.execute(
                    update(Job)
                    .where(
                        Job.id.in_(ids),
                        Job.version == case({o.job.id: o.job.version for o in batch}, value=Job.id),
                        *_owned_by(fence),
                    )
                    .values(
                        state=job_state.value,
                        version=Job.version + 1,
                        updated_at=now,
                        state_reason=case(reasons, value=Job.id),
                    )
                    .execution_options(synchronize_session=False)
                )
                if result.rowcount != len(batch):  # type: ignore[attr-defined]
                    raise StaleWrite(f"{len(batch) - result.rowcount} of a batch moved")  # type: ignore[attr-defined]
                run_ids = {runs[o.job.id].id: o for o in batch}
                values: dict[str, Any] = {"state": run_state.value}
                if started_at is not None:
                    values["started_at"] = started_at
                app_ids = {r: o.app_id for r, o in run_ids.items() if o.app_id is not None}
                if app_ids:
                    values["app_id"] = case(app_ids, value=Run.id, else_=Run.app_id)
                result = session.execute(
                    update(Run)
                    .where(Run.id.in_(list(run_ids)), Run.state.in_(_OPEN_RUN_STATES))
                    .values(**values)
                    .execution_options(synchronize_session=False)
                )
                if result.rowcount != len(batch):  # type: ignore[attr-defined]
                    raise StaleWrite("a run of the batch is closed or gone")
                for o in batch:
                    if o.job_state != o.job.state:
                        rows.append(
                            self._event(
                                o.job,
                                runs[o.job.id].id,
                                now,
                                o.job.state.value,
                                o.job_state.value,
                                o.reason,
                                epoch=fence.epoch,
                            )
                        )
            if rows:
                session.execute(insert(JobEvent), rows)
        written = []
        for o in observations:
            run = runs[o.job.id]
            written.append(
                replace(
                    o.job,
                    state=o.job_state,
                    state_reason=o.reason if o.job_state != o.job.state else o.job.state_reason,
                    version=o.job.version + 1,
                    updated_at=now,
                    current_run=replace(
                        run,
                        state=o.run_state,
                        app_id=o.app_id if o.app_id is not None else run.app_id,
                        started_at=o.started_at if o.started_at is not None else run.started_at,
                    ),
                )
            )
        return written

    def record_kill_intent(self, job: JobRecord, fence: Fence, *, reason: str) -> JobRecord:
        run = _open_run(job)
        if job.state == JobState.STOPPING and run.state == RunState.STOPPING:
            self.prove(job, fence)  # a repeated kill: the proof is the intent
            return job
        path = [JobState.STOPPING] if job.state != JobState.STOPPING else []
        _walk(job.state, path)
        message = f"stopping: {reason}"
        with self._store.transaction() as session:
            written = self._write_job(
                session, job, fence, JobState.STOPPING, message if path else job.state_reason
            )
            if run.state != RunState.STOPPING:
                self._write_run(session, run, state=RunState.STOPPING.value)
            self._events(session, job, path, message, run.id, epoch=fence.epoch)
        return replace(written, current_run=replace(run, state=RunState.STOPPING))

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
        run = _open_run(job)
        transition(job.state, job_state)
        values: dict[str, Any] = {} if not_before is None else {"not_before": not_before}
        with self._store.transaction() as session:
            written = self._write_job(session, job, fence, job_state, reason, **values)
            self._write_run(
                session,
                run,
                state=run_state.value,
                reason=reason,
                exit_code=exit_code,
                ended_at=ended_at,
                counts_as_failure=counts_as_failure,
            )
            self._events(session, job, [job_state], reason, run.id, epoch=fence.epoch)
        return replace(
            written,
            current_run=replace(
                run, state=run_state, reason=reason, exit_code=exit_code, ended_at=ended_at
            ),
        )

    def fence_run(
        self, job: JobRecord, fence: Fence, *, reason: str, path: Sequence[JobState], at: datetime
    ) -> JobRecord:
        run = _open_run(job)
        state = _walk(job.state, path)
        with self._store.transaction() as session:
            written = self._write_job(session, job, fence, state, reason)
            self._write_run(
                session,
                run,
                state=RunState.LOST.value,
                reason=reason,
                ended_at=at,
                counts_as_failure=False,
                fenced_at=at,
            )
            self._events(session, job, path, reason, run.id, epoch=fence.epoch)
        return replace(
            written,
            current_run=replace(run, state=RunState.LOST, reason=reason, ended_at=at, fenced_at=at),
        )

    def record_drain(
        self, job: JobRecord, fence: Fence, *, deadline: datetime, reason: str
    ) -> JobRecord:
        run = _open_run(job)
        path = [JobState.STOPPING] if job.state != JobState.STOPPING else []
        _walk(job.state, path)
        message = f"stopping gracefully: {reason}"
        with self._store.transaction() as session:
            written = self._write_job(session, job, fence, JobState.STOPPING, message)
            self._write_run(session, run, drain_deadline=deadline)
            self._events(
                session,
                job,
                path,
                message,
                run.id,
                note=None if path else message,
                epoch=fence.epoch,
            )
        return replace(written, current_run=replace(run, drain_deadline=deadline))

    def roll_back(self, job: JobRecord, fence: Fence, *, revision: int, reason: str) -> JobRecord:
        from scheduler.decisions import revisions
        from scheduler.store import jobs as jobs_store
        from scheduler.store.revisions import revision_of

        with self._store.transaction() as session:
            target = revision_of(session, job.id, job.name, revision)
            result = session.execute(  # the fence and the version, as every ledger write
                update(Job)
                .where(Job.id == job.id, Job.version == job.version, *_owned_by(fence))
                .values(upgrade_deadline=None, upgrade_from=None)
                .execution_options(synchronize_session=False)
            )
            if result.rowcount != 1:  # type: ignore[attr-defined]
                self._refuse(session, job, fence)
            changes = revisions.rollback_changes(revisions.spec_of(job), target.spec)
            written = jobs_store.update_job_spec(
                session,
                job.name,
                changes,
                expected_version=None,
                cause=self._cause,
                node_id=self._node_id,
                grace_seconds=job.grace_seconds,
                rollback_of=revision,
            )
            self._events(
                session, job, [], reason, job.current_run_id, note=reason, epoch=fence.epoch
            )
        return written

    def finish_upgrade(self, job: JobRecord, fence: Fence, *, reason: str) -> JobRecord:
        with self._store.transaction() as session:
            written = self._write_job(
                session,
                job,
                fence,
                job.state,
                job.state_reason,
                upgrade_deadline=None,
                upgrade_from=None,
            )
            self._events(
                session, job, [], reason, job.current_run_id, note=reason, epoch=fence.epoch
            )
        return written

    def add_event(self, job: JobRecord, message: str, *, run_id: int | None = None) -> None:
        with self._store.transaction() as session:
            self._events(session, job, [], message, run_id, note=message)

    # -- the statements ------------------------------------------------------------------------

    def _write_job(
        self,
        session: Session,
        job: JobRecord,
        fence: Fence,
        state: JobState,
        reason: str,
        **fields: Any,
    ) -> JobRecord:
        """The fenced, version-conditional job write every ledger write starts with."""
        now = self._clock()
        values: dict[str, Any] = {
            "state": state.value,
            "version": job.version + 1,
            "updated_at": now,
            **fields,
        }
        if reason != job.state_reason:
            values["state_reason"] = reason
        result = session.execute(
            update(Job)
            .where(Job.id == job.id, Job.version == job.version, *_owned_by(fence))
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            self._refuse(session, job, fence)
        changes: dict[str, Any] = {
            "state": state,
            "state_reason": reason,
            "version": job.version + 1,
            "updated_at": now,
        }
        for key, value in fields.items():
            changes[{"cluster_name": "cluster"}.get(key, key)] = value
        return replace(job, **changes)

    def _write_run(self, session: Session, run: RunRecord, **values: Any) -> None:
        result = session.execute(
            update(Run)
            .where(Run.id == run.id, Run.state.in_(_OPEN_RUN_STATES))
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if result.rowcount != 1:  # type: ignore[attr-defined]
            raise StaleWrite(f"run {run.id} is already closed or gone")

    @staticmethod
    def _refuse(session: Session, job: JobRecord, fence: Fence) -> NoReturn:
        """The fenced write matched nothing: NotOwner, or StaleWrite when only the version moved."""
        row = session.execute(
            select(Job.owner, Job.owner_epoch, Job.version).where(Job.id == job.id)
        ).first()
        if row is None or (row[0], row[1]) != (fence.node_id, fence.epoch):
            raise NotOwner(
                f"job {job.name!r} is no longer owned by {fence.node_id} under epoch {fence.epoch}"
            )
        raise StaleWrite(f"job {job.name!r} changed since version {job.version}")

    def _events(
        self,
        session: Session,
        job: JobRecord,
        path: Sequence[JobState | tuple[JobState, str]],
        reason: str,
        run_id: int | None,
        *,
        note: str | None = None,
        epoch: int | None = None,
    ) -> None:
        """One event per state passed through (and ``note``), in one INSERT; ``epoch``: the
        claim's the fenced write of the same transaction proved."""
        now = self._clock()
        rows: list[dict[str, Any]] = []
        before = job.state
        for step in path:
            state, message = step if isinstance(step, tuple) else (step, reason)
            if state == before:
                continue
            rows.append(
                self._event(job, run_id, now, before.value, state.value, message, epoch=epoch)
            )
            before = state
        if note is not None:
            rows.append(self._event(job, run_id, now, None, None, note, epoch=epoch))
        if rows:
            session.execute(insert(JobEvent), rows)

    def _event(
        self,
        job: JobRecord,
        run_id: int | None,
        at: datetime,
        from_state: str | None,
        to_state: str | None,
        message: str,
        *,
        epoch: int | None = None,
    ) -> dict[str, Any]:
        return {
            "job_id": job.id,
            "run_id": run_id,
            "at": at,
            "from_state": from_state,
            "to_state": to_state,
            "cause": self._cause,
            "message": message,
            "node_id": self._node_id,
            "owner_epoch": epoch,
        }


def _walk(state: JobState, path: Sequence[JobState]) -> JobState:
    """The state at the end of ``path``, each step a legal transition (IllegalTransition)."""
    for step in path:
        if step != state:
            transition(state, step)
            state = step
    return state


def _open_run(job: JobRecord) -> RunRecord:
    run = job.current_run
    if run is None or run.state.is_final:
        raise StaleWrite(f"job {job.name!r} has no open run")
    return run
