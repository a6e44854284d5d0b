"""scheduler.coordination.zookeeper against real ZooKeeper.

The shared server (DROVER_TEST_ZK_HOSTS, tickTime 500) carries registration, views, duplicates,
graceful stop, session expiry and namespaces, each test in its own namespace. Tests that stop,
restart or wipe a server use a private one (tests/support/zkserver.py) on a port of their own.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from scheduler.coordination.zookeeper import (
    ConnectionChanged,
    Coordinator,
    CoordinatorEvent,
    GenerationResolver,
    Registered,
    ViewChanged,
)
from scheduler.core.errors import DuplicateNode
from scheduler.decisions.epochs import compose_epoch
from scheduler.decisions.membership import Connection, GroupView, MemberInfo, NodeInfo, Role
from scheduler.store.db import Store
from scheduler.store.generations import GenerationResolver as StoreResolver
from scheduler.store.generations import recorded_generations
from tests.conftest import wait_until
from tests.support.schema import install_head_schema
from tests.support.zkserver import ZkServer, delete_tree, free_port

pytestmark = [pytest.mark.integration, pytest.mark.serial]

SESSION = 2.0  # seconds; the servers' tickTime 500 allows 1–10 s
#: a server restart must fit in the session with room to spare: the JVM took 2.9 s beside two
#: e2e modules, which expired a 2 s session
OUTAGE_SESSION = 8.0


class Recorder:
    """Collects a coordinator's events with their arrival time (monotonic)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[tuple[float, CoordinatorEvent]] = []

    def __call__(self, event: CoordinatorEvent) -> None:
        with self._lock:
            self.events.append((time.monotonic(), event))

    def snapshot(self) -> list[CoordinatorEvent]:
        with self._lock:
            return [event for _, event in self.events]

    def states(self) -> list[Connection]:
        return [e.state for e in self.snapshot() if isinstance(e, ConnectionChanged)]

    def views(self, group: str) -> list[GroupView]:
        return [
            e.view for e in self.snapshot() if isinstance(e, ViewChanged) and e.view.group == group
        ]

    def last_view(self, group: str) -> GroupView | None:
        views = self.views(group)
        return views[-1] if views else None

    def view_where(
        self, group: str, test: Callable[[GroupView], bool], *, after: float = 0.0
    ) -> GroupView | None:
        with self._lock:
            for at, event in self.events:
                if at >= after and isinstance(event, ViewChanged) and event.view.group == group:
                    if test(event.view):
                        return event.view
        return None

    def time_of(
        self, test: Callable[[CoordinatorEvent], bool], *, after: float = 0.0
    ) -> float | None:
        with self._lock:
            return next((at for at, e in self.events if at >= after and test(e)), None)


class Nodes:
    """Factory of coordinators in one namespace; stops them all at the end.

    With a ``store``, every coordinator resolves membership generations in it (as a node does);
    without, every generation is 0 and epochs are bare child versions."""

    def __init__(self, hosts: str, namespace: str, store: Store | None = None) -> None:
        self.hosts = hosts
        self.namespace = namespace
        self.store = store
        self.started: list[Coordinator] = []

    def make(
        self,
        node_id: str,
        groups: dict[str, Role],
        *,
        namespace: str | None = None,
        az: str = "az-1",
        session_timeout: float = SESSION,
    ) -> tuple[Coordinator, Recorder]:
        recorder = Recorder()
        node = NodeInfo(
            node_id, az=az, cloud="test", api_url=f"http://127.0.0.1/{node_id}", started_at=1.0
        )
        resolver: GenerationResolver | None = None
        if self.store is not None:
            resolver = StoreResolver(self.store, node_id)
        coordinator = Coordinator(
            self.hosts,
            namespace or self.namespace,
            node,
            groups,
            session_timeout,
            recorder,
            resolve_generation=resolver,
        )
        self.started.append(coordinator)
        return coordinator, recorder

    def start(
        self, node_id: str, groups: dict[str, Role], **kwargs: object
    ) -> tuple[Coordinator, Recorder]:
        coordinator, recorder = self.make(node_id, groups, **kwargs)  # type: ignore[arg-type]
        coordinator.start(timeout=10)
        return coordinator, recorder

    def stop_all(self) -> None:
        for coordinator in self.started:
            coordinator.stop()
        leftover = [t.name for t in threading.enumerate() if t.name.startswith("coordinator-")]
        assert not leftover, f"coordinator threads left running: {leftover}"


