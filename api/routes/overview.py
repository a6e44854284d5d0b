"""``GET /v1/overview``: the fleet at a glance, for the jobs the caller may see.

Jobs counted by observed state (every state present, zeros included) and by desired state, and
how many should run but do not; clusters counted by health with the abnormal ones named. One
grouped query over the jobs, whatever their number: what the console's state strip shows and
refreshes every few seconds.
"""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel, Field

from api.deps import PrincipalDep, SearchQuery, StoreDep
from api.schemas.resources import Label, Name
from scheduler.core.clock import utcnow
from scheduler.core.states import DesiredState, JobState
from scheduler.decisions.health import ClusterHealth
from scheduler.store import overview as overview_store

router = APIRouter(tags=["overview"])


class JobsOverview(BaseModel):
    total: int = Field(description="jobs the caller may see that match the filters")
    by_state: dict[str, int] = Field(
        description="jobs per observed state; every state is present",
        examples=[{"RUNNING": 940, "QUEUED": 3, "FAILED": 2, "STOPPED": 55}],
    )
    by_desired_state: dict[str, int] = Field(
        description="jobs per desired state", examples=[{"RUNNING": 945, "STOPPED": 55}]
    )
    not_running_as_desired: int = Field(
        description="jobs whose desired state is RUNNING but whose observed state is not "
        "(starting, queued, failed, unknown, ...)",
        examples=[5],
    )


class ClustersOverview(BaseModel):
    total: int
    by_health: dict[str, int] = Field(
        description="clusters per health state; every state is present",
        examples=[{"NORMAL": 2, "VOTE_ABNORMAL": 1, "THRESHOLD_ABNORMAL": 0}],
    )
    abnormal: list[str] = Field(description="the clusters whose health is not NORMAL")


class Overview(BaseModel):
    at: datetime = Field(description="when the counts were read")
    jobs: JobsOverview
    clusters: ClustersOverview


@router.get(
    "/v1/overview",
    response_model=Overview,
    summary="The fleet at a glance",
    operation_id="get_overview",
)
def get_overview(
    store: StoreDep,
    principal: PrincipalDep,
    team: Label | None = None,
    group: Name | None = None,
    cluster: Name | None = None,
    q: SearchQuery = None,
) -> Overview:
    """Jobs by state and clusters by health, for the jobs the caller may see (filtered like
    `GET /v1/jobs`)."""
    with store.session() as session:
        counts = overview_store.count_jobs(
            session, teams=principal.teams(), team=team, group=group, cluster=cluster, search=q
        )
        health = overview_store.clusters_by_health(session)
    by_state = {s.value: 0 for s in JobState} | counts.by_state()
    by_desired = {d.value: 0 for d in DesiredState} | counts.by_desired()
    lagging = sum(
        n
        for (state, desired), n in counts.by_state_and_desire.items()
        if desired == DesiredState.RUNNING.value and state != JobState.RUNNING.value
    )
    by_health = {h.value: 0 for h in ClusterHealth} | {h: len(n) for h, n in health.items()}
    abnormal = sorted(n for h, names in health.items() if h != ClusterHealth.NORMAL for n in names)
    return Overview(
        at=utcnow(),
        jobs=JobsOverview(
            total=counts.total,
            by_state=by_state,
            by_desired_state=by_desired,
            not_running_as_desired=lagging,
        ),
        clusters=ClustersOverview(
            total=sum(by_health.values()), by_health=by_health, abnormal=abnormal
        ),
    )
