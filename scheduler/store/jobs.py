"""Jobs as the API sees them: create, read, list, spec changes, operator commands, delete, runs.

Each function takes a session; the caller owns the transaction. The reconciler's fenced writes are
in :mod:`scheduler.store.ledger`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    bindparam,
    delete,
    exists,
    func,
    insert,
    literal_column,
    null,
    select,
    union_all,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from scheduler.core.clock import utcnow
from scheduler.core.errors import (
    AlreadyExists,
    Conflict,
    DroverError,
    InvalidInput,
    NotFound,
)
from scheduler.core.paging import KeyPart, Sort, Window
from scheduler.core.records import (
    JobRecord,
    JobSpec,
    RunRecord,
)
from scheduler.core.states import (
    CommandEffect,
    DesiredState,
    JobState,
    OnStall,
    Priority,
    transition,
)
from scheduler.decisions import leases, revisions, storage
from scheduler.decisions.labels import Op, Requirement, validate_labels
from scheduler.store import paging
from scheduler.store import progress as progress_store
from scheduler.store.catalog import (
    GROUP_ROOTS_COLUMNS,
    GROUP_ROOTS_FROM,
    list_clusters,
    roots_of_group,
    validate_checkpoint_location,
)
from scheduler.store.db import load_one
from scheduler.store.journal import add_event
from scheduler.store.mapping import job_record, run_record
from scheduler.store.models import BusinessQuota, Cluster, Group, Job, JobEvent, JobLabel, Run
from scheduler.store.quotas import (
    DEDICATIONS_WHERE,
    Placements,
    check_job_placement,
    placements_of,
)
from scheduler.store.revisions import add_revision, add_revisions, revision_values


def load_job(session: Session, name: str, *, for_update: bool = False) -> Job:
    stmt = select(Job).where(Job.name == name)
    return load_one(session, stmt, f"no job named {name!r}", for_update=for_update)


def with_run(session: Session, job: Job) -> JobRecord:
    run = session.get(Run, job.current_run_id) if job.current_run_id is not None else None
    return with_progress(session, [job_record(job, run)])[0]


def with_current_runs(session: Session, jobs: list[Job]) -> list[JobRecord]:
    """Records of ``jobs`` with their current runs, loaded in one query."""
    run_ids = [j.current_run_id for j in jobs if j.current_run_id is not None]
    runs = (
        {r.id: r for r in session.scalars(select(Run).where(Run.id.in_(run_ids)))}
        if run_ids
        else {}
    )
    return with_progress(
        session,
        [
            job_record(j, runs.get(j.current_run_id) if j.current_run_id is not None else None)
            for j in jobs
        ],
    )


def with_progress(session: Session, jobs: list[JobRecord]) -> list[JobRecord]:
    """``jobs`` with their current runs' progress (one query for all of them)."""
    known = progress_store.load(session, [j.current_run_id for j in jobs if j.current_run_id])
    return progress_store.attach(jobs, known)


def get_job(session: Session, name: str) -> JobRecord:
    return with_run(session, load_job(session, name))


