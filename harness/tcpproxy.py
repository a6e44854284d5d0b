"""A loopback TCP proxy that can cut a connection path on demand (no pytest here).

Tests register a cluster through it (its REST and UI URLs pointing at the proxy) so that the
proxy can cut Drover off from the cluster -- :meth:`TcpProxy.cut` closes every connection and
refuses new ones -- while the cluster's drivers still reach the master and Drover's fence
endpoint directly: "block Drover's access to A's REST and UI ports, not the driver's access to
Drover" (a stranded driver must stop by itself once superseded). :meth:`TcpProxy.mend` lets
connections through again.

    with TcpProxy(6066) as rest:          # 127.0.0.1:<rest.port> -> 127.0.0.1:6066
        ...; rest.cut(); ...; rest.mend()

A *selective* cut (:meth:`TcpProxy.cut_if`) refuses only the connections whose first bytes (an
HTTP request's head) match a predicate, and lets the others through: e.g. the fence checks of
the drivers of one cluster (their fencing tokens, ``harness.spark.PrivateSparkCluster.drivers``)
while the drivers of another cluster still reach Drover through the same proxy -- one side of a
two-way cut.

One thread accepts, two threads pump each connection (a selective cut reads the head in a
thread of the connection's own first). Refusing is a prompt close (a refused or reset
connection is what a blocked port looks like to an HTTP client with short timeouts).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from types import TracebackType

from harness.nodes import free_port

BUFFER = 64 << 10
#: how long a selective cut waits for a connection's head, and how much of it it reads at most
HEAD_TIMEOUT_S = 5.0
HEAD_LIMIT = 64 << 10


class TcpProxy:
    def __init__(self, target_port: int, *, target_host: str = "127.0.0.1", port: int = 0) -> None:
        self.target = (target_host, target_port)
        self.port = port or free_port()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", self.port))
        self._listener.listen(128)
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        #: a selective cut: refuse the connections whose head this says yes to
        self._refuse_if: Callable[[bytes], bool] | None = None
        self._closed = False
        self.connections = 0
        self.refused = 0
        self._thread = threading.Thread(target=self._accept, name=f"proxy-{self.port}", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def is_cut(self) -> bool:
        return self._cut

    def cut(self) -> None:
        """Close every connection now and refuse new ones until :meth:`mend`."""
        with self._lock:
            self._cut = True
            sockets, self._open = self._open, set()
        for sock in sockets:
            _close(sock)

    def cut_if(self, refuse: Callable[[bytes], bool]) -> None:
        """From now on refuse the new connections whose head (the bytes up to the end of an HTTP
        request's headers, at most 64 KiB) ``refuse`` says yes to; the others go through.
        Connections already open are left alone. :meth:`mend` ends it."""
        with self._lock:
            self._refuse_if = refuse

    def mend(self) -> None:
        with self._lock:
            self._cut = False
            self._refuse_if = None

    def close(self) -> None:
        self._closed = True
        self.cut()
        _close(self._listener)
        self._thread.join(timeout=5)

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                refuse = self._cut
                if refuse:
                    self.refused += 1
                selective = self._refuse_if
            if refuse:
                _close(client)
                continue
            if selective is None:
                self._connect(client, b"")
            else:
                threading.Thread(target=self._screen, args=(client, selective), daemon=True).start()

    def _screen(self, client: socket.socket, refuse: Callable[[bytes], bool]) -> None:
        """A selective cut: read the connection's head, refuse it or pass it on."""
        head = b""
        try:
            client.settimeout(HEAD_TIMEOUT_S)
            while b"\r\n\r\n" not in head and len(head) < HEAD_LIMIT:
                data = client.recv(BUFFER)
                if not data:
                    break
                head += data
            client.settimeout(None)
        except OSError:
            _close(client)
            return
        try:
            refused = bool(refuse(head))
        except Exception:  # noqa: BLE001 - a predicate that fails refuses nothing
            refused = False
        if refused:
            with self._lock:
                self.refused += 1
            _close(client)
            return
        self._connect(client, head)

    def _connect(self, client: socket.socket, head: bytes) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=5)
            upstream.settimeout(None)
            if head:
                upstream.sendall(head)
        except OSError:
            _close(client)
            return
        with self._lock:
            if self._cut:  # cut while connecting
                _close(client)
                _close(upstream)
                return
            self._open.update((client, upstream))
            self.connections += 1
        pair = _Pair(self, client, upstream)
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=pair.pump, args=(a, b), daemon=True).start()

    def _forget(self, *sockets: socket.socket) -> None:
        with self._lock:
            self._open.difference_update(sockets)


class _Pair:
    """One proxied connection: two pumps; both sockets are closed when both pumps ended."""

    def __init__(self, proxy: TcpProxy, client: socket.socket, upstream: socket.socket) -> None:
        self._proxy = proxy
        self._sockets = (client, upstream)
        self._left = 2
        self._lock = threading.Lock()

    def pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(BUFFER)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        with self._lock:
            self._left -= 1
            last = self._left == 0
        if last:
            self._proxy._forget(*self._sockets)
            for sock in self._sockets:
                _close(sock)


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass
