"""Membership as one node sees it, and the claim decision. Pure: no ZooKeeper, no Ray, no clock.

Two things live here:

- :class:`MembershipSnapshot` — the one typed value the Membership actor publishes (mode,
  connection, lease, and per group the live members, pool and epoch). The API, the nudge
  forwarding and the benches read it; nobody parses dictionaries.
- :func:`decide_claim` — whether this node may act in a group right now, and on which slot: a
  :class:`~scheduler.core.ownership.Claim` or None. The rules (DESIGN §3, invariants 3 and 7):

  ============================  =========================================================
  standalone (no ZooKeeper)     always the only member: slot 0 of 1 under epoch 0
  not registered / no view      no claim
  CONNECTED, lease current      the view's slot, valid until the lease ends
  CONNECTED, lease run out      no claim (a frozen node thaws with an expired lease)
  SUSPENDED                     no claim: start nothing new, running work is untouched...
  SUSPENDED, degraded mode,     ...unless configured for degraded mode and ZooKeeper has
  suspended > one lease         been unreachable for longer than a lease: the last view's
                                slot, flagged ``degraded``, for one lease at a time
  LOST                          no claim (our ephemeral nodes are gone; others own our jobs)
  ============================  =========================================================
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scheduler.coordination.zookeeper import Connection, GroupView, MemberInfo
from scheduler.core.ownership import Claim, Fence, claim_for, owner_of

if TYPE_CHECKING:
    from scheduler.config import Role, Settings


@dataclass(frozen=True)
class MembershipSettings:
    """The part of a node's settings its Membership actor needs, as a plain value.

    The Membership worker process receives this instead of the node's
    :class:`~scheduler.config.Settings`: unpickling those would load pydantic and
    pydantic-settings into it (about 10 MiB resident of a node's budget, issue 8). The attribute
    names are those of ``Settings``, so the coordinator reads either."""

    node_id: str
    az: str
    cloud: str
    resolved_api_url: str
    zk_hosts: str
    zk_namespace: str
    zk_session_timeout: float
    degraded_mode: bool
    #: (group, role) pairs, in the order configured
    groups: tuple[tuple[str, Role], ...] = ()
    #: how the worker logs (scheduler.core.logs)
    log_format: str = "json"
    log_level: str = "INFO"
    ray_log_level: str = "ERROR"
    #: the ZooKeeper digest credential ``user:password`` ("" = none)
    resolved_zk_auth: str = field(default="", repr=False)

    @property
    def group_roles(self) -> Mapping[str, Role]:
        return dict(self.groups)

    @classmethod
    def of(cls, settings: Settings) -> MembershipSettings:
        return cls(
            node_id=settings.node_id,
            az=settings.az,
            cloud=settings.cloud,
            resolved_api_url=settings.resolved_api_url,
            zk_hosts=settings.zk_hosts,
            zk_namespace=settings.zk_namespace,
            zk_session_timeout=settings.zk_session_timeout,
            degraded_mode=settings.degraded_mode,
            groups=tuple(settings.group_roles.items()),
            log_format=settings.log_format,
            log_level=settings.log_level,
            ray_log_level=settings.ray_log_level,
            resolved_zk_auth=settings.resolved_zk_auth,
        )


class Mode(enum.StrEnum):
    """How a node takes part in membership."""

    #: no ZooKeeper configured: the node is the only member of every group
    STANDALONE = "standalone"
    #: registered in ZooKeeper
    ZOOKEEPER = "zookeeper"
    #: ZooKeeper unreachable for longer than a lease and degraded mode configured
    DEGRADED = "degraded"
    #: the node's actors are not up yet
    STARTING = "starting"
    #: the membership actor did not answer
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class LeaseState:
    """What the Membership actor knows about its session when it decides a claim."""

    registered: bool
    connection: Connection
    #: ``time.monotonic()`` of the last confirmed ZooKeeper round trip (``-inf``: none)
    confirmed_at: float
    #: ``time.monotonic()`` when the connection became SUSPENDED (None: it is not)
    suspended_since: float | None = None


def degraded_now(
    state: LeaseState, *, now: float, lease_seconds: float, degraded_mode: bool
) -> bool:
    """Configured for degraded mode and ZooKeeper unreachable for longer than a lease."""
    return (
        degraded_mode
        and state.connection == Connection.SUSPENDED
        and state.suspended_since is not None
        and now - state.suspended_since > lease_seconds
    )


def decide_claim(
    group: str,
    node_id: str,
    view: GroupView | None,
    state: LeaseState | None,
    *,
    now: float,
    lease_seconds: float,
    degraded_mode: bool,
) -> Claim | None:
    """This node's claim in ``group`` now (see the module docstring); ``state`` None: standalone."""
    if state is None:
        return Claim(group, Fence(node_id, 0), 0, 1)
    if view is None or not state.registered:
        return None
    members = view.ownership_members
    if state.connection == Connection.CONNECTED:
        valid_until = state.confirmed_at + lease_seconds
        if now >= valid_until:
            return None
        return claim_for(group, node_id, members, view.epoch, valid_until=valid_until)
    if degraded_now(state, now=now, lease_seconds=lease_seconds, degraded_mode=degraded_mode):
        return claim_for(
            group, node_id, members, view.epoch, degraded=True, valid_until=now + lease_seconds
        )
    return None


@dataclass(frozen=True)
class NodeCard:
    """One live node as the API shows it: identity, place, and its role per group."""

    node_id: str
    api_url: str
    az: str
    cloud: str
    started_at: float | None = None
    groups: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MembershipSnapshot:
    """Membership as this node sees it at one instant."""

    mode: Mode
    #: a :class:`Connection` value, ``NONE`` (standalone) or ``UNKNOWN``
    connection: str
    #: this node's own card (every mode has one)
    this_node: NodeCard
    #: the groups this node belongs to (empty standalone: it is every group's only member)
    groups: dict[str, GroupView] = field(default_factory=dict)
    #: seconds the current claim may still be acted on (None: no lease, standalone)
    lease_seconds_left: float | None = None
    #: why the snapshot could not be taken (mode UNKNOWN)
    error: str | None = None
    #: seconds since the last confirmed ZooKeeper round trip (None: none yet, standalone)
    lease_age_seconds: float | None = None

    @property
    def standalone(self) -> bool:
        return self.mode == Mode.STANDALONE

    def nodes(self) -> list[NodeCard]:
        """The distinct live members of this node's groups, by node id (standalone: itself)."""
        if self.standalone:
            return [self.this_node]
        cards: dict[str, NodeCard] = {}
        for group, view in sorted(self.groups.items()):
            for member in view.members:
                card = cards.get(member.node_id)
                if card is None:
                    card = cards[member.node_id] = _card(member)
                card.groups[group] = member.role
        return [cards[n] for n in sorted(cards)]

    def live_node_ids(self) -> frozenset[str] | None:
        """The nodes known alive now (cluster-health majorities): standalone, this node;
        registered and CONNECTED, the members of this node's groups; otherwise None (a node that
        is starting, cut off from ZooKeeper or not answering cannot tell who is alive)."""
        if self.standalone:
            return frozenset({self.this_node.node_id})
        if self.mode != Mode.ZOOKEEPER or self.connection != Connection.CONNECTED:
            return None
        return frozenset(card.node_id for card in self.nodes()) or None

    def owner_url(self, group: str, job: str) -> str | None:
        """The API URL of ``job``'s owner when that is another node; None for this node/unknown."""
        view = self.groups.get(group)
        if view is None:
            return None
        owner = owner_of(job, view.pool)
        if owner is None or owner == self.this_node.node_id:
            return None
        member = view.member(owner)
        return member.api_url if member is not None else None

    def api_urls(self, group: str) -> tuple[str, ...]:
        """This node's API URL first, then every other live member's of ``group`` (fence checks)."""
        urls = [self.this_node.api_url]
        view = self.groups.get(group)
        for member in view.members if view is not None else ():
            if member.api_url and member.api_url not in urls:
                urls.append(member.api_url)
        return tuple(urls)


def _card(member: MemberInfo) -> NodeCard:
    return NodeCard(member.node_id, member.api_url, member.az, member.cloud, member.started_at, {})


def unavailable(mode: Mode, this_node: NodeCard, error: str | None = None) -> MembershipSnapshot:
    """A snapshot when membership cannot be asked (starting, or the actor did not answer)."""
    connection = "NONE" if mode == Mode.STARTING else "UNKNOWN"
    return MembershipSnapshot(mode, connection, this_node, {}, None, error)