#: what a creation runs, built once (Core: no ORM objects to make, track and flush)
_JOBS = Job.__table__
_GROUPS = Group.__table__
_QUOTAS = BusinessQuota.__table__
_CLUSTERS = Cluster.__table__
#: what the checks of some creations read, in one statement: of the groups and job names, those
#: that exist (kind 1 a group, with its clusters' artifact roots for the submission policy; 2 a
#: job), and the dedications that concern the businesses and groups (kind 3: the business, and
#: the group it is bound to)
_NO_ROOTS = [null()] * len(GROUP_ROOTS_COLUMNS)
_CREATION_FACTS = union_all(
    select(
        literal_column("1").label("kind"),
        _GROUPS.c.name.label("name"),
        null().label("bound"),
        *GROUP_ROOTS_COLUMNS,
    )
    .select_from(GROUP_ROOTS_FROM)
    .where(_GROUPS.c.name.in_(bindparam("groups", expanding=True))),
    select(literal_column("2"), _JOBS.c.name, null(), *_NO_ROOTS).where(
        _JOBS.c.name.in_(bindparam("names", expanding=True))
    ),
    select(literal_column("3"), _QUOTAS.c.business, _QUOTAS.c.dedicated_group, *_NO_ROOTS).where(
        *DEDICATIONS_WHERE
    ),
    # kind 4: every cluster's storage root (checkpoint keys are relative to them)
    select(literal_column("4"), _CLUSTERS.c.name, _CLUSTERS.c.storage_root, *_NO_ROOTS),
    # kind 5: the jobs checkpointing in the areas the creations may use, and where
    select(literal_column("5"), _JOBS.c.name, _JOBS.c.checkpoint_location, *_NO_ROOTS).where(
        _JOBS.c.checkpoint_area.in_(bindparam("areas", expanding=True))
    ),
)
#: the ids of jobs just inserted, by name, where the store cannot return them from the insert
_IDS_OF_NAMES = select(_JOBS.c.name, _JOBS.c.id).where(
    _JOBS.c.name.in_(bindparam("names", expanding=True))
)
_INSERT_JOB = insert(Job)
#: several jobs inserted, their ids returned (one statement, where the store can)
_INSERT_JOBS_RETURNING = insert(Job).returning(_JOBS.c.name, _JOBS.c.id)
_INSERT_LABEL = insert(JobLabel)
_INSERT_EVENT = insert(JobEvent)


@dataclass
class CreationFacts:
    """What the checks of some creations read (:func:`creation_facts`, one statement for any
    number of them); :meth:`refusal` decides one creation, :meth:`accept` records it so that a
    later one in the same batch finds its name taken."""

    #: of the groups named, those that exist: cluster -> artifact roots of each
    #: (:func:`~scheduler.store.catalog.roots_of_group`)
    groups: Mapping[str, Mapping[str, tuple[str, ...]]]
    #: of the names, those taken (and those accepted since)
    taken: set[str]
    placements: Placements
    #: every cluster with its storage root
    clusters: tuple[SimpleNamespace, ...] = ()
    #: the jobs whose checkpoint may overlap a creation's: (name, location as stored), and
    #: those accepted since with their checkpoint keys
    checkpoints: list[tuple[str, str]] = field(default_factory=list)
    accepted_keys: list[tuple[str, storage.Key]] = field(default_factory=list)

    def refusal(self, spec: JobSpec) -> DroverError | None:
        """Why ``spec`` may not be created (None: it may), checked in this order: its group,
        its name, its placement (dedicated groups)."""
        if spec.group not in self.groups:
            return InvalidInput(f"no group named {spec.group!r}")
        if spec.name in self.taken:
            return AlreadyExists(f"a job named {spec.name!r} already exists")
        placement = self.placements.refusal(spec.business, spec.group)
        return InvalidInput(placement) if placement is not None else None

    def checkpoint_in_use(self, name: str, key: storage.Key) -> bool:
        """Whether another job checkpoints where ``key`` is (read, or accepted since)."""
        stored = (
            (other, storage.checkpoint_key(other, location, self.clusters))
            for other, location in self.checkpoints
            if other != name
        )
        return (
            storage.first_overlap(key, stored) is not None
            or storage.first_overlap(key, self.accepted_keys) is not None
        )

    def accept(self, spec: JobSpec, key: storage.Key | None = None) -> None:
        self.taken.add(spec.name)
        if key is not None:
            self.accepted_keys.append((spec.name, key))


def _candidate_areas(spec: JobSpec) -> set[str]:
    """The areas a creation's checkpoint may lie in, before the roots are known: its own name,
    or any directory of its explicit location (the one right under its root among them)."""
    areas = {spec.name}
    if spec.checkpoint_location:
        try:
            location = storage.parse_location(spec.checkpoint_location, "checkpoint_location")
        except InvalidInput:
            return areas  # refused later, in its turn
        areas.update(part[: storage.MAX_AREA_LENGTH] for part in location.parts)
    return areas


