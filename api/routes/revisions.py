"""``/v1/jobs/{name}/revisions`` and ``/v1/jobs/{name}/rollback``: a job's spec history.

Every spec change of a job is a revision (``scheduler.decisions.revisions``): revision ``n`` is the
whole spec as it was once the job's ``spec_version`` became ``n``. The history is read a page at a
time, one revision alone (optionally with its diff against another), or as a diff between two.
A rollback applies an earlier revision's spec as a new spec change -- a new revision, an upgrade
when the job runs (graceful stop, then the old spec from the same checkpoint) -- and is guarded
like ``PATCH`` (``If-Match`` against the spec version, ``Idempotency-Key``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from api import paging
from api.deps import CallerDep, ExpectedVersionDep, NamePath, StoreDep
from api.idempotency import Idempotent
from api.paging import PageDep
from api.problems import problem_responses
from api.routes.common import Listing, etag
from api.routes.jobs import GraceQuery, _name, change_spec
from api.schemas import attributes
from api.schemas.resources import JobPublic, audit_doc
from scheduler.core.errors import Conflict
from scheduler.core.paging import Sort
from scheduler.core.records import RevisionRecord
from scheduler.decisions import revisions
from scheduler.store import jobs as jobs_store
from scheduler.store import revisions as revisions_store

router = APIRouter(prefix="/v1/jobs", tags=["revisions"])

MAX_REVISION = 2**31 - 1
RevisionPath = Annotated[
    int,
    Path(ge=1, le=MAX_REVISION, description="a revision number (1: the job as created)"),
]
AgainstQuery = Annotated[
    int | None,
    Query(
        ge=1,
        le=MAX_REVISION,
        description="also diff the revision against this one (the changes from `against` to it)",
        examples=[2],
    ),
]
RevisionSortQuery = Annotated[
    str,
    Query(
        pattern=r"^-?revision$",
        description="`-revision` (newest first, the default) or `revision` (oldest first)",
        examples=["revision"],
    ),
]


class ChangePublic(BaseModel):
    """One difference between two revisions."""

    path: str = Field(
        description="the field (`args`), or a key of a map field (`conf.spark.executor.memory`)",
        examples=["args"],
    )
    kind: str = Field(description="`changed`, `added` or `removed`", examples=["changed"])
    before: Any = Field(default=None, description="the value before (null: added)")
    after: Any = Field(default=None, description="the value after (null: removed)")

    @classmethod
    def of(cls, change: revisions.Change) -> ChangePublic:
        return cls(path=change.path, kind=change.kind, before=change.before, after=change.after)


class RevisionPublic(BaseModel):
    """One revision of a job's spec."""

    job: str
    revision: int = Field(description="the job's spec version this revision is", examples=[3])
    spec: dict[str, Any] = Field(
        description="the whole spec: entrypoint, args, conf, checkpoint_location, team, "
        "business, priority, replicate, labels, stall_after, on_stall",
    )
    cause: str = Field(description="who or what made it", examples=["api:update by alice"])
    message: str = Field(description="what changed, in words")
    rollback_of: int | None = Field(
        default=None, description="the revision this one rolled back to (null: not a rollback)"
    )
    created_at: datetime
    against: int | None = Field(
        default=None, description="the revision `changes` is relative to (with `?against=`)"
    )
    changes: list[ChangePublic] | None = Field(
        default=None, description="the changes from revision `against` to this one"
    )

    @classmethod
    def of(cls, rev: RevisionRecord, against: RevisionRecord | None = None) -> RevisionPublic:
        if against is None:
            return cls(**attributes(cls, rev, job=rev.job_name))
        changes = [ChangePublic.of(c) for c in revisions.diff(against.spec, rev.spec)]
        return cls(
            **attributes(cls, rev, job=rev.job_name, against=against.revision, changes=changes)
        )


class RevisionPage(paging.Page[RevisionPublic]):
    """A page of a job's revisions, newest first."""


_NEWEST = Sort.parse("-revision", ("revision",))
_REVISIONS = Listing(
    _NEWEST, (int,), revisions_store.page_revisions, revisions_store.count_revisions, RevisionPage
)


class RevisionDiff(BaseModel):
    """What changes from one revision of a job to another."""

    job: str
    from_revision: int = Field(examples=[2])
    to_revision: int = Field(examples=[3])
    changes: list[ChangePublic]
    #: whether applying the change to a running job replaces its run (an upgrade)
    restarts: bool = Field(
        description="the changes touch what the application was started with (entrypoint, "
        "args, conf, checkpoint location): applied to a running job, they replace its run",
    )