@pytest.fixture
def namespace() -> str:
    return f"/drover-test-{secrets.token_hex(4)}"


@pytest.fixture
def nodes(zk_hosts: str, namespace: str) -> Iterator[Nodes]:
    factory = Nodes(zk_hosts, namespace)
    try:
        yield factory
    finally:
        factory.stop_all()
        delete_tree(zk_hosts, namespace)


@pytest.fixture
def private_zk(tmp_path: Path) -> Iterator[ZkServer]:
    server = ZkServer(free_port(), tmp_path / "zk-data")
    try:
        server.start()
        yield server
    finally:
        server.close()


@pytest.fixture
def generation_store(tmp_path: Path) -> Iterator[Store]:
    """A migrated SQLite store for membership generations (tests/integration/test_generations.py
    covers MariaDB too)."""
    store = Store(f"sqlite:///{tmp_path / 'drover.db'}")
    install_head_schema(store)
    try:
        yield store
    finally:
        store.dispose()


def generations_of(store: Store, group: str) -> dict[int, int]:
    """czxid -> membership generation of every recorded incarnation of ``group``."""
    with store.session() as session:
        return {i.czxid: g for i, g in recorded_generations(session, group).items()}


@pytest.fixture
def private_nodes(private_zk: ZkServer, generation_store: Store) -> Iterator[Nodes]:
    factory = Nodes(private_zk.hosts, "/drover", generation_store)
    try:
        yield factory
    finally:
        factory.stop_all()


def expire_session(coordinator: Coordinator, hosts: str) -> int:
    """Expire ``coordinator``'s session the way kazoo's test harness does: a second client joins
    the same session (id + password) and closes it. Returns the expired session id."""
    client = coordinator._client  # noqa: SLF001 - test-only access to the live kazoo client
    assert client is not None and client.client_id is not None
    session_id, password = client.client_id
    twin = KazooClient(hosts=hosts, client_id=(session_id, password), timeout=SESSION)
    twin.start(timeout=10)
    assert twin.client_id is not None and twin.client_id[0] == session_id
    twin.stop()
    twin.close()
    return int(session_id)


def member_owner(hosts: str, path: str) -> int:
    """The ephemeralOwner of znode ``path``, read by a separate client."""
    client = KazooClient(hosts=hosts, timeout=5.0)
    client.start(timeout=10)
    try:
        _, stat = client.get(path)
        return int(stat.ephemeralOwner)
    finally:
        client.stop()
        client.close()


# --- shared server --------------------------------------------------------------------------


def test_registration_views_and_epochs(nodes: Nodes, zk_hosts: str) -> None:
    n1, rec1 = nodes.start("n1", {"g1": "backup", "g2": "active"}, az="az-1")
    e1 = n1.views()["g1"].epoch
    n3, _ = nodes.start("n3", {"g1": "active"}, az="az-2")
    n2, _ = nodes.start("n2", {"g1": "active"}, az="az-3")

    full = wait_until(
        lambda: rec1.view_where("g1", lambda v: v.node_ids == ("n1", "n2", "n3")),
        timeout=5,
        what="n1 to see n1, n2, n3 in g1",
    )
    epochs = [v.epoch for v in rec1.views("g1")]
    assert epochs == sorted(epochs) and len(set(epochs)) == len(epochs), epochs
    assert full.epoch == e1 + 2  # one child version per join
    assert full.pool == ("n2", "n3")
    assert [m.role for m in full.ownership_members] == ["backup", "active", "active"]
    assert full.member("n3") == MemberInfo(
        "n3", "active", "az-2", "test", "http://127.0.0.1/n3", n3.node.started_at
    )
    assert full.session_id == n1.session_id
    assert full.owner_of("job-a") in ("n2", "n3")

    # every node reads the same membership and epoch; g2 holds n1 only
    assert n2.refresh_view("g1").node_ids == full.node_ids
    assert n3.refresh_view("g1").epoch == full.epoch
    g2 = n1.views()["g2"]
    assert g2.node_ids == ("n1",) and g2.pool == ("n1",)

    # the znode carries the member data, ephemeral under the registering session
    client = KazooClient(hosts=zk_hosts, timeout=5.0)
    client.start(timeout=10)
    try:
        data, stat = client.get(f"{nodes.namespace}/groups/g1/members/n2")
        assert MemberInfo.from_bytes(data).az == "az-3"
        assert stat.ephemeralOwner == n2.session_id
    finally:
        client.stop()
        client.close()

    # the first events of a node: Registered, its views, then CONNECTED
    first = rec1.snapshot()
    assert first[0] == Registered(n1.session_id)  # type: ignore[arg-type]
    assert first[1:3] and all(isinstance(e, ViewChanged) for e in first[1:3])
    assert first[3] == ConnectionChanged(Connection.CONNECTED)
    assert n1.state is Connection.CONNECTED
    rtt = n1.ping()
    assert 0 < rtt < 1.0
    print(f"\nping round trip {rtt * 1000:.2f} ms")


