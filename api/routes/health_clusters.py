"""``/v1/clusters/{name}/health``, ``mark-abnormal`` and ``clear``: a cluster's health.

The ClusterMonitor of every node decides NORMAL / VOTE_ABNORMAL / THRESHOLD_ABNORMAL from the
nodes' votes (``scheduler.decisions.health``); an operator marks a cluster MANUAL_ABNORMAL with a
reason and clears that mark (``DROVER_CLUSTER_MARKS``: any team's operator, who is named with
its team wherever the mark shows, or the platform's operators only). A mark or clear is one
transaction with its health event, a job event
for each job on the cluster and an audit entry. Clearing an automatic state is a 409: it clears
itself once the cluster has been quiet.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import Caller, CallerDep, ContextDep, NamePath, StoreDep
from api.problems import problem_responses
from api.schemas import attributes
from api.schemas.resources import (
    AssessmentPublic,
    ClearAbnormal,
    ClusterHealthPublic,
    HealthEventPublic,
    MarkAbnormal,
    VotePublic,
)
from scheduler.core.clock import utcnow
from scheduler.decisions.catalog import validate_cluster_name
from scheduler.decisions.health import ClusterHealth, assess, live_votes
from scheduler.decisions.identity import acting_as
from scheduler.store import catalog as catalog_store
from scheduler.store import health as health_store

router = APIRouter(prefix="/v1/clusters", tags=["cluster health"])

HistoryLimit = Annotated[int, Query(ge=1, le=500)]


@router.get(
    "/{name}/health",
    operation_id="get_cluster_health",
    summary="Read a cluster's health",
    response_model=ClusterHealthPublic,
    responses=problem_responses(404),
)
def get_health(
    name: NamePath, ctx: ContextDep, store: StoreDep, history: HistoryLimit = 20
) -> ClusterHealthPublic:
    """The stored state and its reason, what the votes say now, each node's latest vote and the
    latest transitions with their evidence."""
    name = validate_cluster_name(name)
    policy = ctx.settings.health_policy
    live = ctx.views().live_node_ids()
    now = utcnow()
    with store.session() as session:
        state, reason, since = health_store.health_of(session, name)
        votes = health_store.votes_since(
            session, name, now - timedelta(seconds=policy.history_seconds)
        )
        events = health_store.list_health_events(session, name, limit=history)
    voters = frozenset(v.node_id for v in votes)
    latest = live_votes(votes, voters, now=now, freshness=policy.vote_freshness)
    counted = live if live is not None else voters
    assessment = assess(state, votes, counted, now=now, policy=policy)
    return ClusterHealthPublic(
        cluster=name,
        state=state,
        reason=reason,
        since=since,
        assessment=AssessmentPublic(
            **attributes(
                AssessmentPublic,
                assessment,
                live_nodes=sorted(live) if live is not None else None,
            )
        ),
        votes=[
            VotePublic(
                **attributes(
                    VotePublic,
                    v,
                    latency_s=round(v.latency_s, 3),
                    counted=v.node_id in assessment.live_votes,
                )
            )
            for v in sorted(latest.values(), key=lambda v: v.node_id)
        ],
        history=[HealthEventPublic.of(e) for e in events],
    )


@router.post(
    "/{name}/mark-abnormal",
    operation_id="mark_cluster_abnormal",
    summary="Mark a cluster abnormal (manual)",
    response_model=HealthEventPublic,
    responses=problem_responses(404, 409, 415),
)
def mark_abnormal(name: NamePath, body: MarkAbnormal, caller: CallerDep) -> HealthEventPublic:
    """Mark the cluster MANUAL_ABNORMAL: nothing is started there until an operator clears it.
    A team's operator is named with its team in the reason and in every job's event."""
    name = validate_cluster_name(name)
    return _operator_change(
        caller, "cluster.mark-abnormal", ClusterHealth.MANUAL_ABNORMAL, name, body.reason
    )


@router.post(
    "/{name}/clear",
    operation_id="clear_cluster_abnormal",
    summary="Clear a manual abnormal mark",
    response_model=HealthEventPublic,
    responses=problem_responses(404, 409, 415),
)
def clear(
    name: NamePath, caller: CallerDep, body: ClearAbnormal | None = None
) -> HealthEventPublic:
    """Lift a manual mark: the cluster is NORMAL (the monitor decides again at its next round)."""
    name = validate_cluster_name(name)
    reason = body.reason if body is not None else ""
    return _operator_change(caller, "cluster.clear", ClusterHealth.NORMAL, name, reason)


def _operator_change(
    caller: Caller,
    action: str,
    new: ClusterHealth,
    cluster: str,
    reason: str,
) -> HealthEventPublic:
    """An operator's change of the cluster's health to ``new`` (a manual mark or its lifting)
    with its audit row (``action``) in one transaction; then the reconcile loops of the groups
    on the cluster are woken."""
    with caller.store.transaction() as session:
        event = health_store.operator_change(
            session,
            cluster,
            new,
            reason=reason,
            actor=caller.actor,
            node_id=caller.ctx.settings.node_id,
            acting_as=acting_as(caller.principal),
        )
        caller.audit(
            session,
            action,
            event.cluster,
            {"from": event.from_state.value, "to": event.to_state.value, "reason": event.reason},
            before={"health": event.from_state.value},
            after={"health": event.to_state.value, "reason": event.reason},
        )
    _nudge_groups(caller, cluster)
    return HealthEventPublic.of(event)


def _nudge_groups(caller: Caller, cluster: str) -> None:
    """Wake the reconcile loops of the groups using the cluster: their jobs show the change now."""
    with caller.store.session() as session:
        groups = [
            g.name
            for g in catalog_store.list_groups(session)
            if cluster in (g.primary_cluster, g.failover_cluster)
        ]
    for group in groups:
        caller.ctx.nudge_local(group)
