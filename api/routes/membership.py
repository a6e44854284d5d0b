"""``/v1/nodes`` (live nodes as this node sees them), a node's drain, and ``/v1/internal/*``.

Any node answers: the membership comes from this node's ZooKeeper views of its own groups, so a
node lists the members of the groups it belongs to. A write on one node reaches the job's owner
through ``POST /v1/internal/nudge`` on the owner (see ``NodeRuntime.nudge``).

Drain (a platform admin's maintenance hand-over): ``POST /v1/nodes/{node_id}/drain`` on any node
reaches the drained node (itself, or forwarded to its API as ``POST /v1/internal/drain``), which
registers again in every group as ``draining``: still a live member, in no pool, so the epoch
grows and the other members claim its jobs, re-attaching to the running applications (nothing
restarts). ``GET /v1/nodes/{node_id}`` says when it owns nothing. ``undrain`` puts it back. A
drain lasts until undrained or until the node process restarts. Refused (409) for the last
member of a group that is not draining (nobody would take its jobs) and without ZooKeeper.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, status
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from api.deps import Caller, CallerDep, ContextDep, NodeContext, StoreDep
from api.problems import problem_responses
from api.schemas import attributes
from scheduler.core.errors import Conflict, CoordinationUnavailable, NotFound
from scheduler.core.names import validate_name
from scheduler.decisions.membership import DRAINING, MembershipSnapshot
from scheduler.store import jobs as jobs_store
from scheduler.store.db import Store

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
    return [NodePublic(**attributes(NodePublic, card)) for card in snapshot.nodes()]


@router.get(
    "/v1/nodes",
    operation_id="list_nodes",
    summary="List live nodes",
    description=(
        "Every live Drover node as this node sees it in ZooKeeper: its API URL, AZ, cloud, start "
        "time and its role in each group."
    ),
    response_model=NodeList,
)
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


class NodeState(BaseModel):
    """One live node, whether it is drained, and how many jobs it still owns."""

    node_id: str = Field(description="the node's id (`DROVER_NODE_ID`)", examples=["drover-a1"])
    api_url: str = Field(description="its API", examples=["http://10.0.1.7:8000"])
    az: str = Field(description="its availability zone", examples=["az-a"])
    cloud: str = Field(description="its cloud", examples=["aws"])
    started_at: float | None = Field(default=None, description="process start (epoch seconds)")
    groups: dict[str, str] = Field(
        description="its role per group as the answering node sees it: `active`, `backup`, or "
        "`draining` (in no pool: the others take its jobs)",
        examples=[{"g1": "draining"}],
    )
    draining: bool = Field(description="drained in every group it belongs to")
    jobs_owned: int = Field(
        description="jobs it owns in the store now; a drained node is done when this is 0",
        examples=[0],
    )


class InternalDrain(BaseModel):
    model_config = ConfigDict(extra="forbid")

    draining: StrictBool


NodeIdPath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=200,
        pattern=r"^[^/\x00-\x1f\x7f]+$",
        description="a node's id",
        examples=["drover-a1"],
    ),
]


def _card(snapshot: MembershipSnapshot, node_id: str) -> NodePublic:
    card = next((n for n in nodes_of(snapshot) if n.node_id == node_id), None)
    if card is None:
        raise NotFound(f"no live node {node_id!r} in the groups of this node")
    return card


def _state(ctx: NodeContext, store: Store, node_id: str) -> NodeState:
    card = _card(ctx.views(), node_id)
    with store.session() as session:
        owned = jobs_store.count_owned(session, node_id)
    roles = set(card.groups.values())
    return NodeState(
        **card.model_dump(),
        draining=bool(roles) and roles == {DRAINING},
        jobs_owned=owned,
    )


def _check_drain(snapshot: MembershipSnapshot, node_id: str) -> None:
    """Refuse a drain that would leave one of the node's groups with nobody to take its jobs."""
    if snapshot.standalone:
        raise Conflict(
            "this node runs without ZooKeeper: it is its groups' only member, there is nobody "
            "to hand its jobs to"
        )
    for group, view in sorted(snapshot.groups.items()):
        if view.member(node_id) is None:
            continue
        others = [m for m in view.members if m.node_id != node_id and m.role != DRAINING]
        if not others:
            raise Conflict(
                f"node {node_id!r} is the last member of group {group!r} that is not draining: "
                "nobody would take its jobs (start another node in the group first)"
            )


