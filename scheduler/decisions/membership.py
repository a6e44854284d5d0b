"""Membership as one node sees it, and the decisions on it. Pure: no ZooKeeper, no Ray, no clock.

The words of ZooKeeper membership, which the ZooKeeper client
(:mod:`scheduler.coordination.zookeeper`) reads and writes: a node's role in a group, its
connection state (:class:`Connection`, with its legal transitions), the data of a member znode
(:class:`MemberInfo`), a group's live members and epoch (:class:`GroupView`, built by
:func:`build_view`).

The decisions the client and the Membership actor take on them:

- :func:`decide_claim` — whether this node may act in a group right now, and on which slot: a
  :class:`~scheduler.core.ownership.Claim` or None. A node acts only behind a claim that is
  current, and ZooKeeper hiccups pause new actions without dropping running work:

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

- :func:`classify_existing` — whose is a member znode found under our node id;
- :func:`stuck_verdict` — what to do about a client that cannot reconnect, from what a probe
  client opened beside it found;
- :func:`znode_name_problem` / :func:`normalize_namespace` — which names can be znode names.

:class:`MembershipSnapshot` is the one typed value the Membership actor publishes (mode,
connection, lease, and per group the live members, pool and epoch). The API, the nudge
forwarding and the benches read it; nobody parses dictionaries.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Literal

from scheduler.core.errors import IllegalTransition, InvalidInput
from scheduler.core.ownership import Claim, Fence, Member, claim_for, owner_of, pool_of
from scheduler.decisions.epochs import Incarnation, compose_epoch, split_epoch

Role = Literal["active", "backup"]
#: the roles a node may be configured with in a group
ROLES: tuple[Role, ...] = ("active", "backup")
#: a member's role in its znode: its configured role, or ``draining`` while an operator drains
#: it (it stays a live member, in no pool: the others take its jobs; ``scheduler.core.ownership``)
MemberRole = Literal["active", "backup", "draining"]
DRAINING: MemberRole = "draining"
MEMBER_ROLES: tuple[MemberRole, ...] = (*ROLES, DRAINING)


class Connection(enum.StrEnum):
    """This node's standing with ZooKeeper; each state says what is safe.

    - ``CONNECTED``: session live, our member znodes exist, the views are current. The node may
      act on what it owns (each action still behind a fenced store write).
    - ``SUSPENDED``: the connection dropped; the session may still be alive. Start no new
      action, keep running work; views are frozen. A SUSPENDED period longer than the session
      timeout means the server may have expired the session meanwhile: only the store's fencing
      protects then.
    - ``LOST``: the session expired (or the client had to be recreated): our member znodes are
      gone and so is every claim. Own nothing until registered again, fresh views and
      CONNECTED have arrived. Also the state before the client starts and after it stops.

    Legal transitions (``_TRANSITIONS``; :func:`next_state` applies one)::

        LOST      -> CONNECTED   registered on a (new) session and every view read
        CONNECTED -> SUSPENDED   connection dropped
        SUSPENDED -> CONNECTED   reconnected with the same session, views re-read
        CONNECTED -> LOST        session expired
        SUSPENDED -> LOST        session expired, or the client was recreated after being stuck
    """

    #: registered, views current: may act on what it owns (each action behind a fenced write)
    CONNECTED = "CONNECTED"
    #: connection down, session perhaps alive: start nothing new, keep running work
    SUSPENDED = "SUSPENDED"
    #: session gone with our member znodes: own nothing until re-registered and re-read
    LOST = "LOST"


_TRANSITIONS: dict[Connection, frozenset[Connection]] = {
    Connection.LOST: frozenset({Connection.CONNECTED}),
    Connection.CONNECTED: frozenset({Connection.SUSPENDED, Connection.LOST}),
    Connection.SUSPENDED: frozenset({Connection.CONNECTED, Connection.LOST}),
}


def next_state(current: Connection, new: Connection) -> Connection:
    """``new`` if the table allows ``current -> new``; raise IllegalTransition otherwise."""
    if new not in _TRANSITIONS[current]:
        raise IllegalTransition(f"connection state {current} cannot become {new}")
    return new


@dataclass(frozen=True)
class NodeInfo:
    """What a node publishes about itself in every group it joins."""

    node_id: str
    az: str = "az-1"
    cloud: str = "local"
    api_url: str = ""
    #: epoch seconds when the node started (the caller reads the clock)
    started_at: float = field(kw_only=True)

    def as_member(self, role: MemberRole) -> MemberInfo:
        return MemberInfo(self.node_id, role, self.az, self.cloud, self.api_url, self.started_at)


@dataclass(frozen=True)
class MemberInfo:
    """One live membership: the data of an ephemeral member znode."""

    node_id: str
    role: MemberRole
    az: str
    cloud: str
    api_url: str
    started_at: float  # epoch seconds

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> MemberInfo:
        """Decode member data; raise InvalidInput on anything that is not a MemberInfo."""
        try:
            raw = json.loads(data.decode("utf-8"))
            info = cls(
                node_id=str(raw["node_id"]),
                role=raw["role"],
                az=str(raw["az"]),
                cloud=str(raw["cloud"]),
                api_url=str(raw["api_url"]),
                started_at=float(raw["started_at"]),
            )
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise InvalidInput(f"member data is not a MemberInfo: {data[:200]!r}") from exc
        if info.role not in MEMBER_ROLES:
            raise InvalidInput(f"member {info.node_id!r} has an unknown role {info.role!r}")
        return info


@dataclass(frozen=True)
class GroupView:
    """The live members of a group and its epoch, read together under one session."""

    group: str
    members: tuple[MemberInfo, ...]  # sorted by node_id
    #: ``(generation << 32) | cversion`` of the group's members znode (scheduler.decisions.epochs)
    epoch: int
    session_id: int  # the session that read it
    #: the members znode's membership generation (the epoch's high bits)
    generation: int = 0
    #: which creation of the members znode the view was read from (None: it did not exist)
    incarnation: Incarnation | None = None

    def __post_init__(self) -> None:
        if split_epoch(self.epoch)[0] != self.generation:
            raise InvalidInput(f"epoch {self.epoch} is not of generation {self.generation}")

    @property
    def cversion(self) -> int:
        """The members znode's child version (the epoch's low 32 bits)."""
        return split_epoch(self.epoch)[1]

    @property
    def ownership_members(self) -> tuple[Member, ...]:
        return tuple(Member(m.node_id, m.role) for m in self.members)

    @property
    def pool(self) -> tuple[str, ...]:
        return pool_of(self.ownership_members)

    @property
    def node_ids(self) -> tuple[str, ...]:
        return tuple(m.node_id for m in self.members)

    def owner_of(self, job_name: str) -> str | None:
        return owner_of(job_name, self.pool)

    def member(self, node_id: str) -> MemberInfo | None:
        return next((m for m in self.members if m.node_id == node_id), None)


def build_view(
    group: str,
    data: Mapping[str, bytes],
    cversion: int,
    session_id: int,
    *,
    generation: int = 0,
    incarnation: Incarnation | None = None,
) -> tuple[GroupView, list[str]]:
    """A GroupView from the member znodes' names and data, and why each member znode it left
    out was left out (one line each, for the caller's log): undecodable data, or data naming
    another node (the znode name is the member's identity)."""
    members = []
    ignored = []
    for name in sorted(data):
        try:
            info = MemberInfo.from_bytes(data[name])
        except InvalidInput as exc:
            ignored.append(f"ignoring member znode {name!r}: {exc.message}")
            continue
        if info.node_id != name:
            ignored.append(f"member znode {name!r} carries data of {info.node_id!r}")
            continue
        members.append(info)
    epoch = compose_epoch(generation, cversion)
    return GroupView(group, tuple(members), epoch, session_id, generation, incarnation), ignored


class ExistingMember(enum.StrEnum):
    """Whose is a member znode found under our node id."""

    OURS = "ours"  # created by the current session
    STALE_OURS = "stale-ours"  # left by an earlier session of this coordinator
    FOREIGN = "foreign"  # another live node, or not ephemeral at all


def classify_existing(
    ephemeral_owner: int, current_session: int, own_sessions: Iterable[int]
) -> ExistingMember:
    """Whose is a member znode under our node id, from its ephemeral owner (0: not ephemeral)."""
    if ephemeral_owner == current_session:
        return ExistingMember.OURS
    if ephemeral_owner != 0 and ephemeral_owner in set(own_sessions):
        return ExistingMember.STALE_OURS
    return ExistingMember.FOREIGN


class StuckVerdict(enum.StrEnum):
    """What to do about a client that cannot reconnect, with a probe client opened beside it."""

    #: nothing known yet (the server is unreachable, or the old client may still get back in)
    WAIT = "wait"
    #: the old client is connected again (same session, or kazoo's own new one): drop the probe
    KEEP = "keep"
    #: the server will never take the old session back: the probe becomes the client
    REPLACE = "replace"


def stuck_verdict(
    *,
    old_connected: bool,
    old_last_zxid: int,
    probe_connected_for: float | None,
    server_zxid: int | None,
    grace: float,
) -> StuckVerdict:
    """Decide about a disconnected client from what its probe found.

    ``probe_connected_for``: seconds the probe has been connected (None: not connected);
    ``server_zxid``: the last zxid of the server the probe reached, after a sync (None: not read
    yet). A server refuses a session whose client has seen a zxid above its own last one ("has
    seen zxid ... client must try another server"): after a wipe that is for ever.
    """
    if old_connected:
        return StuckVerdict.KEEP
    if probe_connected_for is None:
        return StuckVerdict.WAIT
    if server_zxid is not None and server_zxid < old_last_zxid:
        return StuckVerdict.REPLACE
    if probe_connected_for >= grace:
        return StuckVerdict.REPLACE
    return StuckVerdict.WAIT


def znode_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be one znode name, or None."""
    if not name:
        return "must not be empty"
    if name in (".", ".."):
        return "must not be '.' or '..'"
    if "/" in name:
        return "must not contain '/'"
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in name):
        return "must not contain control characters"
    return None


def normalize_namespace(namespace: str) -> str:
    """``drover/`` → ``/drover``; the root ``/`` becomes the empty prefix."""
    parts = [p for p in namespace.strip().split("/") if p]
    for part in parts:
        problem = znode_name_problem(part)
        if problem is not None or part == "zookeeper":
            raise InvalidInput(
                f"ZooKeeper namespace {namespace!r}: {part!r} {problem or 'is reserved'}"
            )
    return "".join(f"/{p}" for p in parts)


@dataclass(frozen=True)
class MembershipSettings:
    """The part of a node's settings its Membership actor needs, as a plain value.

    The Membership worker process receives this instead of the node's
    :class:`~scheduler.config.Settings` (``Settings.membership_settings()`` makes it): unpickling
    those would load pydantic and pydantic-settings into it (about 10 MiB resident). The
    attribute names are those of ``Settings``, so the coordinator reads either."""

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