def test_a_drained_node_stays_a_member_in_no_pool_under_a_new_epoch(nodes: Nodes) -> None:
    a, rec_a = nodes.start("a", {"g1": "active"})
    b, _ = nodes.start("b", {"g1": "active", "g2": "backup"})
    wait_until(lambda: rec_a.view_where("g1", lambda v: "b" in v.pool), timeout=5, what="b")
    before = a.views()["g1"].epoch

    views = b.set_draining(True)
    assert b.draining
    drained = views["g1"].member("b")
    assert drained is not None and drained.role == "draining"
    assert views["g1"].pool == ("a",) and views["g1"].epoch == before + 2  # left, came back
    assert views["g2"].node_ids == ("b",) and views["g2"].pool == ()
    seen = wait_until(
        lambda: rec_a.view_where("g1", lambda v: v.pool == ("a",) and "b" in v.node_ids),
        timeout=5,
        what="a to see b draining",
    )
    assert seen.epoch > before and seen.owner_of("any-job") == "a"
    assert b.set_draining(True)["g1"].epoch == views["g1"].epoch  # no change: no new epoch

    back = b.set_draining(False)
    assert not b.draining and back["g1"].pool == ("a", "b")
    assert back["g1"].epoch == views["g1"].epoch + 2
    member = back["g2"].member("b")
    assert member is not None and member.role == "backup" and back["g2"].pool == ("b",)
    wait_until(
        lambda: (
            rec_a.view_where("g1", lambda v: v.pool == ("a", "b"), after=0.0)
            and a.views()["g1"].pool == ("a", "b")
        ),
        timeout=5,
        what="a to see b back in the pool",
    )


def test_duplicate_id_refused_while_alive_then_accepted(nodes: Nodes, zk_hosts: str) -> None:
    first, _ = nodes.start("dup", {"g1": "active", "g2": "active"})
    path = f"{nodes.namespace}/groups/g2/members/dup"
    owner = member_owner(zk_hosts, path)

    second, _ = nodes.make("dup", {"g2": "active"})
    with pytest.raises(DuplicateNode, match="already registered in group 'g2'"):
        second.start(timeout=10)
    assert member_owner(zk_hosts, path) == owner  # the live node's znode is untouched
    assert first.refresh_view("g2").node_ids == ("dup",)

    first.stop()
    third, _ = nodes.start("dup", {"g2": "active"})
    assert member_owner(zk_hosts, path) == third.session_id

    # a node restarting while its predecessor's znode still exists may wait for it to vanish
    fourth, rec4 = nodes.make("dup", {"g2": "backup"})
    started = threading.Event()
    errors: list[BaseException] = []

    def start_fourth() -> None:
        try:
            fourth.start(timeout=10, wait_for_duplicate=10)
            started.set()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    thread = threading.Thread(target=start_fourth)
    thread.start()
    try:
        assert not started.wait(0.5)  # still waiting: the other one is alive
        third.stop()
        wait_until(lambda: started.is_set() or errors, timeout=10, what="the waiting node to start")
    finally:
        thread.join(15)
    assert not errors, errors
    assert fourth.views()["g2"].members[0].role == "backup"
    assert rec4.states() == [Connection.CONNECTED]


