"""Every HTTP client of a process shares one TLS context: making one parses the CA bundle
(about 30 ms of CPU), more than a request on loopback costs."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from harness import http as harness_http
from scheduler.backends import http


class _Ok(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_the_tls_context_is_made_once_and_verifies() -> None:
    context = http.tls()
    assert context is http.tls()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


def test_clients_and_one_off_requests_make_no_context_of_their_own(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    http.tls()  # made before the count starts, as at a process's first request
    made: list[object] = []
    real = ssl.create_default_context

    def counting(*args: object, **kwargs: object) -> ssl.SSLContext:
        made.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl, "create_default_context", counting)
    with http.client(5.0) as client:
        assert client.get(url).text == "ok"
    assert http.one_off("GET", url, timeout=5.0).text == "ok"
    assert harness_http.get(url, timeout=5.0).text == "ok"
    assert made == []
    httpx.get(url, timeout=5.0, trust_env=False)  # what the shared context saves
    assert len(made) == 1