class RollbackRequest(BaseModel):
    """Which revision's spec the job goes back to."""

    model_config = ConfigDict(extra="forbid")

    revision: Annotated[StrictInt, Field(ge=1, le=MAX_REVISION)] = Field(
        description="the revision to roll back to", examples=[2]
    )


@router.get(
    "/{name}/revisions",
    response_model=RevisionPage,
    operation_id="list_job_revisions",
    summary="List a job's revisions, newest first",
    responses=problem_responses(404),
)
def list_revisions(
    name: NamePath,
    request: Request,
    response: Response,
    store: StoreDep,
    *,
    sort: RevisionSortQuery = "-revision",
    asked: PageDep,
) -> RevisionPage:
    """Every spec change of the job (creation is revision 1), one cursor page at a time."""
    job, order = _name(name), Sort.parse(sort, ("revision",))
    return _REVISIONS.read(request, response, store, asked, RevisionPublic.of, (job,), order)


@router.get(
    "/{name}/revisions/{revision}",
    response_model=RevisionPublic,
    operation_id="get_job_revision",
    summary="One revision of a job's spec (with its diff against another)",
    responses=problem_responses(404),
)
def get_revision(
    name: NamePath, revision: RevisionPath, store: StoreDep, against: AgainstQuery = None
) -> RevisionPublic:
    """The revision's whole spec; with ``against``, also the changes from that revision."""
    with store.session() as session:
        rev = revisions_store.get_revision(session, _name(name), revision)
        base = revisions_store.get_revision(session, name, against) if against is not None else None
    return RevisionPublic.of(rev, base)


@router.get(
    "/{name}/revisions/{revision}/diff",
    response_model=RevisionDiff,
    operation_id="diff_job_revisions",
    summary="The changes between two revisions of a job",
    responses=problem_responses(404),
)
def diff_revisions(
    name: NamePath, revision: RevisionPath, store: StoreDep, against: AgainstQuery = None
) -> RevisionDiff:
    """The changes from revision ``against`` (default: the one before) to ``revision``."""
    with store.session() as session:
        rev = revisions_store.get_revision(session, _name(name), revision)
        base_number = against if against is not None else max(1, revision - 1)
        base = revisions_store.get_revision(session, name, base_number)
    return RevisionDiff(
        job=rev.job_name,
        from_revision=base.revision,
        to_revision=rev.revision,
        changes=[ChangePublic.of(c) for c in revisions.diff(base.spec, rev.spec)],
        restarts=bool(revisions.RESTART_FIELDS & revisions.changed_fields(base.spec, rev.spec)),
    )


@router.post(
    "/{name}/rollback",
    response_model=JobPublic,
    operation_id="rollback_job",
    summary="Roll a job's spec back to an earlier revision (a new revision)",
    responses=problem_responses(404, 409, 412, 415),
    dependencies=[Idempotent],
)
def rollback_job(
    name: NamePath,
    body: RollbackRequest,
    caller: CallerDep,
    expected_version: ExpectedVersionDep,
    response: Response,
    grace_seconds: GraceQuery = None,
) -> JobPublic:
    """The job's spec becomes revision ``revision``'s again, as a new revision. On a running
    job whose application would change, that is an upgrade: a graceful stop (``grace_seconds``,
    default the node's), then the old spec from the same checkpoint. 409 when the spec already
    equals that revision; 412 when ``If-Match`` names another spec version."""
    with caller.store.transaction() as session:
        job = jobs_store.get_job(session, _name(name))
        before = audit_doc(job)
        target = revisions_store.revision_of(session, job.id, job.name, body.revision)
        changes = revisions.rollback_changes(revisions.spec_of(job), target.spec)
        if not changes:
            raise Conflict(
                f"job {job.name!r}'s spec already equals revision {body.revision} "
                f"(it is at revision {job.spec_version})"
            )
        job = change_spec(
            session,
            caller.ctx,
            caller.principal,
            job,
            changes,
            expected_version=expected_version,
            cause=f"api:rollback by {caller.actor}",
            grace_seconds=grace_seconds,
            rollback_of=body.revision,
        )
        caller.audit(
            session,
            "job.rollback",
            job.name,
            {"revision": body.revision, "grace_seconds": grace_seconds},
            team=job.team,
            before=before,
            after=audit_doc(job),
        )
    caller.ctx.nudge(job.group, job.name)
    etag(response, job.spec_version)
    return JobPublic.of(job)
