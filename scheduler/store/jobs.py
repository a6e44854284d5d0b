"""Jobs as the API sees them: create, read, list, spec changes, operator commands, delete, runs.

Each function takes a session; the caller owns the transaction. The reconciler's fenced writes are
in :mod:`scheduler.store.ledger`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from scheduler.errors import (
    AlreadyExists,
    Conflict,
    InvalidInput,
    NotFound,
)
from scheduler.records import (
    JobRecord,
    JobSpec,
    RunRecord,
)
from scheduler.states import DesiredState, JobState, Priority, transition
from scheduler.store.catalog import validate_checkpoint_location
from scheduler.store.journal import add_event
from scheduler.store.mapping import job_record, run_record
from scheduler.store.models import Group, Job, Run, utcnow


def load_job(session: Session, name: str, *, for_update: bool = False) -> Job:
    stmt = select(Job).where(Job.name == name)
    if for_update:
        stmt = stmt.with_for_update()
    job = session.scalars(stmt).first()
    if job is None:
        raise NotFound(f"no job named {name!r}")
    return job


def with_run(session: Session, job: Job) -> JobRecord:
    run = session.get(Run, job.current_run_id) if job.current_run_id is not None else None
    return job_record(job, run)


def with_current_runs(session: Session, jobs: list[Job]) -> list[JobRecord]:
    """Records of ``jobs`` with their current runs, loaded in one query."""
    run_ids = [j.current_run_id for j in jobs if j.current_run_id is not None]
    runs = (
        {r.id: r for r in session.scalars(select(Run).where(Run.id.in_(run_ids)))}
        if run_ids
        else {}
    )
    return [
        job_record(j, runs.get(j.current_run_id) if j.current_run_id is not None else None)
        for j in jobs
    ]


def get_job(session: Session, name: str) -> JobRecord:
    return with_run(session, load_job(session, name))


def create_job(session: Session, spec: JobSpec, *, cause: str, node_id: str) -> JobRecord:
    if session.get(Group, spec.group) is None:
        raise InvalidInput(f"no group named {spec.group!r}")
    if session.scalars(select(Job.id).where(Job.name == spec.name)).first() is not None:
        raise AlreadyExists(f"a job named {spec.name!r} already exists")
    checkpoint = validate_checkpoint_location(session, spec.group, spec.checkpoint_location)
    now = utcnow()
    state = JobState.QUEUED if spec.desired_state == DesiredState.RUNNING else JobState.STOPPED
    job = Job(
        name=spec.name,
        group_name=spec.group,
        team=spec.team,
        business=spec.business,
        priority=spec.priority.value,
        entrypoint=spec.entrypoint,
        args=list(spec.args),
        conf=dict(spec.conf),
        checkpoint_location=checkpoint,
        desired_state=spec.desired_state.value,
        state=state.value,
        state_reason="",
        generation=0,
        attempts_reset_at=now,
        owner_epoch=0,
        version=1,
        spec_version=1,
        created_at=now,
        updated_at=now,
    )
    session.add(job)
    try:
        session.flush()
    except IntegrityError as exc:  # a concurrent create of the same name
        raise AlreadyExists(f"a job named {spec.name!r} already exists") from exc
    add_event(session, job, None, None, state, cause=cause, message="created", node_id=node_id)
    return job_record(job)


def list_jobs(
    session: Session,
    *,
    state: JobState | None = None,
    desired_state: DesiredState | None = None,
    team: str | None = None,
    group: str | None = None,
    cluster: str | None = None,
    limit: int = 100,
    offset: int = 0,
    teams: frozenset[str] | None = None,
) -> tuple[list[JobRecord], int]:
    """``teams``: only jobs of these teams (a caller's visibility; None = every team)."""
    conditions: list[ColumnElement[bool]] = []
    if teams is not None:
        conditions.append(Job.team.in_(sorted(teams)))
    if state is not None:
        conditions.append(Job.state == state.value)
    if desired_state is not None:
        conditions.append(Job.desired_state == desired_state.value)
    if team is not None:
        conditions.append(Job.team == team)
    if group is not None:
        conditions.append(Job.group_name == group)
    if cluster is not None:
        conditions.append(Job.cluster_name == cluster)
    total = session.scalar(select(func.count()).select_from(Job).where(*conditions)) or 0
    jobs = list(
        session.scalars(
            select(Job).where(*conditions).order_by(Job.name).limit(limit).offset(offset)
        )
    )
    records = with_current_runs(session, jobs)
    return records, total


def _check_version(job: Job, expected_version: int | None) -> None:
    """The client's If-Match check: against the *spec* version, which state changes never move
    (a PATCH with the ETag just read must not fail because the job went from QUEUED to
    STARTING meanwhile)."""
    if expected_version is not None and job.spec_version != expected_version:
        from scheduler.errors import PreconditionFailed

        raise PreconditionFailed(
            f"job {job.name!r} is at spec version {job.spec_version}, not {expected_version}"
        )


SPEC_FIELDS = frozenset(
    {"team", "business", "priority", "entrypoint", "args", "conf", "checkpoint_location"}
)


def update_job_spec(
    session: Session,
    name: str,
    changes: Mapping[str, Any],
    *,
    expected_version: int | None,
    cause: str,
    node_id: str,
) -> JobRecord:
    """Apply spec changes; they take effect at the job's next run."""
    unknown = set(changes) - SPEC_FIELDS
    if unknown:
        raise InvalidInput(f"fields cannot be changed: {', '.join(sorted(unknown))}")
    job = load_job(session, name, for_update=True)
    _check_version(job, expected_version)
    if "checkpoint_location" in changes:
        changes = {
            **changes,
            "checkpoint_location": validate_checkpoint_location(
                session, job.group_name, changes["checkpoint_location"]
            ),
        }
    for key, value in changes.items():
        if key == "priority":
            value = Priority(value).value
        elif key == "args":
            value = list(value)
        elif key == "conf":
            value = dict(value)
        setattr(job, key, value)
    job.version += 1
    job.spec_version += 1
    job.updated_at = utcnow()
    add_event(
        session,
        job,
        None,
        None,
        cause=cause,
        message="spec changed: " + ", ".join(sorted(changes)),
        node_id=node_id,
    )
    return with_run(session, job)


def apply_command(
    session: Session,
    name: str,
    *,
    desired: DesiredState,
    state: JobState | None,
    bump_generation: bool,
    reset_attempts: bool,
    expected_version: int | None,
    cause: str,
    node_id: str,
    message: str,
) -> JobRecord:
    """Record an operator's start/stop/restart (decided by ``states.command_effect``).

    ``expected_version`` is checked against the spec version ("act on the spec I reviewed"); a
    command moves the row's ``version`` but not the spec's: it is not a spec change."""
    job = load_job(session, name, for_update=True)
    _check_version(job, expected_version)
    now = utcnow()
    old_state = JobState(job.state)
    job.desired_state = desired.value
    if bump_generation:
        job.generation += 1
    if reset_attempts:
        job.attempts_reset_at = now
        job.not_before = None
    if state is not None and state != old_state:
        job.state = transition(old_state, state).value
        job.state_reason = message
    job.version += 1
    job.updated_at = now
    add_event(
        session,
        job,
        job.current_run_id,
        old_state,
        state,
        cause=cause,
        message=message,
        node_id=node_id,
    )
    return with_run(session, job)


def delete_job(
    session: Session, name: str, *, expected_version: int | None, refuse_if_running: bool = True
) -> JobRecord:
    job = load_job(session, name, for_update=True)
    _check_version(job, expected_version)
    record = with_run(session, job)
    if refuse_if_running and (
        job.desired_state == DesiredState.RUNNING or JobState(job.state).has_live_run
    ):
        raise Conflict(
            f"job {name!r} is {job.state} (desired {job.desired_state}): stop it before deleting"
        )
    session.delete(job)
    session.flush()
    return record


def list_runs(
    session: Session, name: str, *, limit: int = 100, offset: int = 0
) -> tuple[list[RunRecord], int]:
    job = load_job(session, name)
    total = session.scalar(select(func.count()).select_from(Run).where(Run.job_id == job.id)) or 0
    rows = session.scalars(
        select(Run)
        .where(Run.job_id == job.id)
        .order_by(Run.attempt.desc())
        .limit(limit)
        .offset(offset)
    )
    return [run_record(r, name) for r in rows], total
