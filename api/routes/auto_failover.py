"""``/v1/groups/{name}/auto-failover``: a group's automatic failover policy (off by default).

When enabled, a cluster of the group that the monitors find ``VOTE_ABNORMAL`` or
``THRESHOLD_ABNORMAL`` for ``after_seconds`` fails over the group's jobs at or above
``min_priority`` to the group's other cluster, through the same persisted plans as an operator's
failover, at most once per incident (``scheduler/decisions/operations/auto.py``). Reading it needs a
role on some team; changing it is a platform admin's (a catalog change), audited, and takes
``If-Match: "<version>"``.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from api.deps import ActorDep, ContextDep, ExpectedVersionDep, NamePath, StoreDep
from api.problems import problem_responses
from api.schemas.operations import AutoFailoverPolicy, AutoFailoverPublic
from scheduler.decisions.catalog import validate_group_name
from scheduler.store import journal
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
    with store.session() as session:
        policy = ops_store.get_policy(session, validate_group_name(name))
    response.headers["ETag"] = f'"{policy.version}"'
    return AutoFailoverPublic.of(policy)


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
    ctx: ContextDep,
    store: StoreDep,
    actor: ActorDep,
    expected_version: ExpectedVersionDep,
    response: Response,
) -> AutoFailoverPublic:
    """Enable or disable automatic failover for the group, after how long abnormal, from which
    priority up."""
    group = validate_group_name(name)
    with store.transaction() as session:
        before = ops_store.get_policy(session, group)
        policy = ops_store.put_policy(
            session,
            group,
            enabled=body.enabled,
            after_seconds=body.after_seconds,
            min_priority=body.min_priority,
            by=actor,
            expected_version=expected_version,
        )
        journal.add_audit(
            session,
            actor=actor,
            action="group.auto-failover",
            target_kind="group",
            target_name=group,
            detail=body.model_dump(mode="json"),
            node_id=ctx.settings.node_id,
            before={
                "enabled": before.enabled,
                "after_seconds": before.after_seconds,
                "min_priority": before.min_priority.value,
            },
            after=body.model_dump(mode="json"),
        )
    response.headers["ETag"] = f'"{policy.version}"'
    return AutoFailoverPublic.of(policy)
