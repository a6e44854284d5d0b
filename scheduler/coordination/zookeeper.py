"""The ZooKeeper client: every ZooKeeper call of Drover's (membership registration, reading the
groups' views, the connection state). What it reads and writes -- roles, connection states and
their legal transitions, member data, group views -- and the decisions on them are the pure
:mod:`scheduler.decisions.membership`; this module does the I/O.

Layout under the deployment's namespace (``DROVER_ZK_NAMESPACE``, default ``/drover``)::

    /<namespace>/groups/<group>/members/<node_id>   EPHEMERAL, data = MemberInfo as JSON

A group's *epoch* is ``(generation << 32) | cversion`` (:mod:`scheduler.decisions.epochs`):
``cversion`` is the child version of its ``members`` znode, read in the same call as the children,
so it grows with every join and every leave (an epoch grows with every membership change);
``generation`` comes from the metadata store for the znode's *incarnation* (its czxid and ctime,
read in that same call), through the resolver the coordinator is given. A new incarnation
(ZooKeeper wiped, or the znode deleted) is resolved, then the view is read again and published
only if the incarnation is still the current one.

The connection state is a :class:`~scheduler.decisions.membership.Connection` (its docstring
says what each state makes safe and lists the legal transitions); ``Coordinator._transition`` is
the one place that changes it. After LOST the node owns nothing until ``Registered``, fresh
``ViewChanged`` events and ``ConnectionChanged(CONNECTED)`` have arrived; LOST is also the state
before ``start()`` and after ``stop()``.

Threads: kazoo's state listener and watch callbacks only enqueue into the worker's inbox. One worker
thread does all ZooKeeper I/O that follows (re-registration, re-reads, recreating a stuck client).
One dispatcher thread hands events to ``on_event`` in the order they were produced, so a consumer
always sees ``ConnectionChanged(LOST)`` before any view of a later session.

A server restarted with a wiped data directory refuses the old session for ever: the client has
seen a higher zxid than the server's last one ("has seen zxid ..." in the server log), and kazoo
stays SUSPENDED. When the client has been disconnected longer than ``stuck_after`` (default 1 s),
the worker opens a *probe* client beside it (connecting in the background, retrying like the
old one). Once the probe is connected it reads the server's last zxid (after a ``sync``), and
:func:`stuck_verdict` decides: the old client is back → close the probe; the server's zxid is
below what the old client has seen → the server forgot our session: replace the old client at
once (LOST, then a new registration); otherwise give the old client a session timeout (at least
``RECONNECT_GRACE``) to get back in before replacing it. An ordinary outage, however long, keeps
the session: the server reloads sessions when it restarts and renews their timeouts, and the old
client reconnects within about a second on a quiet machine, several on a loaded one (its first
answers from a freshly started JVM can time out). Once the server has been up for a session
timeout without the old client, the old session has expired there anyway: replacing the client
then loses nothing.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType, KazooState, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry
from kazoo.security import CREATOR_ALL_ACL

from scheduler.core.errors import (
    CoordinationUnavailable,
    DroverError,
    DuplicateNode,
    IllegalTransition,
    InvalidInput,
    NotFound,
)
from scheduler.decisions.epochs import Incarnation
from scheduler.decisions.membership import (
    DRAINING,
    ROLES,
    Connection,
    ExistingMember,
    GroupView,
    MemberInfo,
    MembershipSettings,
    NodeInfo,
    Role,
    StuckVerdict,
    build_view,
    classify_existing,
    next_state,
    normalize_namespace,
    stuck_verdict,
    znode_name_problem,
)

if TYPE_CHECKING:
    from scheduler.config import Settings

log = logging.getLogger(__name__)

# --- events ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConnectionChanged:
    state: Connection


@dataclass(frozen=True)
class ViewChanged:
    view: GroupView


@dataclass(frozen=True)
class Registered:
    """Our member znodes exist under this session (after start, and after every LOST)."""

    session_id: int


CoordinatorEvent = ConnectionChanged | ViewChanged | Registered


# --- worker inbox items ---------------------------------------------------------------------


@dataclass(frozen=True)
class _StateItem:
    serial: int
    state: KazooState


@dataclass(frozen=True)
class _ChildrenItem:
    serial: int
    group: str


_InboxItem = _StateItem | _ChildrenItem | None  # None: a wake-up
_STOP = object()

#: ``resolve(group, incarnation, cversion) -> generation``: the membership generation of one
#: incarnation of a group's members znode (``scheduler.store.generations.GenerationResolver``)
GenerationResolver = Callable[[str, Incarnation, int], int]


@dataclass
class _Probe:
    """A second client opened while the current one cannot reconnect (worker thread only)."""

    serial: int
    client: KazooClient
    #: ``time.monotonic()`` when it was first seen connected (None: not connected)
    connected_at: float | None = None
    #: the server's last zxid as the probe read it after a sync (None: not read yet)
    server_zxid: int | None = None


class Coordinator:
    """Registers this node in its groups and publishes their views and its connection state.

    ``on_event`` runs on the coordinator's dispatcher thread, one event at a time, in order. The
    public methods are thread-safe. ``start()`` once, ``stop()`` once; not restartable.
    """

    #: worker tick: how often the worker checks for a stuck client or a registration to retry
    TICK = 0.25
    #: seconds disconnected before a probe client is opened beside the current one
    STUCK_AFTER = 1.0
    #: how long a reachable server gets, at least, for the old client to reconnect before it is
    #: replaced (when the server's zxid does not already show that it forgot the old session);
    #: the session timeout when that is longer
    RECONNECT_GRACE = 3.0
    #: seconds between retries of a failed registration or view read
    RETRY_INTERVAL = 1.0

    def __init__(
        self,
        hosts: str,
        namespace: str,
        node: NodeInfo,
        groups: Mapping[str, Role],
        session_timeout: float,
        on_event: Callable[[CoordinatorEvent], None],
        *,
        stuck_after: float | None = None,
        op_timeout: float | None = None,
        resolve_generation: GenerationResolver | None = None,
        auth: str = "",
    ) -> None:
        """``resolve_generation`` gives each members znode incarnation its membership generation
        (the metadata store, in a node); None gives generation 0 to every incarnation, so epochs
        are bare child versions (tools and tests without a store). ``auth``: a digest
        credential ``user:password``; every session authenticates with it and every znode it
        creates is readable and writable by that identity only (creator-all)."""
        if not hosts.strip():
            raise InvalidInput("no ZooKeeper hosts given")
        if session_timeout <= 0:
            raise InvalidInput(f"session timeout must be positive, not {session_timeout}")
        problem = znode_name_problem(node.node_id)
        if problem is not None:
            raise InvalidInput(f"node id {node.node_id!r} {problem}")
        for group, role in groups.items():
            problem = znode_name_problem(group)
            if problem is not None:
                raise InvalidInput(f"group {group!r} {problem}")
            if role not in ROLES:
                raise InvalidInput(f"group {group!r}: role must be active or backup, not {role!r}")
        self._hosts = hosts.strip()
        self._auth = auth
        self._root = normalize_namespace(namespace)
        self._node = node
        self._groups: dict[str, Role] = dict(groups)
        self._session_timeout = float(session_timeout)
        self._on_event = on_event
        self._stuck_after = stuck_after if stuck_after is not None else self.STUCK_AFTER
        self._resolve_generation = resolve_generation
        self._op_timeout = op_timeout if op_timeout is not None else max(self._session_timeout, 2.0)

        self._lock = threading.RLock()
        self._state = Connection.LOST
        self._client: KazooClient | None = None
        self._serial = 0
        self._serials = itertools.count(1)
        self._watchers: dict[tuple[int, str], Callable[[WatchedEvent], None]] = {}
        self._session_id: int | None = None  # the session our member znodes belong to
        self._own_sessions: set[int] = set()
        self._views: dict[str, GroupView] = {}
        #: membership generation of every members znode incarnation seen (resolved once each)
        self._known_generations: dict[tuple[str, Incarnation], int] = {}
        #: groups whose last re-read failed (retried by the worker)
        self._unread: set[str] = set()
        self._suspended_since: float | None = None  # monotonic, while SUSPENDED
        self._disconnected_since: float | None = None  # monotonic, kazoo client not connected
        self._retry_at = 0.0  # monotonic: next retry of a registration or re-read
        self._probe: _Probe | None = None  # worker thread only
        self._inbox: queue.Queue[_InboxItem] = queue.Queue()
        self._outbox: queue.Queue[object] = queue.Queue()
        self._stopping = threading.Event()
        self._started = False
        #: drained by an operator: registered as ``draining`` in every group (see set_draining)
        self._draining = False
        self._worker: threading.Thread | None = None
        self._dispatcher: threading.Thread | None = None

    @classmethod
    def from_settings(
        cls,
        settings: Settings | MembershipSettings,
        on_event: Callable[[CoordinatorEvent], None],
        groups: Mapping[str, Role] | None = None,
        *,
        resolve_generation: GenerationResolver | None = None,
    ) -> Coordinator:
        """A coordinator for a node's settings (``groups`` overrides ``settings.group_roles``)."""
        node = NodeInfo(
            settings.node_id,
            settings.az,
            settings.cloud,
            settings.resolved_api_url,
            started_at=time.time(),
        )
        return cls(
            settings.zk_hosts,
            settings.zk_namespace,
            node,
            settings.group_roles if groups is None else groups,
            settings.zk_session_timeout,
            on_event,
            resolve_generation=resolve_generation,
            auth=settings.resolved_zk_auth,
        )

    # --- public surface ----------------------------------------------------------------------

    @property
    def state(self) -> Connection:
        return self._state

    @property
    def session_id(self) -> int | None:
        """The session our member znodes belong to (None before start or while unregistered)."""
        return self._session_id

    @property
    def node(self) -> NodeInfo:
        return self._node

    @property
    def groups(self) -> dict[str, Role]:
        return dict(self._groups)

    def suspended_for(self) -> float:
        """Seconds spent SUSPENDED so far (0.0 when not SUSPENDED)."""
        since = self._suspended_since
        return 0.0 if since is None else time.monotonic() - since

    def views(self) -> dict[str, GroupView]:
        """The last published view of every group (empty before start)."""
        with self._lock:
            return dict(self._views)

    def members_path(self, group: str) -> str:
        return f"{self._root}/groups/{group}/members"

    @property
    def draining(self) -> bool:
        return self._draining

    def set_draining(self, draining: bool) -> dict[str, GroupView]:
        """Drain (or undrain) this node: its member znode in every group is deleted and created
        again with the role ``draining`` (or its configured role), in one ZooKeeper transaction
        (:meth:`_replace_own`). Deleting and creating moves the members znode's child version, so
        every node sees a new epoch with a pool without (or with) this node, and the others claim
        its jobs under that epoch: a data change alone would leave the epoch as it was and two views
        of the pool under one epoch. The node stays registered (listed, reachable) while drained; a
        new session registers it drained too. Returns the views read after the change.

        Raises CoordinationUnavailable when not CONNECTED-and-registered or ZooKeeper fails."""
        with self._lock:
            self._draining = draining
            client, serial, session_id = self._client, self._serial, self._session_id
        if client is None or session_id is None or self._state is not Connection.CONNECTED:
            raise CoordinationUnavailable("no registered ZooKeeper session")
        self._ensure_session(client, session_id)
        #: group -> our member znode's stat as read here (None: no znode), where its role changes
        changed: dict[str, ZnodeStat | None] = {}
        for group, role in self._groups.items():
            path = f"{self.members_path(group)}/{self._node.node_id}"
            wanted = DRAINING if draining else role
            try:
                current, stat = self._wait(client.get_async(path))
            except NoNodeError:
                changed[group] = None
                continue
            if MemberInfo.from_bytes(current).role != wanted:
                changed[group] = stat
        if changed and not self._replace_own(client, session_id, changed):
            self._delete_own(client, session_id)
            self._register(client, session_id)
        views = {}
        for group in self._groups:
            view = self._read_view(client, serial, group)
            with self._lock:
                if self._session_id == session_id and self._serial == serial:
                    self._publish(view)
            views[group] = view
        log.info(
            "node %s: %s in %s",
            self._node.node_id,
            "draining" if draining else "undrained",
            ", ".join(changed) or "no group (no change)",
        )
        return views

    def start(self, timeout: float = 10.0, *, wait_for_duplicate: float = 0.0) -> None:
        """Connect, register in every group, read the views, then start the event threads.

        Raises DuplicateNode when a live node holds our id in a group (waiting up to
        ``wait_for_duplicate`` seconds for it to vanish first: a crashed predecessor's session
        expires within its session timeout), CoordinationUnavailable when no session opens."""
        with self._lock:
            if self._started:
                raise IllegalTransition("a coordinator starts only once")
            self._started = True
        serial, client = self._new_client()
        try:
            client.start(timeout=timeout)
        except KazooTimeoutError as exc:
            raise CoordinationUnavailable(
                f"no ZooKeeper session with {self._hosts} within {timeout:.1f}s"
            ) from exc
        try:
            session_id = self._connected_session(client)
            with self._lock:
                self._client, self._serial = client, serial
                self._own_sessions.add(session_id)
            deadline = time.monotonic() + wait_for_duplicate
            while True:
                try:
                    self._register(client, session_id)
                    break
                except DuplicateNode:
                    if time.monotonic() >= deadline:
                        raise
                    time.sleep(0.2)
            views = [self._read_view(client, serial, g) for g in self._groups]
            self._ensure_session(client, session_id)
        except BaseException:
            self._close_client(client)
            with self._lock:
                self._client = None
            raise
        with self._lock:
            self._session_id = session_id
            self._emit(Registered(session_id))
            for view in views:
                self._publish(view)
            self._transition(Connection.CONNECTED)
        self._dispatcher = threading.Thread(
            target=self._run_dispatcher,
            name=f"coordinator-events-{self._node.node_id}",
            daemon=True,
        )
        self._worker = threading.Thread(
            target=self._run_worker, name=f"coordinator-{self._node.node_id}", daemon=True
        )
        self._dispatcher.start()
        self._worker.start()
        log.info(
            "node %s registered in %s under %s (session %#x)",
            self._node.node_id,
            ", ".join(f"{g}:{r}" for g, r in self._groups.items()) or "no group",
            self._root or "/",
            session_id,
        )

    def stop(self, timeout: float = 5.0) -> None:
        """Delete our member znodes (others see us leave at once), close the session, end threads.

        Events still queued are delivered before the dispatcher ends; none follow."""
        with self._lock:
            if self._stopping.is_set():
                return
            self._stopping.set()
            client, session_id = self._client, self._session_id
        if client is not None:
            if session_id is not None and client.connected:
                try:
                    self._delete_own(client, session_id)
                except (CoordinationUnavailable, KazooException) as exc:
                    log.warning("stop: member znodes left to session expiry: %s", exc)
            self._close_client(client)
        self._inbox.put(None)
        if self._worker is not None and self._worker is not threading.current_thread():
            self._worker.join(timeout)
        probe, self._probe = self._probe, None
        if probe is not None:
            self._close_client(probe.client)
        self._outbox.put(_STOP)
        if self._dispatcher is not None and self._dispatcher is not threading.current_thread():
            self._dispatcher.join(timeout)
        with self._lock:
            self._state = Connection.LOST
            self._session_id = None
            self._views.clear()

    def refresh_view(self, group: str) -> GroupView:
        """Re-read ``group``'s members and epoch now (a lease check); publish it if it changed.

        Raises CoordinationUnavailable when not CONNECTED-and-registered or ZooKeeper fails."""
        if group not in self._groups:
            raise NotFound(f"node {self._node.node_id} is not a member of group {group!r}")
        with self._lock:
            client, serial, session_id = self._client, self._serial, self._session_id
        if client is None or session_id is None or self._state is Connection.LOST:
            raise CoordinationUnavailable("no registered ZooKeeper session")
        self._ensure_session(client, session_id)
        view = self._read_view(client, serial, group)
        self._ensure_session(client, session_id)
        with self._lock:
            if self._session_id == session_id and self._serial == serial:
                self._publish(view)
        return view

    def ping(self) -> float:
        """Round-trip time in seconds of one cheap ZooKeeper read; raises when there is none."""
        client = self._client
        if client is None or not client.connected:
            raise CoordinationUnavailable("not connected to ZooKeeper")
        began = time.perf_counter()
        self._wait(client.exists_async(self._root or "/"))
        return time.perf_counter() - began

    # --- kazoo callbacks: record and enqueue, never block --------------------------------------

    def _new_client(self) -> tuple[int, KazooClient]:
        serial = next(self._serials)
        client = KazooClient(
            hosts=self._hosts,
            timeout=self._session_timeout,
            connection_retry=KazooRetry(max_tries=-1, max_delay=1.0),
            command_retry=KazooRetry(max_tries=3, delay=0.1, max_delay=1.0, ignore_expire=False),
            logger=logging.getLogger("kazoo.client"),
            auth_data=[("digest", self._auth)] if self._auth else None,
            default_acl=CREATOR_ALL_ACL if self._auth else None,
        )

        def on_state(state: KazooState) -> None:
            self._inbox.put(_StateItem(serial, state))

        client.add_listener(on_state)
        return serial, client

    def _watcher(self, serial: int, group: str) -> Callable[[WatchedEvent], None]:
        """One watch function per group and client (kazoo keeps watchers in a set)."""
        with self._lock:
            watcher = self._watchers.get((serial, group))
            if watcher is None:

                def watcher(event: WatchedEvent) -> None:
                    if event.type != EventType.NONE:  # NONE: connection change, handled by state
                        self._inbox.put(_ChildrenItem(serial, group))

                self._watchers[(serial, group)] = watcher
        return watcher

    # --- worker --------------------------------------------------------------------------------

    def _run_worker(self) -> None:
        next_check = 0.0
        while not self._stopping.is_set():
            try:
                item = self._inbox.get(timeout=self.TICK)
            except queue.Empty:
                item = None
            if self._stopping.is_set():
                return
            if item is not None:
                self._guarded(self._handle, item)
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + self.TICK
                self._guarded(self._periodic)

    def _guarded(self, step: Callable[..., None], *args: Any) -> None:
        """Run one worker step; log its failure (retried by a later step), never die."""
        try:
            step(*args)
        except (CoordinationUnavailable, DuplicateNode, KazooException) as exc:
            log.warning("node %s: %s (will retry)", self._node.node_id, exc)
        except Exception:
            log.exception("node %s: coordinator worker step failed", self._node.node_id)

    def _handle(self, item: _StateItem | _ChildrenItem) -> None:
        if isinstance(item, _StateItem):
            if item.serial != self._serial:
                return
            if item.state == KazooState.CONNECTED:
                self._disconnected_since = None
                self._sync()
                return
            if self._disconnected_since is None:
                self._disconnected_since = time.monotonic()
            with self._lock:
                if item.state == KazooState.LOST:
                    self._session_id = None
                    if self._state is not Connection.LOST:
                        self._transition(Connection.LOST)
                elif self._state is Connection.CONNECTED:
                    self._transition(Connection.SUSPENDED)
        elif item.serial == self._serial and self._state is Connection.CONNECTED:
            self._reread(item.group)

    def _periodic(self) -> None:
        """Retry a failed registration or view read (each second); watch a disconnected client."""
        client, now = self._client, time.monotonic()
        if client is None:
            return
        if now >= self._retry_at:
            if self._state is not Connection.CONNECTED and client.connected:
                # registered on a new session, or re-read after a reconnect: it failed, again
                self._retry_at = now + self.RETRY_INTERVAL
                self._guarded(self._sync)
            elif self._state is Connection.CONNECTED and self._unread:
                self._retry_at = now + self.RETRY_INTERVAL
                for group in sorted(self._unread):
                    self._guarded(self._reread, group)
        self._guarded(self._watch_stuck, client, now)

    def _watch_stuck(self, client: KazooClient, now: float) -> None:
        """Open a probe beside a client disconnected for ``stuck_after``; act on its verdict."""
        probe = self._probe
        if probe is None:
            since = self._disconnected_since
            if since is not None and now - since >= self._stuck_after and not client.connected:
                self._probe = self._open_probe(now - since)
            return
        if probe.client.connected:
            if probe.connected_at is None:
                probe.connected_at = now
            if probe.server_zxid is None and not client.connected:
                probe.server_zxid = self._server_zxid(probe.client)
        else:
            probe.connected_at = probe.server_zxid = None
        verdict = stuck_verdict(
            old_connected=client.connected,
            old_last_zxid=int(client.last_zxid or 0),
            probe_connected_for=None if probe.connected_at is None else now - probe.connected_at,
            server_zxid=probe.server_zxid,
            grace=max(self.RECONNECT_GRACE, self._session_timeout),
        )
        if verdict is StuckVerdict.KEEP:
            self._probe = None
            self._close_client(probe.client)
        elif verdict is StuckVerdict.REPLACE:
            self._probe = None
            self._swap_in(probe, client, int(client.last_zxid or 0))

    def _open_probe(self, disconnected_for: float) -> _Probe:
        serial, client = self._new_client()
        client.start_async()  # connects in kazoo's thread, retrying like the current client
        log.info(
            "node %s: disconnected for %.1fs; a probe session will tell a down server from one "
            "that refuses our session",
            self._node.node_id,
            disconnected_for,
        )
        return _Probe(serial, client)

    def _server_zxid(self, client: KazooClient) -> int:
        """The last zxid of the server ``client`` is connected to, after catching up (sync)."""
        root = self._root or "/"
        self._wait(client.sync_async(root))
        self._wait(client.exists_async(root))
        return int(client.last_zxid or 0)

    def _swap_in(self, probe: _Probe, old: KazooClient, old_zxid: int) -> None:
        """Make ``probe`` the client: LOST (our member znodes are gone), then register anew."""
        log.warning(
            "node %s: disconnected for %.1fs while the server accepts new sessions (its last "
            "zxid %s, ours %#x): it will not take our session back (a wiped server refuses it); "
            "replacing the ZooKeeper client",
            self._node.node_id,
            time.monotonic() - (self._disconnected_since or time.monotonic()),
            "unknown" if probe.server_zxid is None else f"{probe.server_zxid:#x}",
            old_zxid,
        )
        with self._lock:
            if self._stopping.is_set():
                replaced = False
            else:
                replaced = True
                self._client, self._serial = probe.client, probe.serial
                self._disconnected_since = None
                self._session_id = None
                if self._state is not Connection.LOST:
                    self._transition(Connection.LOST)
        if not replaced:
            self._close_client(probe.client)
            return
        self._close_client(old)
        self._sync()

    def _sync(self) -> None:
        """After kazoo reports CONNECTED: register anew (new session) or re-read (same session)."""
        with self._lock:
            client, serial = self._client, self._serial
            registered = self._session_id
        if client is None or not client.connected:
            return
        session_id = self._connected_session(client)
        if registered != session_id:
            with self._lock:
                if self._state is not Connection.LOST:
                    self._transition(Connection.LOST)
                self._session_id = None
                self._own_sessions.add(session_id)
            self._register(client, session_id)
            views = [self._read_view(client, serial, g) for g in self._groups]
            self._ensure_session(client, session_id)
            with self._lock:
                if self._serial != serial or self._stopping.is_set():
                    return
                self._session_id = session_id
                self._emit(Registered(session_id))
                for view in views:
                    self._publish(view)
                self._unread.clear()
                self._transition(Connection.CONNECTED)
            log.info("node %s re-registered (session %#x)", self._node.node_id, session_id)
            return
        views = [self._read_view(client, serial, g) for g in self._groups]
        if any(self._node.node_id not in v.node_ids for v in views):
            self._register(client, session_id)
            views = [self._read_view(client, serial, g) for g in self._groups]
        self._ensure_session(client, session_id)
        with self._lock:
            if self._serial != serial or self._session_id != session_id:
                return
            for view in views:
                self._publish(view)
            self._unread.clear()
            if self._state is Connection.SUSPENDED:
                self._transition(Connection.CONNECTED)

    def _reread(self, group: str) -> None:
        """Read ``group`` again (its watch fired) and publish it; the worker retries a failure."""
        with self._lock:
            client, serial, session_id = self._client, self._serial, self._session_id
        if client is None or session_id is None or not client.connected:
            return
        self._unread.add(group)
        view = self._read_view(client, serial, group)
        if self._node.node_id not in view.node_ids and not self._stopping.is_set():
            log.warning(
                "node %s: our member znode in %s vanished; re-creating it",
                self._node.node_id,
                group,
            )
            self._register(client, session_id)
            view = self._read_view(client, serial, group)
        self._ensure_session(client, session_id)
        with self._lock:
            if self._serial == serial and self._session_id == session_id:
                self._publish(view)
                self._unread.discard(group)

    # --- ZooKeeper operations --------------------------------------------------------------------

    def _wait(self, result: Any) -> Any:
        """The value of a kazoo async result, within the operation timeout.

        NoNode/NodeExists/BadVersion pass through for the caller; other failures become
        CoordinationUnavailable."""
        try:
            return result.get(timeout=self._op_timeout)
        except (NoNodeError, NodeExistsError, BadVersionError):
            raise
        except KazooTimeoutError as exc:
            raise CoordinationUnavailable(
                f"ZooKeeper did not answer within {self._op_timeout:.1f}s"
            ) from exc
        except KazooException as exc:
            raise CoordinationUnavailable(
                f"ZooKeeper call failed: {type(exc).__name__} {exc}".rstrip()
            ) from exc

    @staticmethod
    def _connected_session(client: KazooClient) -> int:
        client_id = client.client_id
        if client_id is None:
            raise CoordinationUnavailable("not connected to ZooKeeper")
        return int(client_id[0])

    def _ensure_session(self, client: KazooClient, session_id: int) -> None:
        if self._connected_session(client) != session_id:
            raise CoordinationUnavailable("the ZooKeeper session changed during the operation")

    def _register(self, client: KazooClient, session_id: int) -> None:
        """Create our ephemeral member znode in every group (idempotent under one session)."""
        for group, role in self._groups.items():
            members = self.members_path(group)
            path = f"{members}/{self._node.node_id}"
            data = self._node.as_member(DRAINING if self._draining else role).to_bytes()
            self._wait(client.ensure_path_async(members))
            for _ in range(5):
                try:
                    self._wait(client.create_async(path, data, ephemeral=True))
                    break
                except NodeExistsError:
                    pass
                try:
                    current, stat = self._wait(client.get_async(path))
                except NoNodeError:
                    continue  # vanished meanwhile: create again
                verdict = classify_existing(stat.ephemeralOwner, session_id, self._own_sessions)
                if verdict is ExistingMember.OURS:
                    if current != data:
                        self._wait(client.set_async(path, data, version=stat.version))
                    break
                if verdict is ExistingMember.FOREIGN:
                    raise DuplicateNode(
                        f"node id {self._node.node_id!r} is already registered in group {group!r} "
                        f"by another live node (session {stat.ephemeralOwner:#x}); "
                        "give this node another DROVER_NODE_ID or stop the other one"
                    )
                log.info(
                    "group %s: deleting our stale member znode of session %#x",
                    group,
                    stat.ephemeralOwner,
                )
                try:
                    self._wait(client.delete_async(path, version=stat.version))
                except (NoNodeError, BadVersionError):
                    pass
            else:
                raise CoordinationUnavailable(f"could not create {path}: it keeps changing")
            self._ensure_session(client, session_id)

    def _read_view(self, client: KazooClient, serial: int, group: str) -> GroupView:
        """Children, cversion and incarnation (one call, re-arming the watch), then every
        member's data.

        An incarnation of the members znode not seen before gets its membership generation
        first (the resolver: the metadata store), then the znode is read again: a view is only
        built from a read that followed the resolution, so its incarnation was still current
        after its generation was recorded (the argument is in scheduler.decisions.epochs)."""
        path = self.members_path(group)
        watcher = self._watcher(serial, group)
        session_id = self._connected_session(client)
        for _ in range(5):
            try:
                children, stat = self._wait(
                    client.get_children_async(path, watch=watcher, include_data=True)
                )
            except NoNodeError:
                return GroupView(group, (), 0, session_id)
            incarnation = Incarnation(int(stat.czxid), int(stat.ctime))
            with self._lock:
                generation = self._known_generations.get((group, incarnation))
            if generation is None:
                self._resolve(group, incarnation, int(stat.cversion))
                continue  # read again: the view must follow the resolution
            pending = {name: client.get_async(f"{path}/{name}") for name in children}
            data: dict[str, bytes] = {}
            try:
                for name, result in pending.items():
                    data[name] = self._wait(result)[0]
            except NoNodeError:
                continue  # a member left between the two reads; its watch fired: read again
            view, ignored = build_view(
                group,
                data,
                int(stat.cversion),
                session_id,
                generation=generation,
                incarnation=incarnation,
            )
            for why in ignored:
                log.warning("group %s: %s", group, why)
            return view
        raise CoordinationUnavailable(f"membership of group {group!r} kept changing while read")

    def _resolve(self, group: str, incarnation: Incarnation, cversion: int) -> None:
        """Learn the membership generation of one members znode incarnation (once per znode)."""
        if self._resolve_generation is None:
            generation = 0
        else:
            try:
                generation = self._resolve_generation(group, incarnation, cversion)
            except DroverError as exc:
                raise CoordinationUnavailable(
                    f"group {group!r}: no membership generation for its members znode "
                    f"({incarnation}): {exc.message}"
                ) from exc
        log.info(
            "node %s: group %s members znode %s has membership generation %d",
            self._node.node_id,
            group,
            incarnation,
            generation,
        )
        with self._lock:
            self._known_generations[(group, incarnation)] = generation

    def _replace_own(
        self, client: KazooClient, session_id: int, groups: Mapping[str, ZnodeStat | None]
    ) -> bool:
        """Replace our member znode in ``groups`` (each with its stat as just read) by one with
        the role wanted now, deleted and created in one ZooKeeper transaction: the child version
        moves (a new epoch), and no node ever reads the group without us (a drain asked of
        another node, which then polls that node's view of us, would find us missing and answer
        404). False, with nothing changed, when one of them is not ours as read (missing, of
        another session, or changed since: the caller goes the long way)."""
        transaction = client.transaction()
        for group, stat in groups.items():
            if stat is None or stat.ephemeralOwner != session_id:
                return False
            path = f"{self.members_path(group)}/{self._node.node_id}"
            role = DRAINING if self._draining else self._groups[group]
            transaction.delete(path, version=stat.version)
            transaction.create(path, self._node.as_member(role).to_bytes(), ephemeral=True)
        results = self._wait(transaction.commit_async())
        if any(isinstance(r, Exception) for r in results):
            log.info(
                "node %s: re-registering in %s one step at a time", self._node.node_id, list(groups)
            )
            return False
        self._ensure_session(client, session_id)
        return True

    def _delete_own(self, client: KazooClient, session_id: int) -> None:
        pending = {
            f"{self.members_path(g)}/{self._node.node_id}": client.get_async(
                f"{self.members_path(g)}/{self._node.node_id}"
            )
            for g in self._groups
        }
        deletions = []
        for path, result in pending.items():
            try:
                _, stat = self._wait(result)
            except NoNodeError:
                continue
            if stat.ephemeralOwner == session_id:
                deletions.append(client.delete_async(path, version=stat.version))
        for result in deletions:
            try:
                self._wait(result)
            except (NoNodeError, BadVersionError):
                pass

    @staticmethod
    def _close_client(client: KazooClient) -> None:
        try:
            client.stop()
        finally:
            client.close()

    # --- state and events ------------------------------------------------------------------------

    def _transition(self, new: Connection) -> None:
        """The one place the state changes; caller holds the lock. Emits ConnectionChanged."""
        self._state = next_state(self._state, new)
        self._suspended_since = time.monotonic() if new is Connection.SUSPENDED else None
        self._emit(ConnectionChanged(new))
        log.info("node %s: ZooKeeper connection %s", self._node.node_id, new)

    def _publish(self, view: GroupView) -> None:
        """Cache and emit ``view`` unless it equals or predates the cached view (lock held)."""
        old = self._views.get(view.group)
        if old is not None:
            if view == old:
                return
            if view.session_id == old.session_id and view.epoch < old.epoch:
                return
        self._views[view.group] = view
        self._emit(ViewChanged(view))

    def _emit(self, event: CoordinatorEvent) -> None:
        self._outbox.put(event)

    def _run_dispatcher(self) -> None:
        while True:
            event = self._outbox.get()
            if event is _STOP:
                return
            try:
                self._on_event(event)  # type: ignore[arg-type]
            except Exception:
                log.exception("node %s: on_event failed for %r", self._node.node_id, event)
