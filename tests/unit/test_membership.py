"""The claim decision and the membership snapshot (scheduler.decisions.membership): pure, no
ZooKeeper."""

from __future__ import annotations

import math

from hypothesis import example, given
from hypothesis import strategies as st

from scheduler.core.ownership import owner_of
from scheduler.decisions.membership import (
    Connection,
    GroupView,
    LeaseState,
    MemberInfo,
    MembershipSnapshot,
    Mode,
    NodeCard,
    decide_claim,
    degraded_now,
)

LEASE = 2.0
NODE_IDS = st.sampled_from(["a1", "a2", "a3", "b1", "b2"])


def member(node_id: str, role: str = "active") -> MemberInfo:
    return MemberInfo(node_id, role, "az-1", "local", f"http://{node_id}:8000", 0.0)  # type: ignore[arg-type]


def view(*members: MemberInfo, epoch: int = 7) -> GroupView:
    return GroupView("g", tuple(sorted(members, key=lambda m: m.node_id)), epoch, 1)


members_st = st.lists(
    st.tuples(NODE_IDS, st.sampled_from(["active", "backup"])), min_size=1, max_size=5
).map(lambda pairs: view(*(member(n, r) for n, r in dict(pairs).items())))

lease_st = st.builds(
    LeaseState,
    registered=st.booleans(),
    connection=st.sampled_from(list(Connection)),
    confirmed_at=st.one_of(st.just(-math.inf), st.floats(0, 100)),
    suspended_since=st.one_of(st.none(), st.floats(0, 100)),
)


@given(members_st, lease_st, st.floats(0, 200), st.booleans(), NODE_IDS)
def test_a_claim_is_only_ever_for_this_nodes_pool_slot_under_the_views_epoch(
    group_view: GroupView, state: LeaseState, now: float, degraded_mode: bool, node: str
) -> None:
    claim = decide_claim(
        "g", node, group_view, state, now=now, lease_seconds=LEASE, degraded_mode=degraded_mode
    )
    if claim is None:
        return
    assert claim.fence.node_id == node and claim.fence.epoch == group_view.epoch
    assert group_view.pool[claim.index] == node and claim.size == len(group_view.pool)
    assert claim.valid(now)  # never handed out already expired
    assert state.registered
    assert state.connection != Connection.LOST
    if state.connection == Connection.SUSPENDED:  # only ever in configured degraded mode
        assert degraded_mode and claim.degraded
    else:
        assert not claim.degraded and claim.valid_until == state.confirmed_at + LEASE


@given(members_st, st.floats(0, 100), st.floats(0, 100), st.booleans())
@example(view(member("a1")), 0.3, LEASE, True)  # suspended 1.9999999999999998 s: no claim
@example(view(member("a1")), 76 / 37, LEASE, True)  # suspended 2.0000000000000004 s: a claim
def test_suspended_never_claims_unless_degraded_mode_and_longer_than_a_lease(
    group_view: GroupView, since: float, later: float, degraded_mode: bool
) -> None:
    state = LeaseState(True, Connection.SUSPENDED, since, suspended_since=since)
    now = since + later
    node = group_view.pool[0]
    claim = decide_claim(
        "g", node, group_view, state, now=now, lease_seconds=LEASE, degraded_mode=degraded_mode
    )
    # suspended for now - since (not ``later``: since + later - since rounds either way)
    assert (claim is not None) == (degraded_mode and now - since > LEASE)
    assert degraded_now(state, now=now, lease_seconds=LEASE, degraded_mode=degraded_mode) == (
        claim is not None
    )


@given(members_st)
def test_the_claims_of_all_members_partition_the_pool(group_view: GroupView) -> None:
    state = LeaseState(True, Connection.CONNECTED, 10.0)
    claims = [
        decide_claim(
            "g", m.node_id, group_view, state, now=10.5, lease_seconds=LEASE, degraded_mode=False
        )
        for m in group_view.members
    ]
    slots = sorted(c.index for c in claims if c is not None)
    assert slots == list(range(len(group_view.pool)))


def test_a_thawed_node_finds_its_lease_expired() -> None:
    state = LeaseState(True, Connection.CONNECTED, confirmed_at=10.0)
    v = view(member("a1"))
    assert decide_claim("g", "a1", v, state, now=11.9, lease_seconds=LEASE, degraded_mode=True)
    assert (
        decide_claim("g", "a1", v, state, now=12.0, lease_seconds=LEASE, degraded_mode=True) is None
    )