def _forward(ctx: NodeContext, api_url: str, node_id: str, draining: bool) -> None:
    import httpx

    from scheduler.backends import http
    from scheduler.decisions.identity import NODE_SECRET_HEADER

    url = f"{api_url.rstrip('/')}/v1/internal/drain"
    try:
        response = http.one_off(
            "POST",
            url,
            json={"draining": draining},
            headers={
                NODE_SECRET_HEADER: ctx.settings.resolved_deployment_secret,
                "X-Drover-Client": "drover-node",
            },
            timeout=ctx.settings.zk_session_timeout + 15,
        )
    except httpx.HTTPError as exc:
        raise CoordinationUnavailable(f"node {node_id!r} at {api_url}: {exc}") from exc
    if response.status_code >= 400:
        try:
            detail = str(response.json().get("detail", ""))
        except ValueError:
            detail = response.text[:200]
        kind = Conflict if response.status_code == 409 else CoordinationUnavailable
        raise kind(f"node {node_id!r} refused: {detail}")


def _set_draining(caller: Caller, node_id: str, draining: bool) -> NodeState:
    ctx = caller.ctx
    snapshot = ctx.views()
    if draining:
        _check_drain(snapshot, node_id)
    if node_id == ctx.settings.node_id:
        if snapshot.standalone:
            _check_drain(snapshot, node_id)
        ctx.set_draining(draining)
    else:
        _forward(ctx, _card(snapshot, node_id).api_url, node_id, draining)
    with caller.store.transaction() as session:
        caller.audit(session, "node.drain" if draining else "node.undrain", node_id)
    return _state(ctx, caller.store, node_id)


@router.get(
    "/v1/nodes/{node_id}",
    response_model=NodeState,
    operation_id="get_node",
    summary="A live node, whether it is drained, and the jobs it still owns",
    responses=problem_responses(404),
)
def get_node(node_id: NodeIdPath, ctx: ContextDep, store: StoreDep) -> NodeState:
    """The node as the membership view shows it: its groups and roles, whether it is drained,
    and how many jobs it still owns (0 once a drain has handed them all over)."""
    return _state(ctx, store, node_id)


@router.post(
    "/v1/nodes/{node_id}/drain",
    response_model=NodeState,
    status_code=status.HTTP_202_ACCEPTED,
    operation_id="drain_node",
    summary="Hand a node's jobs over to the other members of its groups before maintenance",
    description="The node stays a live member in no pool: the epoch grows and the other members "
    "claim its jobs, re-attaching to the running applications (nothing restarts). Poll "
    "`GET /v1/nodes/{node_id}` until `jobs_owned` is 0. Lasts until undrained or until the node "
    "restarts. 409 for the last member of a group that is not draining, or without ZooKeeper.",
    responses=problem_responses(404, 409),
)
def drain_node(node_id: NodeIdPath, caller: CallerDep) -> NodeState:
    return _set_draining(caller, node_id, True)


@router.post(
    "/v1/nodes/{node_id}/undrain",
    response_model=NodeState,
    status_code=status.HTTP_202_ACCEPTED,
    operation_id="undrain_node",
    summary="Put a drained node back into its groups' pools (it takes its share of jobs again)",
    responses=problem_responses(404, 409),
)
def undrain_node(node_id: NodeIdPath, caller: CallerDep) -> NodeState:
    """The node registers again with its own role in every group: the epoch grows and it
    claims its share of the jobs (re-attaching to their running applications)."""
    return _set_draining(caller, node_id, False)


@router.post("/v1/internal/drain", status_code=status.HTTP_202_ACCEPTED, include_in_schema=False)
def internal_drain(body: InternalDrain, ctx: ContextDep) -> dict[str, Any]:
    """Another node forwarded an operator's drain (or undrain) of this node."""
    if body.draining:
        _check_drain(ctx.views(), ctx.settings.node_id)
    return ctx.set_draining(body.draining)


@router.post("/v1/internal/nudge", status_code=status.HTTP_202_ACCEPTED, include_in_schema=False)
def nudge(body: NudgeRequest, ctx: ContextDep) -> dict[str, str]:
    """Another node accepted a write on a job this node owns: act on it now."""
    validate_name(body.group, "group name")
    ctx.nudge_local(body.group)
    return {"status": "accepted"}