def creation_facts(session: Session, specs: Sequence[JobSpec]) -> CreationFacts:
    groups = sorted({s.group for s in specs})
    wanted = {
        "groups": groups,
        "names": sorted({s.name for s in specs}),
        "businesses": sorted({s.business for s in specs}),
        "areas": sorted(set().union(*(_candidate_areas(s) for s in specs))),
    }
    groups_found: dict[str, Mapping[str, tuple[str, ...]]] = {}
    taken: set[str] = set()
    dedications: list[tuple[str, str]] = []
    clusters: list[SimpleNamespace] = []
    checkpoints: list[tuple[str, str]] = []
    for row in session.connection().execute(_CREATION_FACTS, wanted):
        kind = int(row.kind)
        if kind == 1:
            groups_found[row.name] = roots_of_group(row)
        elif kind == 2:
            taken.add(row.name)
        elif kind == 3:
            dedications.append((row.name, row.bound))
        elif kind == 4:
            clusters.append(SimpleNamespace(name=row.name, storage_root=row.bound))
        else:
            checkpoints.append((row.name, row.bound))
    return CreationFacts(
        groups=groups_found,
        taken=taken,
        placements=placements_of(dedications, groups),
        clusters=tuple(clusters),
        checkpoints=checkpoints,
    )


def checkpoint_claim(
    name: str, location: str, clusters: Sequence[Any]
) -> tuple[storage.Key | None, str]:
    """A job's checkpoint key and area as the store records them (a location under no root:
    no key, area "")."""
    key = storage.checkpoint_key(name, location, clusters)
    return key, storage.checkpoint_area(key) if key is not None else ""


def _in_use(name: str) -> Conflict:
    return Conflict(
        f"the checkpoint location of job {name!r} is in use by another job (the same place, or "
        "one inside the other): choose another"
    )


def check_checkpoint_free(session: Session, name: str, key: storage.Key, area: str) -> None:
    """Conflict when another job checkpoints where ``key`` is (one lookup by area)."""
    clusters = list(session.execute(select(Cluster.name, Cluster.storage_root)))
    rows = session.execute(
        select(Job.name, Job.checkpoint_location).where(
            Job.checkpoint_area == area, Job.name != name
        )
    )
    others = ((other, storage.checkpoint_key(other, loc, clusters)) for other, loc in rows)
    if storage.first_overlap(key, others) is not None:
        raise _in_use(name)


@dataclass(frozen=True)
class Planned:
    """A creation its checks accepted: the spec, its checkpoint location and area as stored,
    and the cause its event and first revision record."""

    spec: JobSpec
    checkpoint: str
    cause: str
    area: str = ""


def plan_creation(
    session: Session, facts: CreationFacts, spec: JobSpec, *, cause: str, anywhere: bool = True
) -> Planned:
    """``spec`` checked against ``facts``, then its checkpoint location (a read, only when it
    names one; under the job's own area unless ``anywhere``: a platform admin's creation) and
    whether another job checkpoints there, then its labels; the error that refuses it raised;
    accepted into ``facts``."""
    refusal = facts.refusal(spec)
    if refusal is not None:
        raise refusal
    checkpoint = validate_checkpoint_location(
        session, spec.group, spec.checkpoint_location, job=None if anywhere else spec.name
    )
    key, area = checkpoint_claim(spec.name, checkpoint, facts.clusters)
    if key is not None and facts.checkpoint_in_use(spec.name, key):
        raise _in_use(spec.name)
    validate_labels(spec.labels)
    facts.accept(spec, key)
    return Planned(spec, checkpoint, cause, area)


def _job_values(planned: Planned, now: datetime) -> dict[str, Any]:
    spec = planned.spec
    state = JobState.QUEUED if spec.desired_state == DesiredState.RUNNING else JobState.STOPPED
    return {
        "name": spec.name,
        "group_name": spec.group,
        "team": spec.team,
        "business": spec.business,
        "priority": spec.priority.value,
        "entrypoint": spec.entrypoint,
        "args": list(spec.args),
        "conf": dict(spec.conf),
        "checkpoint_location": planned.checkpoint,
        "checkpoint_area": planned.area,
        "replicate": spec.replicate,
        "labels": dict(spec.labels),
        "desired_state": spec.desired_state.value,
        "stall_after": spec.stall_after,
        "on_stall": spec.on_stall.value,
        "state": state.value,
        "state_reason": "",
        "generation": 0,
        "attempts_reset_at": now,
        "owner_epoch": 0,
        "version": 1,
        "spec_version": 1,
        "created_at": now,
        "updated_at": now,
    }