def test_graceful_stop_is_seen_by_others_within_a_second(nodes: Nodes) -> None:
    a, rec_a = nodes.start("a", {"g1": "active"})
    b, _ = nodes.start("b", {"g1": "active"})
    wait_until(lambda: rec_a.view_where("g1", lambda v: "b" in v.node_ids), timeout=5, what="b")
    before = a.views()["g1"].epoch

    began = time.monotonic()
    b.stop()
    gone = wait_until(
        lambda: rec_a.time_of(
            lambda e: isinstance(e, ViewChanged) and "b" not in e.view.node_ids, after=began
        ),
        timeout=5,
        what="a to see b leave",
    )
    handover = gone - began
    print(f"\ngraceful stop seen by the other member after {handover * 1000:.1f} ms")
    assert handover < 1.0
    view = a.views()["g1"]
    assert view.node_ids == ("a",) and view.epoch == before + 1 and view.pool == ("a",)
    assert b.state is Connection.LOST and b.views() == {}


def test_session_expiry_reregisters_under_a_new_session(nodes: Nodes, zk_hosts: str) -> None:
    a, rec_a = nodes.start("a", {"g1": "active"})
    b, rec_b = nodes.start("b", {"g1": "backup"})
    wait_until(lambda: rec_a.view_where("g1", lambda v: "b" in v.node_ids), timeout=5, what="b")
    epoch_before = a.views()["g1"].epoch
    old_session = b.session_id

    began = time.monotonic()
    assert expire_session(b, zk_hosts) == old_session
    wait_until(
        lambda: b.state is Connection.CONNECTED and b.session_id not in (None, old_session),
        timeout=10,
        what="b to re-register under a new session",
    )
    back = time.monotonic() - began
    print(f"\nsession expiry to re-registered: {back * 1000:.0f} ms")

    # b saw LOST, then Registered(new), then a view of the new session with itself, then CONNECTED
    events = [e for _, e in rec_b.events if _ >= began]
    kinds = [
        type(e).__name__ + (f"({e.state})" if isinstance(e, ConnectionChanged) else "")
        for e in events
    ]
    lost = events.index(ConnectionChanged(Connection.LOST))
    registered = events.index(Registered(b.session_id))  # type: ignore[arg-type]
    connected = events.index(ConnectionChanged(Connection.CONNECTED))
    assert lost < registered < connected, kinds
    new_views = [
        i
        for i, e in enumerate(events)
        if isinstance(e, ViewChanged) and e.view.session_id == b.session_id
    ]
    assert new_views and registered < min(new_views) < connected, kinds
    assert "b" in events[new_views[0]].view.node_ids  # type: ignore[union-attr]
    assert member_owner(zk_hosts, f"{nodes.namespace}/groups/g1/members/b") == b.session_id

    # a saw b leave and come back, each a new epoch
    left = wait_until(
        lambda: rec_a.view_where("g1", lambda v: v.node_ids == ("a",), after=began),
        timeout=5,
        what="a to see b leave",
    )
    returned = wait_until(
        lambda: rec_a.view_where(
            "g1", lambda v: v.node_ids == ("a", "b") and v.epoch > left.epoch, after=began
        ),
        timeout=5,
        what="a to see b come back",
    )
    assert epoch_before < left.epoch < returned.epoch
    assert (
        a.state is Connection.CONNECTED
        and ConnectionChanged(Connection.LOST) not in rec_a.snapshot()
    )
    assert b.refresh_view("g1").epoch == returned.epoch


def test_namespaces_are_isolated(nodes: Nodes, zk_hosts: str) -> None:
    other = f"{nodes.namespace}-other"
    try:
        x, rec_x = nodes.start("same", {"g1": "active"})
        y, rec_y = nodes.start("same", {"g1": "backup"}, namespace=other)  # same id: no conflict
        z, _ = nodes.start("z", {"g1": "active"}, namespace=other)
        wait_until(
            lambda: rec_y.view_where("g1", lambda v: v.node_ids == ("same", "z")),
            timeout=5,
            what="y to see z",
        )
        assert x.refresh_view("g1").node_ids == ("same",)
        assert [v.node_ids for v in rec_x.views("g1")] == [("same",)]
        assert y.refresh_view("g1").members[0].role == "backup"
    finally:
        delete_tree(zk_hosts, other)


