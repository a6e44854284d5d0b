"""``/v1/groups/{name}/auto-failover``: a group's automatic failover policy (off by default);
``/v1/auto-failover``: automatic failover platform-wide -- one switch to pause and resume it,
the clusters it does not fail over onto for now (their cool-down), its latest decisions.

When enabled, a cluster of the group that the monitors find ``VOTE_ABNORMAL`` or
``THRESHOLD_ABNORMAL`` for ``after_seconds`` fails over the group's jobs at or above
``min_priority`` to the group's other cluster, through the same persisted plans as an operator's
failover, at most once per incident (``scheduler/decisions/operations/auto.py``). Reading it needs a
role on some team; changing it is a platform admin's (a catalog change), audited, and takes
``If-Match: "<version>"``. Pausing, resuming and clearing a cluster's cool-down are a platform
operator's (operator on every team), audited; reading the status a platform viewer's.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from fastapi import APIRouter, Response

from api.deps import Caller, CallerDep, ContextDep, ExpectedVersionDep, NamePath, StoreDep
from api.problems import problem_responses
from api.routes.common import etag, read_versioned
from api.schemas.operations import (
    AutoEventPublic,
    AutoFailoverPolicy,
    AutoFailoverPublic,
    AutoFailoverStatus,
    AutoSwitchIn,
    CoolingDownPublic,
)
from scheduler.config import Settings
from scheduler.core.clock import utcnow
from scheduler.decisions.catalog import validate_cluster_name, validate_group_name
from scheduler.store import auto_failover as auto_store
from scheduler.store import catalog as catalog_store
from scheduler.store import operations as ops_store

router = APIRouter(prefix="/v1/groups", tags=["groups"])


@router.get(
    "/{name}/auto-failover",
    response_model=AutoFailoverPublic,
    responses=problem_responses(404),
    operation_id="get_group_auto_failover",
    summary="A group's automatic failover policy",
)
def get_auto_failover(name: NamePath, store: StoreDep, response: Response) -> AutoFailoverPublic:
    """The policy (``enabled: false`` until someone enables it)."""
    key = validate_group_name(name)
    return read_versioned(store, response, ops_store.get_policy, key, AutoFailoverPublic.of)


@router.put(
    "/{name}/auto-failover",
    response_model=AutoFailoverPublic,
    responses=problem_responses(404, 412, 415),
    operation_id="put_group_auto_failover",
    summary="Set a group's automatic failover policy",
)
def put_auto_failover(
    name: NamePath,
    body: AutoFailoverPolicy,
    caller: CallerDep,
    expected_version: ExpectedVersionDep,
    response: Response,
) -> AutoFailoverPublic:
    """Enable or disable automatic failover for the group, after how long abnormal, from which
    priority up."""
    group = validate_group_name(name)
    with caller.store.transaction() as session:
        before = ops_store.get_policy(session, group)
        policy = ops_store.put_policy(
            session,
            group,
            enabled=body.enabled,
            after_seconds=body.after_seconds,
            min_priority=body.min_priority,
            by=caller.actor,
            expected_version=expected_version,
        )
        caller.audit(
            session,
            "group.auto-failover",
            group,
            body.model_dump(mode="json"),
            before={
                "enabled": before.enabled,
                "after_seconds": before.after_seconds,
                "min_priority": before.min_priority.value,
            },
            after=body.model_dump(mode="json"),
        )
    etag(response, policy.version)
    return AutoFailoverPublic.of(policy)


# -- the platform-wide switch ---------------------------------------------------------------------

switch_router = APIRouter(prefix="/v1/auto-failover", tags=["failovers"])


def _status(session: Any, settings: Settings, now: datetime) -> AutoFailoverStatus:
    paused = auto_store.switch(session)
    cooldown = settings.failover_auto_cooldown
    cooling = []
    clusters = [c.name for c in catalog_store.list_clusters(session) if c.health == "NORMAL"]
    for name, back in sorted(auto_store.recoveries(session, clusters).items()):
        until = back.ended + timedelta(seconds=cooldown)
        if not back.cleared and cooldown > 0 and now < until:
            cooling.append(CoolingDownPublic(cluster=name, abnormal_until=back.ended, until=until))
    return AutoFailoverStatus(
        paused=paused is not None,
        paused_by=paused.by if paused else None,
        paused_at=paused.at if paused else None,
        reason=paused.reason if paused else None,
        cooldown_seconds=cooldown,
        cooling_down=cooling,
        groups=auto_store.enabled_groups(session),
        events=[AutoEventPublic.of(e) for e in auto_store.latest_events(session)],
    )


@switch_router.get(
    "",
    response_model=AutoFailoverStatus,
    operation_id="get_auto_failover",
    summary="Automatic failover platform-wide: paused or not, cool-downs, latest decisions",
)
def get_auto_failover_status(ctx: ContextDep, store: StoreDep) -> AutoFailoverStatus:
    """Whether automatic failover is paused, which clusters it does not fail over onto for now
    (their cool-down after an abnormal period of their own), which groups use it, and what it
    decided lately (created, or held and why) -- also what operators did to it."""
    with store.session() as session:
        return _status(session, ctx.settings, utcnow())


def _switch(paused: bool, body: AutoSwitchIn, caller: Caller) -> AutoFailoverStatus:
    now, settings = utcnow(), caller.ctx.settings
    with caller.store.transaction() as session:
        before = auto_store.switch(session)
        auto_store.set_paused(
            session, paused, by=caller.actor, reason=body.reason, node_id=settings.node_id, now=now
        )
        caller.audit(
            session,
            "failover.auto." + ("pause" if paused else "resume"),
            "*",
            {"reason": body.reason},
            target_kind="auto-failover",
            before={"paused": before is not None},
            after={"paused": paused},
        )
        return _status(session, settings, now)


@switch_router.post(
    "/pause",
    response_model=AutoFailoverStatus,
    responses=problem_responses(415),
    operation_id="pause_auto_failover",
    summary="Pause automatic failover platform-wide",
)
def pause_auto_failover(body: AutoSwitchIn, caller: CallerDep) -> AutoFailoverStatus:
    """No group fails over by itself until it is resumed: a failover that falls due meanwhile is
    *held* (an event and an alert say so); failovers already created go on. Operators' failovers
    are not affected. A platform operator's (operator on every team), audited."""
    return _switch(True, body, caller)


