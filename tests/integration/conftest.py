"""A metadata store on SQLite or on the real MariaDB, migrated to head, with the defaults; a
platform admin's client of the API on it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import NodeContext
from harness.simcluster import SimCluster
from scheduler.config import Settings
from scheduler.store.bootstrap import ensure_defaults
from scheduler.store.db import Store
from tests.support.auth import admin_token, auth_headers
from tests.support.nodes import NodeProcess, embedded_node
from tests.support.schema import install_head_schema
from tests.support.simulated import running_sim

BACKENDS = ["sqlite", "mysql"]


def database_url(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL of an empty database of ``kind`` (the MySQL one is dropped after the test)."""
    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'drover.db'}"
    fresh_mysql_url: Callable[[], str] = request.getfixturevalue("fresh_mysql_url")
    return fresh_mysql_url()


@pytest.fixture(params=BACKENDS)
def empty_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A store on an empty database (no schema yet)."""
    store = Store(database_url(request.param, request, tmp_path))
    yield store
    store.dispose()


@pytest.fixture
def sim(request: pytest.FixtureRequest) -> Iterator[SimCluster]:
    """A simulated Spark cluster (harness/simcluster.py) whose applications start after the
    test module's ``SIM_START_DELAY`` seconds (0.3 where it names none)."""
    with running_sim(app_start_delay=getattr(request.module, "SIM_START_DELAY", 0.3)) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """A node process of the embedded default (``embedded_node``) shared by the module's tests."""
    started = embedded_node(tmp_path_factory.mktemp("embedded"))
    yield started
    started.stop()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # entrypoints of these tests live under /opt/pipelines (never read) or the test's tmp dir
    return Settings(
        data_dir=tmp_path / "data",
        node_id="test-node",
        artifact_roots=f"/opt/pipelines/,{tmp_path}/",
    )


@pytest.fixture
def store(empty_store: Store, settings: Settings) -> Store:
    """A store migrated to head with the local cluster and the default group."""
    install_head_schema(empty_store)
    ensure_defaults(empty_store, settings)
    return empty_store


@pytest.fixture
def admin_headers(store: Store) -> dict[str, str]:
    """Headers of a platform admin's requests (token plus the explicit-client header)."""
    return auth_headers(admin_token(store))


@pytest.fixture
def client(store: Store, settings: Settings, admin_headers: dict[str, str]) -> Iterator[TestClient]:
    """The API on ``store`` as a platform admin calls it (a module may define its own)."""
    app = create_app(NodeContext(settings, store))
    with TestClient(app, base_url="http://127.0.0.1", headers=admin_headers) as c:
        yield c