# --- private server: outages --------------------------------------------------------------------


def test_short_outage_suspends_and_keeps_the_session(
    private_zk: ZkServer, private_nodes: Nodes
) -> None:
    """A restart (as short as the JVM allows: 1.5–3 s here, more on a loaded machine) shorter
    than the session keeps both sessions and members."""
    a, rec_a = private_nodes.start("a", {"g1": "active"}, session_timeout=OUTAGE_SESSION)
    b, rec_b = private_nodes.start("b", {"g1": "active"}, session_timeout=OUTAGE_SESSION)
    wait_until(lambda: len(a.views()["g1"].members) == 2, timeout=5, what="a to see b")
    sessions = (a.session_id, b.session_id)
    view = a.views()["g1"]

    began = time.monotonic()
    private_zk.stop()
    wait_until(
        lambda: a.state is Connection.SUSPENDED and b.state is Connection.SUSPENDED,
        timeout=5,
        what="both SUSPENDED",
    )
    suspended_after = (
        rec_a.time_of(lambda e: e == ConnectionChanged(Connection.SUSPENDED)) or 0
    ) - began
    with pytest.raises(Exception, match="not connected"):
        a.refresh_view("g1")
    private_zk.start()
    wait_until(
        lambda: a.state is Connection.CONNECTED and b.state is Connection.CONNECTED,
        timeout=10,
        what="both CONNECTED again",
    )
    outage = time.monotonic() - began
    print(
        f"\nSUSPENDED {suspended_after * 1000:.0f} ms after SIGTERM to the server; "
        f"CONNECTED again {outage:.2f} s after (session {OUTAGE_SESSION} s)"
    )
    for rec in (rec_a, rec_b):
        assert rec.states() == [Connection.CONNECTED, Connection.SUSPENDED, Connection.CONNECTED]
        assert len([e for e in rec.snapshot() if isinstance(e, Registered)]) == 1
    assert (a.session_id, b.session_id) == sessions
    assert a.refresh_view("g1") == view  # same members, same epoch: no ephemeral changed
    assert rec_a.last_view("g1") == view
    # the data survived: the same members znode, no new membership generation
    assert view.generation == 0 and view.incarnation is not None
    assert generations_of(private_nodes.store, "g1") == {view.incarnation.czxid: 0}  # type: ignore[arg-type]
    assert member_owner(private_zk.hosts, "/drover/groups/g1/members/b") == b.session_id


def test_outage_longer_than_the_session_keeps_the_session(
    private_zk: ZkServer, private_nodes: Nodes
) -> None:
    """ZooKeeper down 5 s with 2 s sessions: the restarted server reloads the sessions from its
    data directory and renews their timeouts, so the clients reconnect to the SAME session: no
    LOST, no member change, same epoch (measured; matches RUNTIME-NOTES)."""
    a, rec_a = private_nodes.start("a", {"g1": "active"})
    b, _ = private_nodes.start("b", {"g1": "backup"})
    wait_until(lambda: len(a.views()["g1"].members) == 2, timeout=5, what="a to see b")
    sessions = (a.session_id, b.session_id)
    view = a.views()["g1"]

    private_zk.stop()
    began = time.monotonic()
    wait_until(lambda: a.state is Connection.SUSPENDED, timeout=5, what="a SUSPENDED")
    wait_until(lambda: time.monotonic() - began >= 5.0, timeout=6, interval=0.1, what="5 s outage")
    assert a.suspended_for() > 4.5
    private_zk.start()
    wait_until(
        lambda: a.state is Connection.CONNECTED and b.state is Connection.CONNECTED,
        timeout=15,
        what="both CONNECTED again",
    )
    print(
        f"\nserver down {time.monotonic() - began:.2f} s in all (session {SESSION} s): "
        f"states {[str(s) for s in rec_a.states()]}"
    )
    assert (a.session_id, b.session_id) == sessions
    assert Connection.LOST not in rec_a.states()
    assert a.refresh_view("g1") == view
    assert len(generations_of(private_nodes.store, "g1")) == 1  # type: ignore[arg-type]


