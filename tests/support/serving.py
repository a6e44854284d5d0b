"""An ASGI app served by uvicorn on loopback in a thread of the test, for clients that need a
real URL (the drover CLI, generated clients)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from harness.nodes import free_port
from tests.conftest import wait_until


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """``app`` served on a free loopback port while the block runs; its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, timeout=15, what="the test API to start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
