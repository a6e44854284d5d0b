"""The model the ZooKeeper client works with (scheduler.decisions.membership: member data,
views, the state table, names, the stuck-client verdict) and the client's own checks of its
arguments."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.coordination.zookeeper import Coordinator
from scheduler.core.errors import IllegalTransition, InvalidInput
from scheduler.core.ownership import Member, owner_of, pool_of
from scheduler.decisions.epochs import Incarnation
from scheduler.decisions.membership import (
    _TRANSITIONS,
    Connection,
    ExistingMember,
    GroupView,
    MemberInfo,
    NodeInfo,
    StuckVerdict,
    build_view,
    classify_existing,
    next_state,
    normalize_namespace,
    stuck_verdict,
)

texts = st.text(min_size=1, max_size=20)
members = st.builds(
    MemberInfo,
    node_id=texts,
    role=st.sampled_from(["active", "backup"]),
    az=st.text(max_size=10),
    cloud=st.text(max_size=10),
    api_url=st.text(max_size=30),
    started_at=st.floats(min_value=0, max_value=4e9, allow_nan=False),
)


@given(members)
def test_member_info_round_trips_through_json(info: MemberInfo) -> None:
    data = info.to_bytes()
    assert MemberInfo.from_bytes(data) == info
    assert json.loads(data)["node_id"] == info.node_id


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[]",
        b'{"node_id": "n1"}',
        b'{"node_id":"n1","role":"leader","az":"a","cloud":"c","api_url":"u","started_at":1}',
        b'{"node_id":"n1","role":"active","az":"a","cloud":"c","api_url":"u","started_at":"x"}',
        b"\xff\xfe",
    ],
)
def test_member_info_refuses_foreign_data(data: bytes) -> None:
    with pytest.raises(InvalidInput):
        MemberInfo.from_bytes(data)


def test_node_info_becomes_a_member_per_role() -> None:
    node = NodeInfo("n1", az="az-2", cloud="gcp", api_url="http://x", started_at=12.5)
    assert node.as_member("backup") == MemberInfo("n1", "backup", "az-2", "gcp", "http://x", 12.5)


def _member(node_id: str, role: str = "active") -> MemberInfo:
    return MemberInfo(node_id, role, "az", "cloud", f"http://{node_id}", 1.0)  # type: ignore[arg-type]


def test_build_view_sorts_and_skips_bad_members() -> None:
    data = {
        "n3": _member("n3").to_bytes(),
        "n1": _member("n1", "backup").to_bytes(),
        "junk": b"{",
        "n2": _member("someone-else").to_bytes(),  # name and data disagree
    }
    view, ignored = build_view("g", data, cversion=7, session_id=42)
    assert ignored == [
        "ignoring member znode 'junk': member data is not a MemberInfo: b'{'",
        "member znode 'n2' carries data of 'someone-else'",
    ]
    assert view.node_ids == ("n1", "n3")
    assert (view.group, view.epoch, view.session_id) == ("g", 7, 42)
    assert (view.generation, view.cversion, view.incarnation) == (0, 7, None)
    assert view.ownership_members == (Member("n1", "backup"), Member("n3", "active"))
    assert view.pool == ("n3",)
    assert view.member("n1") == _member("n1", "backup")
    assert view.member("n2") is None


@given(st.dictionaries(st.text(min_size=1, max_size=8), st.sampled_from(["active", "backup"])))
def test_view_pool_and_owner_follow_the_ownership_rule(roles: dict[str, str]) -> None:
    data = {n: _member(n, r).to_bytes() for n, r in roles.items()}
    view, ignored = build_view("g", data, cversion=1, session_id=1)
    assert ignored == []
    assert list(view.node_ids) == sorted(roles)
    expected_pool = pool_of(Member(n, r) for n, r in roles.items())
    assert view.pool == expected_pool
    assert view.owner_of("job-1") == owner_of("job-1", expected_pool)


def test_build_view_composes_the_epoch_from_generation_and_cversion() -> None:
    incarnation = Incarnation(0x200000003, 1_700_000_000_123)
    view, _ = build_view("g", {}, 5, 1, generation=3, incarnation=incarnation)
    assert view.epoch == (3 << 32) | 5 and (view.generation, view.cversion) == (3, 5)
    assert view.incarnation == incarnation
    assert view.epoch > build_view("g", {}, 2**31, 1, generation=2)[0].epoch


def test_a_view_refuses_an_epoch_of_another_generation() -> None:
    with pytest.raises(InvalidInput, match="generation"):
        GroupView("g", (), 7, 1, generation=1)


def test_empty_view_owns_nothing() -> None:
    view = GroupView("g", (), 0, 1)
    assert view.pool == () and view.owner_of("job") is None


def test_existing_member_classification() -> None:
    assert classify_existing(5, 5, {3, 5}) is ExistingMember.OURS
    assert classify_existing(3, 5, {3, 5}) is ExistingMember.STALE_OURS
    assert classify_existing(9, 5, {3, 5}) is ExistingMember.FOREIGN
    assert classify_existing(0, 5, {0, 5}) is ExistingMember.FOREIGN  # not ephemeral


def test_state_table() -> None:
    legal = {(a, b) for a, targets in _TRANSITIONS.items() for b in targets}
    assert legal == {
        (Connection.LOST, Connection.CONNECTED),
        (Connection.CONNECTED, Connection.SUSPENDED),
        (Connection.CONNECTED, Connection.LOST),
        (Connection.SUSPENDED, Connection.CONNECTED),
        (Connection.SUSPENDED, Connection.LOST),
    }
    for a in Connection:
        for b in Connection:
            if (a, b) in legal:
                assert next_state(a, b) is b
            else:
                with pytest.raises(IllegalTransition):
                    next_state(a, b)


@pytest.mark.parametrize(
    ("given_ns", "expected"),
    [("/drover", "/drover"), ("drover/", "/drover"), ("/a//b/", "/a/b"), ("/", ""), ("", "")],
)
def test_namespace_normalization(given_ns: str, expected: str) -> None:
    assert normalize_namespace(given_ns) == expected


@pytest.mark.parametrize("bad", ["/zookeeper", "/a/../b", "/a/\x01"])
def test_namespace_refuses_bad_paths(bad: str) -> None:
    with pytest.raises(InvalidInput):
        normalize_namespace(bad)


def _noop(event: object) -> None:
    pass


@pytest.mark.parametrize(
    ("node_id", "groups", "message"),
    [
        ("a/b", {"g": "active"}, "node id"),
        ("", {"g": "active"}, "node id"),
        ("n1", {"g/x": "active"}, "group"),
        ("n1", {"..": "active"}, "group"),
        ("n1", {"g": "leader"}, "role"),
    ],
)
def test_coordinator_refuses_bad_identity(node_id: str, groups: dict, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        Coordinator("127.0.0.1:1", "/drover", NodeInfo(node_id, started_at=1.0), groups, 2.0, _noop)


def test_coordinator_from_settings() -> None:
    from scheduler.config import Settings

    settings = Settings(
        node_id="n7",
        zk_hosts="127.0.0.1:1",
        zk_namespace="/dep",
        zk_session_timeout=3.0,
        groups="g1:active,g2:backup",
        az="az-9",
        cloud="aws",
        api_port=8123,
    )
    coordinator = Coordinator.from_settings(settings, _noop)
    assert coordinator.groups == {"g1": "active", "g2": "backup"}
    assert coordinator.node.az == "az-9" and coordinator.node.api_url == "http://127.0.0.1:8123"
    assert coordinator.members_path("g1") == "/dep/groups/g1/members"
    assert coordinator.state is Connection.LOST and coordinator.views() == {}


def test_start_without_a_server_fails_clearly_and_leaves_nothing_running() -> None:
    import threading

    from scheduler.core.errors import CoordinationUnavailable
    from tests.support.zkserver import free_port

    coordinator = Coordinator(
        f"127.0.0.1:{free_port()}",
        "/drover",
        NodeInfo("n1", started_at=1.0),
        {"g": "active"},
        2.0,
        _noop,
    )
    with pytest.raises(CoordinationUnavailable, match="no ZooKeeper session"):
        coordinator.start(timeout=1.0)
    coordinator.stop()
    assert not [t for t in threading.enumerate() if t.name.startswith("coordinator-")]
    with pytest.raises(IllegalTransition):
        coordinator.start(timeout=1.0)


# --- a client stuck against a server that refuses its session -------------------------------------

GRACE = 3.0


def _verdict(
    old_connected: bool, last_zxid: int, connected_for: float | None, server_zxid: int | None
) -> StuckVerdict:
    """What to do with a stuck client, with the grace of these tests."""
    return stuck_verdict(
        old_connected=old_connected,
        old_last_zxid=last_zxid,
        probe_connected_for=connected_for,
        server_zxid=server_zxid,
        grace=GRACE,
    )


@given(
    st.integers(min_value=0, max_value=2**63),
    st.none() | st.floats(min_value=0, max_value=100),
    st.none() | st.integers(min_value=0, max_value=2**63),
)
def test_a_reconnected_client_is_always_kept(
    last_zxid: int, connected_for: float | None, server_zxid: int | None
) -> None:
    verdict = _verdict(True, last_zxid, connected_for, server_zxid)
    assert verdict is StuckVerdict.KEEP


@given(st.integers(min_value=0, max_value=2**63), st.none() | st.integers(min_value=0))
def test_nothing_is_replaced_while_the_server_is_unreachable(
    last_zxid: int, server_zxid: int | None
) -> None:
    verdict = _verdict(False, last_zxid, None, server_zxid)
    assert verdict is StuckVerdict.WAIT


@given(
    st.integers(min_value=1, max_value=2**63),
    st.floats(min_value=0, max_value=100),
    st.data(),
)
def test_a_server_behind_what_the_client_saw_is_replaced_at_once(
    last_zxid: int, connected_for: float, data: st.DataObject
) -> None:
    """The server's rule ("has seen zxid"): it never accepts the old session back."""
    server_zxid = data.draw(st.integers(min_value=0, max_value=last_zxid - 1))
    verdict = _verdict(False, last_zxid, connected_for, server_zxid)
    assert verdict is StuckVerdict.REPLACE


@given(
    st.integers(min_value=0, max_value=2**62),
    st.integers(min_value=0, max_value=2**62),
    st.booleans(),
    st.floats(min_value=0, max_value=100),
)
def test_a_server_that_kept_its_data_gets_the_grace_first(
    last_zxid: int, ahead: int, zxid_read: bool, connected_for: float
) -> None:
    """Server zxid at or above ours (or not read yet): the old client may still get back in;
    it is replaced only once the probe has been connected for the grace."""
    server_zxid = last_zxid + ahead if zxid_read else None
    verdict = _verdict(False, last_zxid, connected_for, server_zxid)
    assert verdict is (StuckVerdict.REPLACE if connected_for >= GRACE else StuckVerdict.WAIT)
