"""``/v1/jobs/{name}/replication`` and ``/v1/replication``: checkpoint replicas and their lag.

Read-only: the replicator of each job's owner writes the figures (``scheduler.loops.replication``),
a failover takes a replica over (``make_available``). A job's replica is also shown in
``GET /v1/jobs/{name}`` (``replication``).
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Request, Response

from api import paging
from api.deps import ContextDep, NamePath, PrincipalDep, StoreDep
from api.paging import Page, PageDep
from api.problems import problem_responses
from api.schemas.resources import Label, Name, ReplicationPublic
from scheduler.config import Settings
from scheduler.core.clock import utcnow
from scheduler.core.errors import NotFound
from scheduler.core.names import validate_name
from scheduler.core.paging import Sort
from scheduler.core.records import ClusterRecord, GroupRecord, JobRecord
from scheduler.decisions.replication import ReplicaRecord, ReplicaState, replica_target
from scheduler.loops.replication import stale_after
from scheduler.store import catalog as catalog_store
from scheduler.store import reads
from scheduler.store import replicas as replicas_store

router = APIRouter(tags=["replication"])


class ReplicationPage(Page[ReplicationPublic]):
    """A page of checkpoint replicas, by job name."""


def replication_view(
    job: JobRecord,
    replica: ReplicaRecord | None,
    group: GroupRecord | None,
    clusters: dict[str, ClusterRecord],
    settings: Settings,
) -> ReplicationPublic:
    """A job's replica as the API shows it (with the reason when it has none)."""
    reason = ""
    if group is not None:
        target = replica_target(job, group, clusters)
        if isinstance(target, str):
            reason = target
    return ReplicationPublic.of(
        job,
        replica,
        now=utcnow(),
        stale_after=stale_after(settings.replication_interval, settings.replication_round_seconds),
        reason=reason,
    )


def replication_of(
    found: reads.JobView, settings: Settings, clusters: Callable[[], list[ClusterRecord]]
) -> ReplicationPublic:
    """:func:`replication_view` of a job read with ``reads.job_view`` (its replica and group
    with it). ``clusters`` reads the catalog's clusters, asked only for a group with a failover
    cluster: without one there is no replica target to find, and the view says so."""
    group = found.group
    if group is None:
        raise NotFound(f"no group named {found.job.group!r}")
    known = {c.name: c for c in clusters()} if group.failover_cluster is not None else {}
    return replication_view(found.job, found.replica, group, known, settings)


@router.get(
    "/v1/jobs/{name}/replication",
    response_model=ReplicationPublic,
    responses=problem_responses(404),
    operation_id="get_job_replication",
    summary="A job's checkpoint replica and its lag",
    description="Where the job's checkpoint replica is (the storage root of its group's other "
    "cluster), the source's and the replica's newest complete batches, the lag in batches and in "
    "seconds, and what the replicator last did. `state` is null while the job has no replica "
    "(`reason` says why: not replicated, no failover cluster, no look yet).",
)
def get_job_replication(name: NamePath, ctx: ContextDep, store: StoreDep) -> ReplicationPublic:
    with store.connection() as session:
        found = reads.job_view(session, validate_name(name, "job name"))
        if found is None:
            raise NotFound(f"no job named {name!r}")
        return replication_of(found, ctx.settings, lambda: reads.clusters(session))


@router.get(
    "/v1/replication",
    response_model=ReplicationPage,
    operation_id="list_replication",
    summary="Checkpoint replicas and their lag",
    description="The replicas of the jobs the caller may see, by job name. `cluster`: replicas "
    "from or to that cluster; `state`: in that state (e.g. LAGGING, ERROR).",
)
def list_replication(
    request: Request,
    response: Response,
    ctx: ContextDep,
    store: StoreDep,
    principal: PrincipalDep,
    cluster: Name | None = None,
    state: ReplicaState | None = None,
    team: Label | None = None,
    *,
    asked: PageDep,
) -> ReplicationPage:
    order = Sort("name")
    filters = {"cluster": cluster, "state": state, "team": team}
    window = paging.window(order, asked.cursor, asked.limit, filters, (str,))
    with store.session() as session:
        rows, next_key = replicas_store.page_replicas(
            session,
            window,
            cluster=cluster,
            state=state,
            team=team,
            teams=principal.teams(),  # only the teams the caller may see
        )
        total = None
        if asked.count:
            total = replicas_store.count_replicas(
                session, cluster=cluster, state=state, team=team, teams=principal.teams()
            )
        groups = {g.name: g for g in catalog_store.list_groups(session)}
        clusters = {c.name: c for c in catalog_store.list_clusters(session)}
    next_cursor, next_url = paging.links(request, response, order, next_key, filters)
    return ReplicationPage(
        data=[
            replication_view(job, replica, groups.get(job.group), clusters, ctx.settings)
            for job, replica in rows
        ],
        limit=asked.limit,
        next_cursor=next_cursor,
        next=next_url,
        count=total,
    )