@switch_router.post(
    "/resume",
    response_model=AutoFailoverStatus,
    responses=problem_responses(415),
    operation_id="resume_auto_failover",
    summary="Resume automatic failover platform-wide",
)
def resume_auto_failover(body: AutoSwitchIn, caller: CallerDep) -> AutoFailoverStatus:
    """Groups fail over by themselves again (a failover held meanwhile is created at the next
    round if its cluster is still abnormal). A platform operator's, audited."""
    return _switch(False, body, caller)


@switch_router.post(
    "/clusters/{name}/clear",
    response_model=AutoFailoverStatus,
    responses=problem_responses(404, 415),
    operation_id="clear_auto_failover_cooldown",
    summary="Let automatic failover move jobs onto a cluster again",
)
def clear_auto_failover_cooldown(
    name: NamePath, body: AutoSwitchIn, caller: CallerDep
) -> AutoFailoverStatus:
    """End the cluster's cool-down: automatic failover may move jobs onto it again although it
    was abnormal itself lately (the operator vouches for it). A platform operator's, audited."""
    name = validate_cluster_name(name)
    now, settings = utcnow(), caller.ctx.settings
    with caller.store.transaction() as session:
        auto_store.clear_cooldown(
            session, name, by=caller.actor, reason=body.reason, node_id=settings.node_id, now=now
        )
        detail = {"reason": body.reason}
        caller.audit(session, "failover.auto.clear", name, detail, target_kind="cluster")
        return _status(session, settings, now)
