"""Repository functions: every SQL statement of the scheduler. Each takes a session; the caller
owns the transaction. Writes that act on a job are conditional (``WHERE version = :seen``) and
raise StaleWrite when the row changed underneath: the caller re-reads and decides again.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from scheduler import catalog, storage
from scheduler.errors import (
    AlreadyExists,
    Conflict,
    InvalidInput,
    NotFound,
    NotOwner,
    StaleWrite,
)
from scheduler.ownership import Claim, Fence
from scheduler.records import (
    AuditRecord,
    ClusterRecord,
    EventRecord,
    GroupRecord,
    JobRecord,
    JobSpec,
    RunRecord,
)
from scheduler.states import DesiredState, JobState, Priority, RunState, transition
from scheduler.store.models import AuditEntry, Cluster, Group, Job, JobEvent, Run, utcnow

# -- conversions --------------------------------------------------------------------------------


def _run_record(run: Run, job_name: str) -> RunRecord:
    return RunRecord(
        id=run.id,
        job_name=job_name,
        attempt=run.attempt,
        generation=run.generation,
        cluster=run.cluster_name,
        node_id=run.node_id,
        owner_epoch=run.owner_epoch,
        fencing_token=run.fencing_token,
        app_name=run.app_name,
        checkpoint_location=run.checkpoint_location,
        submission_id=run.submission_id,
        app_id=run.app_id,
        state=RunState(run.state),
        reason=run.reason,
        exit_code=run.exit_code,
        created_at=run.created_at,
        submitted_at=run.submitted_at,
        started_at=run.started_at,
        ended_at=run.ended_at,
    )


def _job_record(job: Job, current_run: Run | None = None) -> JobRecord:
    return JobRecord(
        id=job.id,
        name=job.name,
        group=job.group_name,
        team=job.team,
        business=job.business,
        priority=Priority(job.priority),
        entrypoint=job.entrypoint,
        args=tuple(job.args or ()),
        conf=dict(job.conf or {}),
        checkpoint_location=job.checkpoint_location,
        desired_state=DesiredState(job.desired_state),
        state=JobState(job.state),
        state_reason=job.state_reason,
        cluster=job.cluster_name,
        current_run_id=job.current_run_id,
        generation=job.generation,
        attempts_reset_at=job.attempts_reset_at,
        not_before=job.not_before,
        owner=job.owner,
        owner_epoch=job.owner_epoch,
        version=job.version,
        created_at=job.created_at,
        updated_at=job.updated_at,
        current_run=_run_record(current_run, job.name) if current_run is not None else None,
    )


def _cluster_record(c: Cluster) -> ClusterRecord:
    return ClusterRecord(
        name=c.name,
        kind=c.kind,
        master_url=c.master_url,
        rest_url=c.rest_url,
        ui_url=c.ui_url,
        az=c.az,
        cloud=c.cloud,
        storage_root=c.storage_root,
        health=c.health,
        max_concurrent_submissions=c.max_concurrent_submissions,
        max_running_apps=c.max_running_apps,
        max_cores=c.max_cores,
        version=c.version,
        created_at=c.created_at,
        updated_at=c.updated_at,
    )


# -- clusters and groups ------------------------------------------------------------------------


def _group_record(g: Group) -> GroupRecord:
    return GroupRecord(
        name=g.name,
        primary_cluster=g.primary_cluster,
        failover_cluster=g.failover_cluster,
        version=g.version,
        created_at=g.created_at,
        updated_at=g.updated_at,
    )


def _cluster_spec(c: Cluster) -> catalog.ClusterSpec:
    return catalog.ClusterSpec(
        kind=c.kind,
        storage_root=c.storage_root,
        master_url=c.master_url,
        rest_url=c.rest_url,
        ui_url=c.ui_url,
        az=c.az,
        cloud=c.cloud,
        max_concurrent_submissions=c.max_concurrent_submissions,
        max_running_apps=c.max_running_apps,
        max_cores=c.max_cores,
    )


def _spec_values(spec: catalog.ClusterSpec) -> dict[str, Any]:
    return {name: getattr(spec, name) for name in catalog.CLUSTER_FIELDS}


def _check_catalog_version(kind: str, row: Cluster | Group, expected_version: int | None) -> None:
    if expected_version is not None and row.version != expected_version:
        from scheduler.errors import PreconditionFailed

        raise PreconditionFailed(
            f"{kind} {row.name!r} is at version {row.version}, not {expected_version}"
        )


def _load_cluster(session: Session, name: str, *, for_update: bool = False) -> Cluster:
    stmt = select(Cluster).where(Cluster.name == name)
    if for_update:
        stmt = stmt.with_for_update()
    cluster = session.scalars(stmt).first()
    if cluster is None:
        raise NotFound(f"no cluster named {name!r}")
    return cluster


def _load_group(session: Session, name: str, *, for_update: bool = False) -> Group:
    stmt = select(Group).where(Group.name == name)
    if for_update:
        stmt = stmt.with_for_update()
    group = session.scalars(stmt).first()
    if group is None:
        raise NotFound(f"no group named {name!r}")
    return group


def ensure_cluster(session: Session, name: str, **fields: Any) -> ClusterRecord:
    """Create the cluster if it does not exist (existing ones are left as they are)."""
    cluster = session.get(Cluster, name)
    if cluster is None:
        cluster = Cluster(name=name, **fields)
        session.add(cluster)
        session.flush()
    return _cluster_record(cluster)


def ensure_group(
    session: Session, name: str, primary_cluster: str, failover_cluster: str | None = None
) -> GroupRecord:
    group = session.get(Group, name)
    if group is None:
        group = Group(name=name, primary_cluster=primary_cluster, failover_cluster=failover_cluster)
        session.add(group)
        session.flush()
    return _group_record(group)


def get_cluster(session: Session, name: str) -> ClusterRecord:
    cluster = session.get(Cluster, name)
    if cluster is None:
        raise NotFound(f"no cluster named {name!r}")
    return _cluster_record(cluster)


def list_clusters(session: Session) -> list[ClusterRecord]:
    return [_cluster_record(c) for c in session.scalars(select(Cluster).order_by(Cluster.name))]


def create_cluster(session: Session, name: str, spec: catalog.ClusterSpec) -> ClusterRecord:
    """Add a cluster; its storage root may neither contain nor lie inside another's (Conflict)."""
    catalog.validate_cluster_name(name)
    spec = catalog.validate_cluster(spec)
    if session.get(Cluster, name) is not None:
        raise AlreadyExists(f"a cluster named {name!r} already exists")
    _check_root_is_free(session, name, spec.storage_root)
    now = utcnow()
    cluster = Cluster(
        name=name,
        **_spec_values(spec),
        health=catalog.ClusterHealth.NORMAL.value,
        version=1,
        created_at=now,
        updated_at=now,
    )
    session.add(cluster)
    try:
        session.flush()
    except IntegrityError as exc:  # a concurrent create of the same name
        raise AlreadyExists(f"a cluster named {name!r} already exists") from exc
    return _cluster_record(cluster)


