"""``/v1/nodes`` (live nodes as this node sees them) and ``/v1/internal/nudge`` (forwarded wakes).

Any node answers: the membership comes from this node's ZooKeeper views of its own groups, so a
node lists the members of the groups it belongs to. A write on one node reaches the job's owner
through ``POST /v1/internal/nudge`` on the owner (see ``NodeRuntime.nudge``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, status
from pydantic import BaseModel, ConfigDict

from api.deps import ContextDep
from scheduler.membership import MembershipSnapshot
from scheduler.names import validate_name

router = APIRouter(tags=["membership"])


class NodePublic(BaseModel):
    node_id: str
    api_url: str
    az: str
    cloud: str
    started_at: float | None = None
    #: group -> role of this node in it
    groups: dict[str, str]


class NodeList(BaseModel):
    #: ``standalone`` (no ZooKeeper), ``zookeeper`` or ``degraded``
    mode: str
    connection: str
    data: list[NodePublic]
    count: int
    #: the answering node's id and its actors: membership, and per group the reconciler's
    #: ticks, last tick (``at``, ``jobs``, ``claimed``, ``paused``, ``seconds``, ``epoch``) and
    #: ``epoch_reconciled``: the end (``at``) of the first complete tick under the newest epoch
    this_node: str
    actors: dict[str, Any]


class NudgeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    group: str
    job: str | None = None


def nodes_of(snapshot: MembershipSnapshot) -> list[NodePublic]:
    """The distinct live members of this node's groups, by node id (standalone: this node)."""
    if snapshot.standalone:
        me = snapshot.this_node
        return [
            NodePublic(node_id=me.node_id, api_url=me.api_url, az=me.az, cloud=me.cloud, groups={})
        ]
    return [
        NodePublic(
            node_id=card.node_id,
            api_url=card.api_url,
            az=card.az,
            cloud=card.cloud,
            started_at=card.started_at,
            groups=dict(card.groups),
        )
        for card in snapshot.nodes()
    ]


@router.get("/v1/nodes", response_model=NodeList)
def list_nodes(ctx: ContextDep) -> NodeList:
    snapshot = ctx.views()
    data = nodes_of(snapshot)
    return NodeList(
        mode=str(snapshot.mode),
        connection=snapshot.connection,
        data=data,
        count=len(data),
        this_node=ctx.settings.node_id,
        actors=ctx.status(),
    )


@router.post("/v1/internal/nudge", status_code=status.HTTP_202_ACCEPTED, include_in_schema=False)
def nudge(body: NudgeRequest, ctx: ContextDep) -> dict[str, str]:
    """Another node accepted a write on a job this node owns: act on it now."""
    validate_name(body.group, "group name")
    ctx.nudge_local(body.group)
    return {"status": "accepted"}
