"""``GET /v1/overview``: the fleet at a glance, for the jobs the caller may see; and
``GET /v1/overview/history``: its recent activity.

Jobs counted by observed state (every state present, zeros included) and by desired state, and
how many should run but do not; clusters counted by health with the abnormal ones named. One
grouped query over the jobs, whatever their number: what the console's state strip shows and
refreshes every few seconds.

The history counts, per time bucket, the runs started, the restarts among them, the runs that
ended as failures and the failovers begun (what the console's overview charts draw); the store
keeps no history of job states, so a client samples ``/v1/overview`` for that.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query
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


class ActivityBucket(BaseModel):
    start: datetime = Field(
        description="the bucket's start (inclusive, UTC)", examples=["2026-11-25T02:00:00Z"]
    )
    end: datetime = Field(description="its end (exclusive, UTC)", examples=["2026-11-25T03:00:00Z"])
    runs_started: int = Field(description="runs created in it", examples=[12])
    restarts: int = Field(
        description="runs created in it that followed an earlier run of their job (a restart "
        "command, a restart after a failure, a failover's move)",
        examples=[3],
    )
    failures: int = Field(
        description="runs that ended in it as failures (counted against the restart budget)",
        examples=[1],
    )
    failovers: int | None = Field(
        description="failovers begun in it; null for a caller who does not see every team "
        "(a failover moves every team's jobs)",
        examples=[0],
    )


class History(BaseModel):
    since: datetime = Field(
        description="the first bucket's start (UTC)", examples=["2026-11-24T03:00:00Z"]
    )
    until: datetime = Field(
        description="the last bucket's end: when the counts were read (UTC)",
        examples=["2026-11-25T03:00:00Z"],
    )
    bucket_seconds: float = Field(description="each bucket's length", examples=[3600])
    buckets: list[ActivityBucket] = Field(
        description="the buckets, oldest first",
        examples=[
            [
                {
                    "start": "2026-11-25T02:00:00Z",
                    "end": "2026-11-25T03:00:00Z",
                    "runs_started": 12,
                    "restarts": 3,
                    "failures": 1,
                    "failovers": 0,
                }
            ]
        ],
    )


@router.get(
    "/v1/overview/history",
    response_model=History,
    summary="The fleet's recent activity: runs, restarts, failures, failovers over time",
    operation_id="get_overview_history",
)
def get_history(
    store: StoreDep,
    principal: PrincipalDep,
    hours: Annotated[
        int, Query(ge=1, le=168, description="how far back, in hours", examples=[24])
    ] = 24,
    buckets: Annotated[
        int,
        Query(ge=1, le=168, description="into how many equal buckets", examples=[24]),
    ] = 24,
) -> History:
    """Counts per bucket over the last `hours`, for the jobs the caller may see (the runs of
    their jobs); failovers only for a caller who sees every team."""
    until = utcnow()
    width = timedelta(hours=hours) / buckets
    edges = [until - width * (buckets - i) for i in range(buckets)] + [until]
    teams = principal.teams()
    with store.session() as session:
        found = overview_store.activity(session, edges, teams=teams, failovers=teams is None)
    return History(
        since=edges[0],
        until=until,
        bucket_seconds=width.total_seconds(),
        buckets=[
            ActivityBucket(
                start=edges[i],
                end=edges[i + 1],
                runs_started=found.runs_started[i],
                restarts=found.restarts[i],
                failures=found.failures[i],
                failovers=found.failovers[i] if found.failovers is not None else None,
            )
            for i in range(buckets)
        ],
    )