def insert_jobs(session: Session, planned: Sequence[Planned], *, node_id: str) -> list[JobRecord]:
    """Write the jobs :func:`plan_creation` accepted, with their labels, first revisions and
    creation events: a statement per kind of row, however many jobs. A name taken meanwhile
    by another node is an IntegrityError (AlreadyExists for a single job)."""
    if not planned:
        return []
    connection = session.connection()
    now = utcnow()
    values = [_job_values(p, now) for p in planned]
    try:
        if len(values) == 1:
            key = connection.execute(_INSERT_JOB, values[0]).inserted_primary_key
            assert key is not None
            ids = {values[0]["name"]: int(key[0])}
        elif connection.dialect.insert_executemany_returning:
            found = connection.execute(_INSERT_JOBS_RETURNING, values)
            ids = {name: int(job_id) for name, job_id in found}
        else:  # MySQL proper: no RETURNING
            connection.execute(_INSERT_JOB, values)
            found = connection.execute(_IDS_OF_NAMES, {"names": [v["name"] for v in values]})
            ids = {name: int(job_id) for name, job_id in found}
    except IntegrityError as exc:  # a concurrent create of the same name
        if len(values) == 1:
            raise AlreadyExists(f"a job named {values[0]['name']!r} already exists") from exc
        raise
    labels = [
        {"job_id": ids[p.spec.name], "key": k, "value": v}
        for p in planned
        for k, v in sorted(p.spec.labels.items())
    ]
    if labels:
        connection.execute(_INSERT_LABEL, labels)
    records: list[JobRecord] = []
    revision_rows: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    for p, row_values in zip(planned, values, strict=True):
        job_id = ids[p.spec.name]
        # the row as the ORM would hold it after its insert: every other column unset (None)
        row = SimpleNamespace(**dict.fromkeys(_COLUMN_NAMES))
        row.__dict__.update(row_values, id=job_id)
        record = job_record(row)  # type: ignore[arg-type]
        records.append(record)
        revision_rows.append(
            revision_values(job_id, 1, revisions.spec_of(record), cause=p.cause, message="created")
        )
        events.append(
            {
                "job_id": job_id,
                "run_id": None,
                "from_state": None,
                "to_state": row_values["state"],
                "cause": p.cause,
                "message": "created",
                "node_id": node_id,
            }
        )
    add_revisions(session, revision_rows)
    connection.execute(_INSERT_EVENT, events[0] if len(events) == 1 else events)
    return records


_COLUMN_NAMES = tuple(column.name for column in _JOBS.c)


def create_job(session: Session, spec: JobSpec, *, cause: str, node_id: str) -> JobRecord:
    """One job created (a batch of one: ``api/creations.py`` makes batches)."""
    planned = plan_creation(session, creation_facts(session, [spec]), spec, cause=cause)
    return insert_jobs(session, [planned], node_id=node_id)[0]


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
    search: str | None = None,
) -> tuple[list[JobRecord], int]:
    """``teams``: only jobs of these teams (a caller's visibility; None = every team);
    ``search``: only jobs whose name contains it, ignoring case (``%`` and ``_`` are literal)."""
    conditions = JobFilter(
        state=state,
        desired_state=desired_state,
        team=team,
        group=group,
        cluster=cluster,
        search=search,
        teams=teams,
    ).conditions()
    total = session.scalar(select(func.count()).select_from(Job).where(*conditions)) or 0
    jobs = list(
        session.scalars(
            select(Job).where(*conditions).order_by(Job.name).limit(limit).offset(offset)
        )
    )
    records = with_current_runs(session, jobs)
    return records, total


