"""The harness's TCP proxy: a full cut refuses everything, a selective cut only the connections
whose request head it is told to refuse (one cluster's drivers), and mend lets all through."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from harness.tcpproxy import TcpProxy


@pytest.fixture
def echo() -> Iterator[int]:
    """A loopback server answering each connection's first bytes back, then closing."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                data = conn.recv(65536)
                conn.sendall(b"echo " + data)

    threading.Thread(target=serve, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()


def ask(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(head)
        try:
            return conn.recv(65536)
        except ConnectionResetError:
            return b""


def test_full_and_selective_cuts(echo: int) -> None:
    a = b"GET /v1/jobs/j/fence HTTP/1.1\r\nX-Drover-Fencing-Token: tok-a\r\n\r\n"
    b = b"GET /v1/jobs/j/fence HTTP/1.1\r\nX-Drover-Fencing-Token: tok-b\r\n\r\n"
    with TcpProxy(echo) as proxy:
        assert ask(proxy.port, a) == b"echo " + a
        proxy.cut()
        assert ask(proxy.port, b) == b""
        proxy.mend()
        proxy.cut_if(lambda head: b"tok-a" in head)
        assert ask(proxy.port, a) == b""  # refused
        assert ask(proxy.port, b) == b"echo " + b  # let through, its head forwarded whole
        assert proxy.refused == 2
        proxy.mend()
        assert ask(proxy.port, a) == b"echo " + a