def test_wiped_server_makes_the_clients_start_new_sessions_under_a_higher_epoch(
    private_zk: ZkServer, private_nodes: Nodes
) -> None:
    """ZooKeeper stopped, its data deleted, started again: it refuses the old sessions for ever
    ("has seen zxid"). Each coordinator's probe sees the server's zxid below its own and
    replaces its client: a new session, registered again; the recreated members znode gets a
    new membership generation (one, agreed by both), so the epochs continue above the old ones."""
    store = private_nodes.store
    assert store is not None
    a, rec_a = private_nodes.start("a", {"g1": "active"})
    b, rec_b = private_nodes.start("b", {"g1": "backup"})
    wait_until(lambda: len(a.views()["g1"].members) == 2, timeout=5, what="a to see b")
    old_sessions = {a.session_id, b.session_id}
    before = a.views()["g1"]
    assert before.generation == 0 and before.epoch == before.cversion

    private_zk.stop(wipe=True)
    private_zk.start()
    began = time.monotonic()
    for node in (a, b):
        wait_until(
            lambda n=node: n.state is Connection.CONNECTED and n.session_id not in old_sessions,  # type: ignore[misc]
            timeout=30,
            interval=0.05,
            what=f"{node.node.node_id} to replace its refused session",
        )
    both = wait_until(
        lambda: a.views()["g1"].node_ids == ("a", "b") and b.views()["g1"].node_ids == ("a", "b"),
        timeout=10,
        interval=0.05,
        what="both to see both again",
    )
    back = time.monotonic() - began
    print(
        f"\nwiped server: both re-registered under new sessions {back:.2f} s after the server "
        f"came back; epoch {before.epoch} -> {a.views()['g1'].epoch}"
    )
    assert both
    for rec in (rec_a, rec_b):
        assert rec.states() == [
            Connection.CONNECTED,
            Connection.SUSPENDED,
            Connection.LOST,
            Connection.CONNECTED,
        ]
    after_a, after_b = a.refresh_view("g1"), b.refresh_view("g1")
    assert after_a.epoch == after_b.epoch and after_a.incarnation == after_b.incarnation
    assert after_a.incarnation != before.incarnation
    assert after_a.generation == 1 and after_a.epoch == compose_epoch(1, after_a.cversion)
    assert after_a.epoch > before.epoch
    assert after_a.cversion <= before.cversion  # the bare child version alone went down
    assert generations_of(store, "g1") == {
        before.incarnation.czxid: 0,  # type: ignore[union-attr]
        after_a.incarnation.czxid: 1,  # type: ignore[union-attr]
    }
    # no view of the new session carries the old generation
    for rec, node in ((rec_a, a), (rec_b, b)):
        fresh = [v for v in rec.views("g1") if v.session_id == node.session_id]
        assert fresh and all(v.generation == 1 for v in fresh)
    assert member_owner(private_zk.hosts, "/drover/groups/g1/members/a") == a.session_id


def test_members_znode_recreated_under_a_live_session_gets_a_new_generation(
    zk_hosts: str, namespace: str, generation_store: Store
) -> None:
    """An operator deletes a group's members znode: our member znode goes with it, the watch
    fires, the coordinator registers again, and the recreated znode is a new incarnation."""
    nodes = Nodes(zk_hosts, namespace, generation_store)
    try:
        a, rec_a = nodes.start("a", {"g1": "active"})
        before = a.views()["g1"]
        delete_tree(zk_hosts, a.members_path("g1"))
        after = wait_until(
            lambda: rec_a.view_where(
                "g1", lambda v: v.node_ids == ("a",) and v.incarnation != before.incarnation
            ),
            timeout=10,
            what="a to register in the recreated members znode",
        )
        assert after.generation == before.generation + 1 and after.epoch > before.epoch
        assert a.state is Connection.CONNECTED and rec_a.states() == [Connection.CONNECTED]
        assert sorted(generations_of(generation_store, "g1").values()) == [0, 1]
    finally:
        nodes.stop_all()
        delete_tree(zk_hosts, namespace)
