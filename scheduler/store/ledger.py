"""The ledger: the fenced transactions the reconciler acts through (DESIGN §2, invariant 3).

Claiming a pool slot's jobs, reading the jobs to reconcile, proving a claim, conditional state
transitions, and runs (intent, outcome, close). Every write that acts on a job is conditional on
the version the caller read and, with a fence, on the claim still owning the job: StaleWrite or
NotOwner otherwise, and nothing changes.

Fencing tokens are stored hashed, like API tokens: ``runs.fencing_token`` holds the SHA-256 of
the run's token (``scheduler.core.ledger.fencing_digest``), never the token. The token is minted
with the write that records the run (or reissues it) and returned once, on the record ``apply``
gives back (``RunRecord.fencing_secret``), for the submission to carry to the driver; a fence
check hashes the token it is shown and compares digests. So whoever reads the store (a backup, a
driver that got at the file) learns no token that passes a fence check.

A run whose submission was never recorded is the one case where a node needs a token it did not
mint: it takes the run over, finds nothing of it on the cluster and submits it. Of the two ways
to give that node a token -- derive every token from the deployment secret and a stored nonce
(``HMAC(secret, run id + nonce)``), or mint a fresh one with a fenced write before the
resubmission (``Reissue``) -- the second is taken: the store plus the deployment secret still
give no token, and a driver of the lost first submission, if it exists after all (a cluster
slow to list it), holds a token no run has any more, so its next fence check stops it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any, NoReturn

from sqlalchemy import case, func, insert, literal, or_, select, tuple_, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from scheduler.core.clock import utcnow
from scheduler.core.errors import (
    NotFound,
    NotOwner,
    StaleWrite,
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
from scheduler.core.ownership import Claim, Fence
from scheduler.core.records import Failures, JobRecord, RunRecord
from scheduler.core.states import DesiredState, JobState, RunState, transition
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
    fencing_token: str | None = None,
) -> RunRecord:
    """Record the intent to submit a new run (state SUBMITTING) with a fencing token (fresh
    unless given; the store keeps its digest, the record returned carries it)."""
    token = fencing_token or new_fencing_token()
    last = session.scalar(select(func.max(Run.attempt)).where(Run.job_id == job.id)) or 0
    run = Run(
        job_id=job.id,
        attempt=last + 1,
        generation=job.generation,
        cluster_name=cluster,
        node_id=node_id,
        owner_epoch=owner_epoch,
        fencing_token=fencing_digest(token),
        app_name="",
        checkpoint_location=checkpoint_location,
        state=RunState.SUBMITTING.value,
        reason="",
        created_at=(created := utcnow()),
        submit_intent_at=created,
    )
    session.add(run)
    session.flush()
    run.app_name = app_name_for(job.name, run.id)
    session.flush()
    return replace(run_record(run, job.name), fencing_secret=token)


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
    return replace(run_record(row, run.job_name), fencing_secret=run.fencing_secret)


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

    def apply(self, fence: Fence, writes: Sequence[Write]) -> list[JobRecord]:
        """One transaction: the intents' runs inserted (one INSERT, and one SELECT of their ids
        for more than one), one fenced UPDATE of the jobs that change (another for proofs), one
        UPDATE of the runs written, one event INSERT, one COMMIT: no read before a write. A row
        count short of the writes rolls it all back; one read then tells NotOwner from
        StaleWrite."""
        if not writes:
            return []
        if len({w.job.id for w in writes}) != len(writes):
            raise StaleWrite("a job appears twice in one apply")
        now = self._clock()
        effects = [effect_of(w) for w in writes if not isinstance(w, Intent)]
        intents = [w for w in writes if isinstance(w, Intent)]
        restored: dict[int, JobRecord] = {}
        with self._store.transaction() as session:
            if intents:
                runs = self._insert_runs(session, fence, intents, now)
                effects += [effect_of(i, runs[i.job.id]) for i in intents]
            self._write_jobs(session, fence, [e for e in effects if e.bumps], now)
            self._write_jobs(session, fence, [e for e in effects if not e.bumps], None)
            self._write_runs(session, [e for e in effects if e.run_fields is not None])
            for e in effects:
                if e.restore is not None:
                    restored[e.job.id] = self._restore(session, e.job, e.restore)
            rows = [
                self._event(e.job, e.run_id, now, frm, to, message, epoch=fence.epoch)
                for e in effects
                for frm, to, message in e.events
            ]
            if rows:
                session.execute(insert(JobEvent), rows)
        by_job = {e.job.id: e for e in effects}
        return [restored.get(w.job.id) or by_job[w.job.id].written(now) for w in writes]

    def add_event(self, job: JobRecord, message: str, *, run_id: int | None = None) -> None:
        with self._store.transaction() as session:
            session.execute(
                insert(JobEvent), [self._event(job, run_id, self._clock(), None, None, message)]
            )

    # -- the statements ------------------------------------------------------------------------

    def _insert_runs(
        self, session: Session, fence: Fence, intents: Sequence[Intent], now: datetime
    ) -> dict[int, RunRecord]:
        """The intents' new runs (SUBMITTING, a fresh fencing token each), by job id: one
        INSERT, and for several one SELECT of their ids (MySQL has no INSERT ... RETURNING)."""
        attempts = {i.job.id: i.job.current_run.attempt for i in intents if i.job.current_run}
        unknown = [i.job.id for i in intents if i.job.current_run is None and i.job.current_run_id]
        if unknown:  # a current run the read did not carry: its attempt is read
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
                "fencing_token": fencing_digest(i.fencing_token),
                # the name is written with the submission id (it is derived from the run id
                # until then: scheduler.store.mapping), which saves a statement here
                "app_name": "",
                "checkpoint_location": i.checkpoint_location,
                "state": RunState.SUBMITTING.value,
                "reason": "",
                "counts_as_failure": False,
                "created_at": now,
                "submit_intent_at": now,
            }
            for i in intents
        ]
        try:
            if len(values) == 1:
                inserted = session.execute(insert(Run).values(**values[0]))
                ids = {values[0]["job_id"]: int(inserted.inserted_primary_key[0])}  # type: ignore[attr-defined]
            else:
                session.execute(insert(Run), values)
                keys = [(v["job_id"], v["attempt"]) for v in values]
                ids = {
                    int(job_id): int(run_id)
                    for job_id, run_id in session.execute(
                        select(Run.job_id, Run.id).where(tuple_(Run.job_id, Run.attempt).in_(keys))
                    )
                }
        except IntegrityError as exc:  # that attempt exists: a job moved on meanwhile
            raise StaleWrite("a job of the intents changed meanwhile") from exc
        if len(ids) != len(intents):
            raise StaleWrite("the runs of the intents were not all recorded")
        runs = {}
        for i, v in zip(intents, values, strict=True):
            run_id = ids[i.job.id]
            runs[i.job.id] = RunRecord(
                id=run_id,
                job_name=i.job.name,
                attempt=int(v["attempt"]),
                generation=i.job.generation,
                cluster=i.cluster,
                node_id=self._node_id,
                owner_epoch=fence.epoch,
                fencing_token=str(v["fencing_token"]),
                fencing_secret=i.fencing_token,
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
                submit_intent_at=now,
            )
        return runs

    def _write_jobs(
        self, session: Session, fence: Fence, effects: Sequence[Effect], now: datetime | None
    ) -> None:
        """One fenced UPDATE of the effects' jobs, each at the version its writer read;
        ``now``: the version and ``updated_at`` bumped (None: proofs, and a restore's clear)."""
        if not effects:
            return
        values = _per_row(
            _JOBS,
            _JOBS.c.id,
            [
                (e.job.id, {_JOB_COLUMNS.get(k, k): v for k, v in e.job_fields.items()})
                for e in effects
            ],
        )
        if now is not None:
            values.update(version=Job.version + 1, updated_at=now)
        if not values:  # a proof: changes nothing (and on MySQL locks the rows)
            values["owner_epoch"] = Job.owner_epoch
        version = _per_row(
            _JOBS, _JOBS.c.id, [(e.job.id, {"version": e.job.version}) for e in effects]
        )
        result = session.execute(
            update(Job)
            .where(
                Job.id.in_([e.job.id for e in effects]),
                Job.version == version["version"],
                *_owned_by(fence),
            )
            .values(**values)
            .execution_options(synchronize_session=False)
        )
        if result.rowcount != len(effects):  # type: ignore[attr-defined]
            self._refuse(session, [e.job for e in effects], fence)

    def _write_runs(self, session: Session, effects: Sequence[Effect]) -> None:
        """One UPDATE of the effects' runs, each only while it is still open."""
        if not effects:
            return
        rows = []
        for e in effects:
            assert e.run_id is not None and e.run_fields is not None
            columns = dict(e.run_fields)
            columns.pop("fencing_secret", None)  # the token itself is never stored
            if "submission_id" in columns and e.job.current_run is not None:
                columns["app_name"] = e.job.current_run.app_name  # stored with the submission
            rows.append((e.run_id, columns))
        result = session.execute(
            update(Run)
            .where(Run.id.in_([run_id for run_id, _ in rows]), Run.state.in_(_OPEN_RUN_STATES))
            .values(**_per_row(Run.__table__, Run.__table__.c.id, rows))
            .execution_options(synchronize_session=False)
        )
        if result.rowcount != len(rows):  # type: ignore[attr-defined]
            raise StaleWrite(f"a run of {len(rows)} is already closed or gone")

    def _restore(self, session: Session, job: JobRecord, revision: int) -> JobRecord:
        """Revision ``revision``'s spec as the job's next revision (``RevisionRestore``)."""
        from scheduler.decisions import revisions
        from scheduler.store import jobs as jobs_store
        from scheduler.store.revisions import revision_of

        target = revision_of(session, job.id, job.name, revision)
        return jobs_store.update_job_spec(
            session,
            job.name,
            revisions.rollback_changes(revisions.spec_of(job), target.spec),
            expected_version=None,
            cause=self._cause,
            node_id=self._node_id,
            grace_seconds=job.grace_seconds,
            rollback_of=revision,
        )

    @staticmethod
    def _refuse(session: Session, jobs: Sequence[JobRecord], fence: Fence) -> NoReturn:
        """A fenced write matched fewer rows than it wrote: NotOwner when the fence does not
        hold for one of the jobs, else StaleWrite (a version moved)."""
        owned = set(
            session.scalars(
                select(Job.id).where(Job.id.in_([j.id for j in jobs]), *_owned_by(fence))
            )
        )
        lost = [j for j in jobs if j.id not in owned]
        if lost:
            raise NotOwner(
                f"job {lost[0].name!r} is no longer owned by {fence.node_id} under epoch "
                f"{fence.epoch}" + (f" ({len(lost)} of {len(jobs)} jobs)" if len(jobs) > 1 else "")
            )
        if len(jobs) == 1:
            raise StaleWrite(f"job {jobs[0].name!r} changed since version {jobs[0].version}")
        raise StaleWrite(f"a job of {len(jobs)} changed since it was read")

    def _event(
        self,
        job: JobRecord,
        run_id: int | None,
        at: datetime,
        from_state: JobState | None,
        to_state: JobState | None,
        message: str,
        *,
        epoch: int | None = None,
    ) -> dict[str, Any]:
        """One event row; ``epoch``: the claim's the fenced write of the same transaction
        proved (None: an unfenced event)."""
        return {
            "job_id": job.id,
            "run_id": run_id,
            "at": at,
            "from_state": None if from_state is None else from_state.value,
            "to_state": None if to_state is None else to_state.value,
            "cause": self._cause,
            "message": message,
            "node_id": self._node_id,
            "owner_epoch": epoch,
        }


#: JobRecord field -> jobs column, where they differ
_JOB_COLUMNS = {"cluster": "cluster_name"}


def _per_row(table: Any, key: Any, rows: Sequence[tuple[int, Mapping[str, Any]]]) -> dict[str, Any]:
    """The SET clause that gives each row (by ``key``) its own values: a column every row sets
    to one value gets that value, else a CASE on the key (rows that do not set it keep theirs)."""
    values: dict[str, Any] = {}
    for name in dict.fromkeys(k for _, columns in rows for k in columns):
        column = table.c[name]
        given = {row: _db(columns[name]) for row, columns in rows if name in columns}
        first = next(iter(given.values()))
        if len(given) == len(rows) and all(
            type(v) is type(first) and v == first for v in given.values()
        ):
            values[name] = first
            continue
        whens = {row: literal(value, column.type) for row, value in given.items()}
        values[name] = case(whens, value=key, else_=column)
    return values


def _db(value: Any) -> Any:
    return value.value if isinstance(value, JobState | RunState) else value
