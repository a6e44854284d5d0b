"""An ASGI app served by uvicorn on loopback in a thread of the test, for clients that need a
real URL (the drover CLI, generated clients)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from harness.nodes import free_port
from scheduler.config import Settings
from scheduler.store.db import Store
from tests.conftest import wait_until
from tests.support.auth import admin_token
from tests.support.schema import sqlite_head_store


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


@contextmanager
def admin_cli_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, node_id: str
) -> Iterator[tuple[Settings, Store, str]]:
    """A SQLite store at the head schema for a node ``node_id``, with the drover CLI of this test
    calling as its platform admin (``DROVER_TOKEN``, a config folder of its own): the node's
    settings, the store and the admin's token; the store is disposed of after the block."""
    settings = Settings(data_dir=tmp_path / "data", node_id=node_id)
    store = sqlite_head_store(tmp_path / "drover.db", settings)
    try:
        token = admin_token(store)
        monkeypatch.setenv("DROVER_TOKEN", token)
        monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
        yield settings, store, token
    finally:
        store.dispose()