@dataclass(frozen=True)
class JobFilter:
    """What a job listing (or a bulk operation's selector) keeps; None = no condition.

    ``teams`` is the caller's visibility (None = every team), the others are the client's filters.
    """

    state: JobState | None = None
    desired_state: DesiredState | None = None
    team: str | None = None
    business: str | None = None
    group: str | None = None
    cluster: str | None = None
    priority: Priority | None = None
    name_prefix: str | None = None
    labels: tuple[Requirement, ...] = ()
    #: the name contains this text, ignoring case (a search box)
    search: str | None = None
    teams: frozenset[str] | None = field(default=None)

    def conditions(self) -> list[ColumnElement[bool]]:
        conditions: list[ColumnElement[bool]] = []
        if self.teams is not None:
            conditions.append(Job.team.in_(sorted(self.teams)))
        if self.state is not None:
            conditions.append(Job.state == self.state.value)
        if self.desired_state is not None:
            conditions.append(Job.desired_state == self.desired_state.value)
        if self.team is not None:
            conditions.append(Job.team == self.team)
        if self.business is not None:
            conditions.append(Job.business == self.business)
        if self.group is not None:
            conditions.append(Job.group_name == self.group)
        if self.cluster is not None:
            conditions.append(Job.cluster_name == self.cluster)
        if self.priority is not None:
            conditions.append(Job.priority == self.priority.value)
        if self.name_prefix:
            conditions.append(Job.name.startswith(self.name_prefix, autoescape=True))
        for requirement in self.labels:
            conditions.append(_label_condition(requirement))
        if self.search:
            conditions.append(func.lower(Job.name).contains(self.search.lower(), autoescape=True))
        return conditions


def _label_condition(requirement: Requirement) -> ColumnElement[bool]:
    has_key = (JobLabel.job_id == Job.id) & (JobLabel.key == requirement.key)
    if requirement.op is Op.EXISTS:
        return exists().where(has_key)
    if requirement.op is Op.NOT_EXISTS:
        return ~exists().where(has_key)
    pair = exists().where(has_key & (JobLabel.value == requirement.value))
    return pair if requirement.op is Op.EQUALS else ~pair


#: the sorts a job listing takes: field -> key columns (the field, then the unique name)
JOB_SORTS: dict[str, tuple[Any, ...]] = {
    "name": (Job.name,),
    "state": (Job.state, Job.name),
    "updated_at": (Job.updated_at, Job.name),
}
#: the Python types of each sort's key parts (what a cursor must carry)
JOB_SORT_KINDS: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "state": (str, str),
    "updated_at": (datetime, str),
}


def _job_key(sort: Sort) -> Any:
    def key(job: Job) -> tuple[KeyPart, ...]:
        if sort.field == "name":
            return (job.name,)
        if sort.field == "state":
            return (job.state, job.name)
        return (job.updated_at, job.name)

    return key


def page_jobs(
    session: Session,
    selector: JobFilter | None = None,
    window: Window | None = None,
) -> tuple[list[JobRecord], tuple[KeyPart, ...] | None]:
    """One page of the jobs ``selector`` keeps, in the window's order, with their current runs;
    and the key the next page starts after (None: this was the last page)."""
    selector = selector or JobFilter()
    window = window or Window(Sort("name"), None, 100)
    query = select(Job).where(*selector.conditions())
    jobs, next_key = paging.read_page(
        session, query, JOB_SORTS[window.sort.field], window, _job_key(window.sort)
    )
    return with_current_runs(session, jobs), next_key


def count_jobs(session: Session | Connection, selector: JobFilter | None = None) -> int:
    selector = selector or JobFilter()
    return paging.count(session, select(Job.id).where(*selector.conditions()))


def count_owned(session: Session, node_id: str) -> int:
    """How many jobs ``node_id`` owns now (a drained node is done when this is 0)."""
    return int(session.scalar(select(func.count(Job.id)).where(Job.owner == node_id)) or 0)


