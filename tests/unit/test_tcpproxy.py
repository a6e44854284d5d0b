"""The loopback proxy cuts the connections of the processes it is told (a cluster's drivers)
and lets everybody else's through."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator

import httpx
import pytest

from harness.nodes import free_port
from harness.tcpproxy import TcpProxy

# one GET through the proxy per line read on stdin; prints "ok" or "refused"
CLIENT = """
import sys, urllib.request
for _ in sys.stdin:
    try:
        urllib.request.urlopen(sys.argv[1], timeout=5).read()
        print("ok", flush=True)
    except Exception:
        print("refused", flush=True)
"""


class Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the handler's protocol
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[TcpProxy]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with TcpProxy(server.server_address[1]) as proxy:
            yield proxy
    finally:
        server.shutdown()
        server.server_close()


def test_cut_from_refuses_only_the_listed_processes(proxy: TcpProxy) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CLIENT, f"{proxy.url}/"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None

    def ask() -> str:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write("go\n")
        child.stdin.flush()
        return child.stdout.readline().strip()

    try:
        assert ask() == "ok"
        proxy.cut_from(lambda: [child.pid])
        assert ask() == "refused"
        # this process is not cut off
        assert httpx.get(f"{proxy.url}/", timeout=5, trust_env=False).text == "ok"
        proxy.cut_from(None)
        assert ask() == "ok"
        assert proxy.refused >= 1
    finally:
        child.stdin.close()
        child.wait(timeout=10)