def update_cluster(
    session: Session, name: str, changes: Mapping[str, Any], *, expected_version: int | None
) -> ClusterRecord:
    """Change writable fields (``catalog.CLUSTER_FIELDS``); bumps the version if anything changed.

    Conflict when ``storage_root`` or ``kind`` would change while jobs are live on the cluster,
    or ``storage_root`` while a job's explicit checkpoint location lies under the old root.
    Checkpoints are never moved: a job started after the change begins under the new root.
    """
    cluster = _load_cluster(session, name, for_update=True)
    _check_catalog_version("cluster", cluster, expected_version)
    spec = catalog.validate_cluster(catalog.spec_with(_cluster_spec(cluster), dict(changes)))
    changed = {k: v for k, v in _spec_values(spec).items() if getattr(cluster, k) != v}
    if not changed:
        return _cluster_record(cluster)
    if "storage_root" in changed or "kind" in changed:
        what = "storage_root" if "storage_root" in changed else "kind"
        busy = _live_jobs_on(session, cluster)
        if busy:
            raise Conflict(
                f"cannot change {what} of cluster {name!r} while jobs are live on it: "
                + _names(busy)
            )
    if "storage_root" in changed:
        _check_root_is_free(session, name, spec.storage_root)
        old_root = storage.parse_location(cluster.storage_root, "storage_root")
        pinned = [
            job_name
            for job_name, location in session.execute(
                select(Job.name, Job.checkpoint_location).where(Job.checkpoint_location != "")
            )
            if storage.parse_location(location).within(old_root)
        ]
        if pinned:
            raise Conflict(
                f"cannot change storage_root of cluster {name!r}: these jobs set a "
                f"checkpoint_location under it: {_names(pinned)}"
            )
    for key, value in changed.items():
        setattr(cluster, key, value)
    cluster.version += 1
    cluster.updated_at = utcnow()
    session.flush()
    return _cluster_record(cluster)


