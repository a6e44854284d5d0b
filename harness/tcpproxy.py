"""A loopback TCP proxy that can cut a connection path on demand (no pytest here).

Tests register a cluster through it (its REST and UI URLs pointing at the proxy) so that the
proxy can cut Drover off from the cluster -- :meth:`TcpProxy.cut` closes every connection and
refuses new ones -- while the cluster's drivers still reach the master and Drover's fence
endpoint directly: "block Drover's access to A's REST and UI ports, not the driver's access to
Drover" (a stranded driver must stop by itself once superseded). :meth:`TcpProxy.mend` lets
connections through again.

    with TcpProxy(6066) as rest:          # 127.0.0.1:<rest.port> -> 127.0.0.1:6066
        ...; rest.cut(); ...; rest.mend()

One thread accepts, two threads pump each connection. Refusing is a prompt close (a refused
or reset connection is what a blocked port looks like to an HTTP client with short timeouts).
"""

from __future__ import annotations

import socket
import threading
from types import TracebackType

from harness.nodes import free_port

BUFFER = 64 << 10


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

    def mend(self) -> None:
        with self._lock:
            self._cut = False

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
            if refuse:
                _close(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self._cut:  # cut while connecting
                    _close(client)
                    _close(upstream)
                    continue
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