def test_lost_or_unregistered_or_without_a_view_claims_nothing() -> None:
    v = view(member("a1"))
    for state in (
        LeaseState(True, Connection.LOST, 10.0),
        LeaseState(False, Connection.CONNECTED, 10.0),
    ):
        assert (
            decide_claim("g", "a1", v, state, now=10, lease_seconds=9, degraded_mode=True) is None
        )
    state = LeaseState(True, Connection.CONNECTED, 10.0)
    assert decide_claim("g", "a1", None, state, now=10, lease_seconds=9, degraded_mode=True) is None


def test_standalone_is_always_the_only_member() -> None:
    claim = decide_claim("g", "solo", None, None, now=0, lease_seconds=1, degraded_mode=False)
    assert claim is not None and (claim.index, claim.size, claim.fence.epoch) == (0, 1, 0)
    assert claim.valid(1e12)


def test_backups_share_only_when_no_active_member_is_alive() -> None:
    state = LeaseState(True, Connection.CONNECTED, 0.0)
    with_active = view(member("a1"), member("b1", "backup"))
    assert (
        decide_claim("g", "b1", with_active, state, now=0, lease_seconds=1, degraded_mode=False)
        is None
    )
    backups_only = view(member("b1", "backup"), member("b2", "backup"))
    claim = decide_claim(
        "g", "b2", backups_only, state, now=0, lease_seconds=1, degraded_mode=False
    )
    assert claim is not None and (claim.index, claim.size) == (1, 2)


def test_snapshot_lists_distinct_nodes_with_their_role_per_group_and_finds_owners() -> None:
    g1 = GroupView("g1", (member("a1"), member("b1", "backup")), 3, 1)
    g2 = GroupView("g2", (member("a1", "backup"), member("b1")), 4, 1)
    snapshot = MembershipSnapshot(
        Mode.ZOOKEEPER,
        "CONNECTED",
        NodeCard("a1", "http://a1:8000", "az-1", "local"),
        {"g1": g1, "g2": g2},
        1.0,
    )
    nodes = snapshot.nodes()
    assert [(n.node_id, n.groups) for n in nodes] == [
        ("a1", {"g1": "active", "g2": "backup"}),
        ("b1", {"g1": "backup", "g2": "active"}),
    ]
    # every job of g2 is owned by b1 (the only active member): its URL; g1's by a1 itself: None
    assert snapshot.owner_url("g2", "any-job") == "http://b1:8000"
    assert snapshot.owner_url("g1", "any-job") is None
    assert snapshot.owner_url("unknown", "any-job") is None
    assert snapshot.api_urls("g2") == ("http://a1:8000", "http://b1:8000")
    assert owner_of("any-job", g2.pool) == "b1"


def test_standalone_snapshot_is_this_node_only() -> None:
    me = NodeCard("solo", "http://127.0.0.1:8000", "az-1", "local")
    snapshot = MembershipSnapshot(Mode.STANDALONE, "NONE", me)
    assert snapshot.nodes() == [me]
    assert snapshot.owner_url("default", "job") is None
    assert snapshot.api_urls("default") == ("http://127.0.0.1:8000",)


def test_live_node_ids_for_cluster_health_majorities() -> None:
    me = NodeCard("a1", "http://a1:8000", "az-1", "local")
    groups = {"g1": GroupView("g1", (member("a1"), member("b1", "backup")), 3, 1)}
    assert MembershipSnapshot(Mode.STANDALONE, "NONE", me).live_node_ids() == {"a1"}
    connected = MembershipSnapshot(Mode.ZOOKEEPER, "CONNECTED", me, groups, 1.0)
    assert connected.live_node_ids() == {"a1", "b1"}
    # a node that cannot trust its view does not say who is alive
    for mode, connection in (
        (Mode.ZOOKEEPER, "SUSPENDED"),
        (Mode.ZOOKEEPER, "LOST"),
        (Mode.DEGRADED, "SUSPENDED"),
        (Mode.STARTING, "NONE"),
        (Mode.UNKNOWN, "UNKNOWN"),
    ):
        assert MembershipSnapshot(mode, connection, me, groups).live_node_ids() is None
    assert MembershipSnapshot(Mode.ZOOKEEPER, "CONNECTED", me, {}).live_node_ids() is None


def test_the_membership_settings_carry_what_the_coordinator_reads_of_the_node_settings() -> None:
    from scheduler.config import Settings

    settings = Settings(
        node_id="n7", zk_hosts="127.0.0.1:1", groups="g1:active,g2:backup", az="az-9", cloud="aws"
    )
    plain = settings.membership_settings()
    for name in ("node_id", "az", "cloud", "resolved_api_url", "zk_hosts", "zk_namespace"):
        assert getattr(plain, name) == getattr(settings, name)
    assert plain.zk_session_timeout == settings.zk_session_timeout
    assert plain.group_roles == settings.group_roles == {"g1": "active", "g2": "backup"}