def _write_labels(
    session: Session, job_id: int, labels: Mapping[str, str], *, replace: bool
) -> None:
    """Make ``job_labels`` hold exactly ``labels`` for the job."""
    if replace:
        session.execute(delete(JobLabel).where(JobLabel.job_id == job_id))
    for key, value in sorted(labels.items()):
        session.add(JobLabel(job_id=job_id, key=key, value=value))
    session.flush()


def _check_version(job: Job, expected_version: int | None) -> None:
    """The client's If-Match check: against the *spec* version, which state changes never move
    (a PATCH with the ETag just read must not fail because the job went from QUEUED to
    STARTING meanwhile)."""
    if expected_version is not None and job.spec_version != expected_version:
        from scheduler.core.errors import PreconditionFailed

        raise PreconditionFailed(
            f"job {job.name!r} is at spec version {job.spec_version}, not {expected_version}"
        )


def update_job_spec(
    session: Session,
    name: str,
    changes: Mapping[str, Any],
    *,
    expected_version: int | None,
    cause: str,
    node_id: str,
    grace_seconds: float | None = None,
    rollback_after: float | None = None,
    rollback_of: int | None = None,
    anywhere: bool = True,
) -> JobRecord:
    """Apply spec changes as a new revision (``scheduler.decisions.revisions``).

    A new checkpoint location lies in the job's own area unless ``anywhere`` (a platform admin's
    change, or the owner's rollback to a revision once accepted), and where no other job
    checkpoints (Conflict).

    A change of a field the application was started with, on a job that runs, is an upgrade:
    the generation is bumped so the job's owner replaces the live run (a graceful stop waiting
    ``grace_seconds``, None: the node's default), and a job at rest that is to run is queued
    again. ``rollback_after``: the upgrade rolls back to the revision before it unless it is
    RUNNING within that many seconds. ``rollback_of``: this change is a rollback to that
    revision (its history says so). Other changes take effect at the job's next run."""
    unknown = set(changes) - set(revisions.SPEC_FIELDS)
    if unknown:
        raise InvalidInput(f"fields cannot be changed: {', '.join(sorted(unknown))}")
    job = load_job(session, name, for_update=True)
    _check_version(job, expected_version)
    before = job_record(job)
    if "business" in changes and changes["business"] != job.business:
        check_job_placement(session, changes["business"], job.group_name)  # dedicated groups
    if "checkpoint_location" in changes:
        location = validate_checkpoint_location(
            session, job.group_name, changes["checkpoint_location"]
        )
        if location != job.checkpoint_location:  # what it keeps is not judged again
            if not anywhere:
                validate_checkpoint_location(session, job.group_name, location, job=job.name)
            place, area = checkpoint_claim(job.name, location, list_clusters(session))
            if place is not None:
                check_checkpoint_free(session, job.name, place, area)
            job.checkpoint_area = area
        changes = {**changes, "checkpoint_location": location}
    for key, value in changes.items():
        if key == "priority":
            value = Priority(value).value
        elif key == "args":
            value = list(value)
        elif key == "conf":
            value = dict(value)
        elif key == "labels":
            value = validate_labels(value or {})
            _write_labels(session, job.id, value, replace=True)
        elif key == "on_stall":
            value = OnStall(value).value
        setattr(job, key, value)
    now = utcnow()
    old_spec = revisions.spec_of(before)
    new_spec = revisions.spec_of(job_record(job))
    changed = revisions.changed_fields(old_spec, new_spec)
    job.version += 1
    job.spec_version += 1
    job.updated_at = now
    message = "spec changed: " + (", ".join(sorted(changed)) or "nothing (same values)")
    if rollback_of is not None:
        message = f"rollback to revision {rollback_of}; {message}"
    old_state = JobState(job.state)
    new_state: JobState | None = None
    if revisions.is_upgrade(before, changed):
        job.generation += 1  # the live run is replaced by one of the new spec
        job.grace_seconds = grace_seconds
        job.attempts_reset_at = now
        job.not_before = None
        if rollback_after is not None and rollback_of is None:
            job.upgrade_deadline = now + timedelta(seconds=rollback_after)
            job.upgrade_from = before.spec_version
        else:
            job.upgrade_deadline = None
            job.upgrade_from = None
        message += (
            f"; upgrade to revision {job.spec_version}: the running application is replaced "
            "(graceful stop, then the new spec from the same checkpoint)"
        )
        if job.upgrade_deadline is not None:
            message += (
                f"; rolls back to revision {job.upgrade_from} unless RUNNING within "
                f"{rollback_after:g} s"
            )
        if job.desired_state == DesiredState.RUNNING and old_state.is_at_rest:
            new_state = transition(old_state, JobState.QUEUED)
            job.state = new_state.value
            job.state_reason = f"upgrade to revision {job.spec_version}"
    add_revision(
        session,
        revision_values(
            job.id,
            job.spec_version,
            new_spec,
            cause=cause,
            message=message,
            rollback_of=rollback_of,
        ),
    )
    add_event(
        session,
        job,
        None,
        old_state if new_state is not None else None,
        new_state,
        cause=cause,
        message=message,
        node_id=node_id,
    )
    return with_run(session, job)