def _check_root_is_free(session: Session, name: str, root: str) -> None:
    others = [_cluster_record(c) for c in session.scalars(select(Cluster)) if c.name != name]
    clash = storage.overlapping_root(root, others)
    if clash is not None:
        raise Conflict(
            f"storage_root {root!r} overlaps the storage root of cluster {clash.name!r} "
            f"({clash.storage_root}): every cluster needs a root of its own"
        )


def _live_jobs_on(session: Session, cluster: Cluster) -> list[str]:
    """Jobs not at rest on ``cluster``, or queued in a group whose primary cluster it is."""
    at_rest = [s.value for s in (JobState.STOPPED, JobState.FINISHED, JobState.FAILED)]
    primary_of = select(Group.name).where(Group.primary_cluster == cluster.name)
    stmt = (
        select(Job.name)
        .where(
            Job.state.not_in(at_rest),
            (Job.cluster_name == cluster.name)
            | (Job.cluster_name.is_(None) & Job.group_name.in_(primary_of)),
        )
        .order_by(Job.name)
    )
    return list(session.scalars(stmt))


def _names(names: list[str], most: int = 5) -> str:
    shown = ", ".join(repr(n) for n in names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def get_group(session: Session, name: str) -> GroupRecord:
    return _group_record(_load_group(session, name))


def list_groups(session: Session) -> list[GroupRecord]:
    return [_group_record(g) for g in session.scalars(select(Group).order_by(Group.name))]


def _check_group_clusters(session: Session, primary: str, failover: str | None) -> None:
    catalog.check_group(primary, failover)
    for role, cluster in (("primary_cluster", primary), ("failover_cluster", failover)):
        if cluster is not None and session.get(Cluster, cluster) is None:
            raise InvalidInput(f"{role}: no cluster named {cluster!r}")


def create_group(
    session: Session, name: str, *, primary_cluster: str, failover_cluster: str | None = None
) -> GroupRecord:
    catalog.validate_group_name(name)
    _check_group_clusters(session, primary_cluster, failover_cluster)
    if session.get(Group, name) is not None:
        raise AlreadyExists(f"a group named {name!r} already exists")
    now = utcnow()
    group = Group(
        name=name,
        primary_cluster=primary_cluster,
        failover_cluster=failover_cluster,
        version=1,
        created_at=now,
        updated_at=now,
    )
    session.add(group)
    try:
        session.flush()
    except IntegrityError as exc:
        raise AlreadyExists(f"a group named {name!r} already exists") from exc
    return _group_record(group)


GROUP_FIELDS = frozenset({"primary_cluster", "failover_cluster"})


def update_group(
    session: Session, name: str, changes: Mapping[str, Any], *, expected_version: int | None
) -> GroupRecord:
    """Change a group's clusters. The primary cluster only changes while no job of the group is
    live (moving live jobs is a failover, not an edit)."""
    unknown = set(changes) - GROUP_FIELDS
    if unknown:
        raise InvalidInput(f"fields cannot be changed: {', '.join(sorted(unknown))}")
    group = _load_group(session, name, for_update=True)
    _check_catalog_version("group", group, expected_version)
    primary = changes.get("primary_cluster", group.primary_cluster)
    failover = changes.get("failover_cluster", group.failover_cluster)
    if primary is None:
        raise InvalidInput("primary_cluster cannot be null")
    _check_group_clusters(session, primary, failover)
    if (primary, failover) == (group.primary_cluster, group.failover_cluster):
        return _group_record(group)
    if primary != group.primary_cluster:
        at_rest = [s.value for s in (JobState.STOPPED, JobState.FINISHED, JobState.FAILED)]
        live = list(
            session.scalars(
                select(Job.name)
                .where(Job.group_name == name, Job.state.not_in(at_rest))
                .order_by(Job.name)
            )
        )
        if live:
            raise Conflict(
                f"cannot change the primary cluster of group {name!r} while its jobs are live "
                f"({_names(live)}); stop them or run a failover"
            )
    group.primary_cluster = primary
    group.failover_cluster = failover
    group.version += 1
    group.updated_at = utcnow()
    session.flush()
    return _group_record(group)


def validate_checkpoint_location(session: Session, group: str, location: str) -> str:
    """A job's explicit checkpoint location, normalised; "" stays "" (the cluster default).

    It must lie strictly under the storage root of the group's primary cluster and under no
    other cluster's root (``storage.check_writable``); InvalidInput otherwise.
    """
    if not location:
        return ""
    row = session.get(Group, group)
    if row is None:
        raise InvalidInput(f"no group named {group!r}")
    clusters = list_clusters(session)
    primary = next(c for c in clusters if c.name == row.primary_cluster)
    return storage.check_writable(location, primary, clusters)


# -- jobs ---------------------------------------------------------------------------------------


def _load_job(session: Session, name: str, *, for_update: bool = False) -> Job:
    stmt = select(Job).where(Job.name == name)
    if for_update:
        stmt = stmt.with_for_update()
    job = session.scalars(stmt).first()
    if job is None:
        raise NotFound(f"no job named {name!r}")
    return job


def _with_run(session: Session, job: Job) -> JobRecord:
    run = session.get(Run, job.current_run_id) if job.current_run_id is not None else None
    return _job_record(job, run)


def _with_current_runs(session: Session, jobs: list[Job]) -> list[JobRecord]:
    """Records of ``jobs`` with their current runs, loaded in one query."""
    run_ids = [j.current_run_id for j in jobs if j.current_run_id is not None]
    runs = (
        {r.id: r for r in session.scalars(select(Run).where(Run.id.in_(run_ids)))}
        if run_ids
        else {}
    )
    return [
        _job_record(j, runs.get(j.current_run_id) if j.current_run_id is not None else None)
        for j in jobs
    ]


def get_job(session: Session, name: str) -> JobRecord:
    return _with_run(session, _load_job(session, name))


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
        created_at=now,
        updated_at=now,
    )
    session.add(job)
    try:
        session.flush()
    except IntegrityError as exc:  # a concurrent create of the same name
        raise AlreadyExists(f"a job named {spec.name!r} already exists") from exc
    _add_event(session, job, None, None, state, cause=cause, message="created", node_id=node_id)
    return _job_record(job)


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
) -> tuple[list[JobRecord], int]:
    conditions = []
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
    records = _with_current_runs(session, jobs)
    return records, total


