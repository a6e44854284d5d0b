"""Calling an app at the ASGI level, to see how much of a request body it reads.

A test client hands the app the whole body at once; these helpers give it in chunks (as a
chunked upload arrives) and count what the app asked for, so a test can tell "refused before
the body was read" from "read, then refused".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi.testclient import TestClient


@dataclass
class Exchange:
    """What one ASGI call did: the answer, and how much of the body the app read."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    #: body bytes the app took from ``receive`` (the chunks it asked for)
    read: int = 0
    #: chunks it asked for
    receives: int = 0


def call(
    client: TestClient,
    method: str,
    path: str,
    headers: Mapping[str, str],
    chunks: Iterable[bytes] = (),
    *,
    content_length: int | None = None,
    client_address: str = "127.0.0.1",
) -> Exchange:
    """One request through ``client``'s app (the client must be started: ``with client``), its
    body given chunk by chunk. ``content_length``: the length the request announces (else it
    is chunked: no ``Content-Length``); ``client_address``: where it comes from."""
    parts = list(chunks)
    raw_headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    raw_headers.append((b"host", b"127.0.0.1"))
    if content_length is not None:
        raw_headers.append((b"content-length", str(content_length).encode()))
    else:
        raw_headers.append((b"transfer-encoding", b"chunked"))
    path_only, _, query = path.partition("?")
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path_only,
        "raw_path": path_only.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": raw_headers,
        "client": (client_address, 50000),
        "server": ("127.0.0.1", 80),
    }
    out = Exchange()

    async def run() -> None:
        pending = list(parts)

        async def receive() -> dict[str, Any]:
            out.receives += 1
            if not pending:
                return {"type": "http.request", "body": b"", "more_body": False}
            chunk = pending.pop(0)
            out.read += len(chunk)
            return {"type": "http.request", "body": chunk, "more_body": bool(pending)}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                out.status = message["status"]
                out.headers = {
                    k.decode("latin-1"): v.decode("latin-1") for k, v in message["headers"]
                }
            elif message["type"] == "http.response.body":
                out.body += message.get("body", b"")

        await client.app(scope, receive, send)

    assert client.portal is not None, "start the client first: with client: ..."
    client.portal.call(run)
    return out