def apply_command(
    session: Session,
    name: str,
    effect: CommandEffect,
    *,
    expected_version: int | None,
    cause: str,
    node_id: str,
    message: str,
    grace_seconds: float | None = None,
) -> JobRecord:
    """Record an operator's start/stop/restart: its ``effect``, as ``states.command_effect``
    decided it from the job it read.

    ``grace_seconds``: how long a graceful stop of the live run (stop, restart) waits before a
    kill (None: the node's default; 0: kill at once).

    ``expected_version`` is checked against the spec version ("act on the spec I reviewed"); a
    command moves the row's ``version`` but not the spec's: it is not a spec change."""
    job = load_job(session, name, for_update=True)
    _check_version(job, expected_version)
    now = utcnow()
    old_state = JobState(job.state)
    state = effect.state
    job.desired_state = effect.desired.value
    job.grace_seconds = grace_seconds
    if effect.bump_generation:
        job.generation += 1
    if effect.reset_attempts:
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
    session: Session,
    name: str,
    *,
    expected_version: int | None,
    refuse_if_running: bool = True,
    lease_margin: float = leases.DEFAULT_MARGIN_S,
) -> JobRecord:
    """Delete the job with its runs and events. Refused (Conflict) while it should run or has
    a live application, and while its last run may hold a fence lease (ended unconfirmed: its
    driver may still commit, and a new job of the same name would run beside it)."""
    job = load_job(session, name, for_update=True)
    _check_version(job, expected_version)
    record = with_run(session, job)
    if refuse_if_running and (
        job.desired_state == DesiredState.RUNNING or JobState(job.state).has_live_run
    ):
        raise Conflict(
            f"job {name!r} is {job.state} (desired {job.desired_state}): stop it before deleting"
        )
    last = record.current_run
    held = leases.holds(last, utcnow(), lease_margin)
    if refuse_if_running and last is not None and held is not None:
        raise Conflict(f"job {name!r} cannot be deleted yet: {leases.describe(last, held)}")
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


def page_runs(
    session: Session, name: str, window: Window
) -> tuple[list[RunRecord], tuple[KeyPart, ...] | None]:
    """One page of the job's runs by attempt (newest first: ``-attempt``, the default)."""
    return paging.read_job_page(session, name, Run, Run.attempt, window, run_record)


def count_runs(session: Session, name: str) -> int:
    return paging.count_job_rows(session, name, Run)


def get_run(session: Session, name: str, attempt: int) -> RunRecord:
    """The job's run with that attempt number (NotFound: no such job, or no such run)."""
    job_id = session.scalar(select(Job.id).where(Job.name == name))
    if job_id is None:
        raise NotFound(f"no job named {name!r}", job=name)
    row = session.scalar(select(Run).where(Run.job_id == job_id, Run.attempt == attempt))
    if row is None:
        raise NotFound(f"job {name!r} has no run {attempt}", job=name)
    return run_record(row, name)