def _check_version(job: Job, expected_version: int | None) -> None:
    if expected_version is not None and job.version != expected_version:
        from scheduler.errors import PreconditionFailed

        raise PreconditionFailed(
            f"job {job.name!r} is at version {job.version}, not {expected_version}"
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
    job = _load_job(session, name, for_update=True)
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
    job.updated_at = utcnow()
    _add_event(
        session,
        job,
        None,
        None,
        cause=cause,
        message="spec changed: " + ", ".join(sorted(changes)),
        node_id=node_id,
    )
    return _with_run(session, job)


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
    """Record an operator's start/stop/restart (decided by ``states.command_effect``)."""
    job = _load_job(session, name, for_update=True)
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
    _add_event(
        session,
        job,
        job.current_run_id,
        old_state,
        state,
        cause=cause,
        message=message,
        node_id=node_id,
    )
    return _with_run(session, job)


def delete_job(
    session: Session, name: str, *, expected_version: int | None, refuse_if_running: bool = True
) -> JobRecord:
    job = _load_job(session, name, for_update=True)
    _check_version(job, expected_version)
    record = _with_run(session, job)
    if refuse_if_running and (
        job.desired_state == DesiredState.RUNNING or JobState(job.state).has_live_run
    ):
        raise Conflict(
            f"job {name!r} is {job.state} (desired {job.desired_state}): stop it before deleting"
        )
    session.delete(job)
    session.flush()
    return record


def jobs_to_reconcile(
    session: Session, groups: Iterable[str] | None, fence: Fence | None = None
) -> list[JobRecord]:
    """Jobs that may need work: desired RUNNING or not at rest; with ``fence``, only its own."""
    at_rest = [s.value for s in (JobState.STOPPED, JobState.FINISHED, JobState.FAILED)]
    stmt = select(Job).where(
        (Job.desired_state == DesiredState.RUNNING.value) | Job.state.not_in(at_rest)
    )
    if groups is not None:
        stmt = stmt.where(Job.group_name.in_(list(groups)))
    if fence is not None:
        stmt = stmt.where(*_owned_by(fence))
    jobs = list(session.scalars(stmt.order_by(Job.id)))
    return _with_current_runs(session, jobs)


# -- ownership and fencing (DESIGN §2, invariant 3) ----------------------------------------------


def _owned_by(fence: Fence) -> tuple[Any, ...]:
    return (Job.owner == fence.node_id, Job.owner_epoch == fence.epoch)


def claim_jobs(session: Session, claim: Claim) -> int:
    """Take the group's jobs that hash to this node's pool slot; returns how many changed hands.

    ``CRC32(name) % size = index`` runs in the database (SQLite gets a ``crc32`` function from
    the store). A job already claimed under a newer epoch is left alone: a node with a stale
    view can never take a job back. The version is not bumped: ownership is not a spec change.
    """
    fence = claim.fence
    result = session.execute(
        update(Job)
        .where(
            Job.group_name == claim.group,
            func.crc32(Job.name) % claim.size == claim.index,
            Job.owner_epoch <= fence.epoch,
            or_(Job.owner.is_(None), Job.owner != fence.node_id, Job.owner_epoch < fence.epoch),
        )
        .values(owner=fence.node_id, owner_epoch=fence.epoch)
        .execution_options(synchronize_session=False)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


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


def _add_event(
    session: Session,
    job: Job,
    run_id: int | None,
    from_state: JobState | None,
    to_state: JobState | None = None,
    *,
    cause: str,
    message: str,
    node_id: str,
) -> None:
    session.add(
        JobEvent(
            job_id=job.id,
            run_id=run_id,
            from_state=from_state.value if from_state else None,
            to_state=to_state.value if to_state else None,
            cause=cause,
            message=message,
            node_id=node_id,
        )
    )


def add_job_event(
    session: Session,
    job: JobRecord,
    *,
    cause: str,
    message: str,
    node_id: str,
    run_id: int | None = None,
) -> None:
    """An event that is not a state change (a warning, a retry, an adopted application)."""
    session.add(
        JobEvent(
            job_id=job.id,
            run_id=run_id if run_id is not None else job.current_run_id,
            cause=cause,
            message=message,
            node_id=node_id,
        )
    )


# -- runs ---------------------------------------------------------------------------------------


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
    return _run_record(run, job.name)


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
    return _run_record(row, run.job_name)


def list_runs(
    session: Session, name: str, *, limit: int = 100, offset: int = 0
) -> tuple[list[RunRecord], int]:
    job = _load_job(session, name)
    total = session.scalar(select(func.count()).select_from(Run).where(Run.job_id == job.id)) or 0
    rows = session.scalars(
        select(Run)
        .where(Run.job_id == job.id)
        .order_by(Run.attempt.desc())
        .limit(limit)
        .offset(offset)
    )
    return [_run_record(r, name) for r in rows], total


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


# -- events and audit ---------------------------------------------------------------------------


def list_events(
    session: Session, name: str, *, limit: int = 100, offset: int = 0
) -> tuple[list[EventRecord], int]:
    job = _load_job(session, name)
    total = (
        session.scalar(select(func.count()).select_from(JobEvent).where(JobEvent.job_id == job.id))
        or 0
    )
    rows = session.scalars(
        select(JobEvent)
        .where(JobEvent.job_id == job.id)
        .order_by(JobEvent.id.desc())
        .limit(limit)
        .offset(offset)
    )
    return [
        EventRecord(
            e.id, name, e.run_id, e.at, e.from_state, e.to_state, e.cause, e.message, e.node_id
        )
        for e in rows
    ], total


def add_audit(
    session: Session,
    *,
    actor: str,
    action: str,
    target_kind: str,
    target_name: str,
    detail: Mapping[str, Any] | None = None,
    node_id: str = "",
) -> None:
    session.add(
        AuditEntry(
            actor=actor,
            action=action,
            target_kind=target_kind,
            target_name=target_name,
            detail=dict(detail or {}),
            node_id=node_id,
        )
    )


def list_audit(session: Session, *, limit: int = 100, offset: int = 0) -> list[AuditRecord]:
    rows = session.scalars(
        select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit).offset(offset)
    )
    return [
        AuditRecord(
            a.id, a.at, a.actor, a.action, a.target_kind, a.target_name, dict(a.detail), a.node_id
        )
        for a in rows
    ]


def table_counts(session: Session) -> dict[str, int]:
    """Row counts of the main tables (used by tests to prove bad input changed nothing)."""
    return {
        model.__tablename__: session.scalar(select(func.count()).select_from(model)) or 0
        for model in (Cluster, Group, Job, Run, JobEvent, AuditEntry)
    }
