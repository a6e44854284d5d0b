"""Shared fixtures for the real services the tests use.

The services are started outside pytest by `scripts/services.sh up` (which `make test` runs) and
described by the DROVER_TEST_* variables in `var/services/env`. A test that needs a service that is
not configured or does not answer FAILS with a pointer to those commands; nothing is skipped, so
a CI run can never pass by silently not testing.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import sqlalchemy as sa
from hypothesis import settings
from sqlalchemy.engine import URL, make_url

from harness.nodes import poll
from harness.s3server import S3Server
from scheduler.store.db import Store
from tests.support.yarn import YarnCluster

# Property tests judge answers, never speed: hypothesis's per-example deadline (200 ms) is a
# timed assertion that fails on a loaded machine (a 2-core CI box running both xdist workers).
settings.register_profile("drover", deadline=None)
settings.load_profile("drover")

# Ray binds every port to 127.0.0.1 only with this set (see RUNTIME-NOTES); tests start Ray.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

START_HINT = "run `make test`, or `scripts/services.sh up` and then `set -a; . var/services/env`"
SERVICE_DEADLINE = 15.0  # seconds a configured service gets to answer before the test fails

T = TypeVar("T")


def require_env(name: str) -> str:
    """The value of DROVER_TEST_* variable `name`; fail the test if it is not set."""
    value = os.environ.get(name, "").strip()
    if not value:
        pytest.fail(f"{name} is not set: {START_HINT}", pytrace=False)
    return value


def require_url(name: str) -> str:
    """The URL in DROVER_TEST_* variable `name`, without a trailing slash; fail the test if it
    is not set."""
    return require_env(name).rstrip("/")


def require_tool(command: str, package: str) -> str:
    """The path of the program ``command``; fail the test if it is missing (``make test``
    installs Debian's ``package`` for it)."""
    path = shutil.which(command)
    if path is None:
        pytest.fail(
            f"{command} is missing: run `make test`, or apt-get install --no-install-recommends "
            f"{package}",
            pytrace=False,
        )
    return path


def wait_until(
    condition: Callable[[], T | None],
    *,
    timeout: float,
    interval: float = 0.1,
    what: str,
) -> T:
    """Poll `condition` until it returns something truthy; fail the test at the deadline.

    Exceptions raised by `condition` count as "not yet"; the last one is shown on failure
    (:func:`harness.nodes.poll`, with a test failure for its TimeoutError).
    """
    try:
        return poll(condition, timeout=timeout, what=what, interval=interval)
    except TimeoutError as exc:
        pytest.fail(str(exc), pytrace=False)


def wait_for_service(answers: Callable[[], bool], what: str) -> None:
    """Wait until a configured service `answers`; at the deadline, fail the test with `what` and
    how to start the services."""
    wait_until(answers, timeout=SERVICE_DEADLINE, what=f"{what}; {START_HINT}")


def _weight(item: pytest.Item) -> float:
    """How long ``item``'s module is said to take: ``heavy(minutes=N)`` is N, a plain ``heavy``
    one minute, any other 0."""
    mark = item.get_closest_marker("heavy")
    return 0.0 if mark is None else float(mark.kwargs.get("minutes", 1))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The ``heavy`` tests first, the longest first (stable otherwise): spread over
    pytest-xdist's workers from the start, they do not leave one worker running alone at the
    end."""
    items.sort(key=lambda item: -_weight(item))


# --- MariaDB / MySQL ------------------------------------------------------------------------


def _server_engine() -> sa.Engine:
    url = make_url(require_env("DROVER_TEST_MYSQL_URL"))
    return sa.create_engine(
        url,
        isolation_level="AUTOCOMMIT",
        poolclass=sa.NullPool,
        connect_args={"connect_timeout": 3},
    )


def _create_database(server: sa.Engine) -> URL:
    name = f"drover_test_{secrets.token_hex(6)}"
    with server.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
    return server.url.set(database=name, query={"charset": "utf8mb4"})


#: MySQL's error for a KILL of a connection that no longer exists
UNKNOWN_THREAD = 1094


def _drop_database(server: sa.Engine, name: str) -> None:
    with server.connect() as conn:
        # Connections a test leaked would make DROP wait on their metadata locks: end them first,
        # and never wait long for a lock.
        ids = (
            conn.execute(
                sa.text(
                    "SELECT id FROM information_schema.processlist"
                    " WHERE db = :db AND id <> CONNECTION_ID()"
                ),
                {"db": name},
            )
            .scalars()
            .all()
        )
        for conn_id in ids:
            try:
                conn.execute(sa.text(f"KILL CONNECTION {int(conn_id)}"))
            except sa.exc.OperationalError as exc:
                if exc.orig is None or exc.orig.args[0] != UNKNOWN_THREAD:
                    raise  # 1094: it ended between the listing and the kill, as it was to
        conn.execute(sa.text("SET SESSION lock_wait_timeout = 30"))
        conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{name}`"))


@pytest.fixture(scope="session")
def mysql_server() -> Iterator[sa.Engine]:
    """An AUTOCOMMIT engine on the server of DROVER_TEST_MYSQL_URL (no database selected)."""
    server = _server_engine()

    def answers() -> bool:
        with server.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        return True

    wait_for_service(answers, f"MySQL at {server.url.render_as_string(hide_password=True)}")
    yield server
    server.dispose()


@pytest.fixture(scope="session")
def mysql_url(mysql_server: sa.Engine) -> Iterator[str]:
    """URL of a fresh utf8mb4 database for the whole session, dropped at its end."""
    url = _create_database(mysql_server)
    yield url.render_as_string(hide_password=False)
    assert url.database is not None
    _drop_database(mysql_server, url.database)


@pytest.fixture(scope="module")
def module_mysql_url(mysql_server: sa.Engine) -> Iterator[str]:
    """URL of a fresh utf8mb4 database for one module (the nodes of its test world), dropped
    after the module's last test."""
    url = _create_database(mysql_server)
    yield url.render_as_string(hide_password=False)
    assert url.database is not None
    _drop_database(mysql_server, url.database)


@pytest.fixture
def fresh_mysql_url(mysql_server: sa.Engine) -> Iterator[Callable[[], str]]:
    """Factory: each call creates another fresh utf8mb4 database (all dropped after the test)."""
    created: list[str] = []

    def make() -> str:
        url = _create_database(mysql_server)
        assert url.database is not None
        created.append(url.database)
        return url.render_as_string(hide_password=False)

    yield make
    for name in created:
        _drop_database(mysql_server, name)


# --- SQLite -----------------------------------------------------------------------------------


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    """A SQLite store at the head schema with what a node creates at start (node ``test-node``,
    data under the test's tmp folder); disposed of after the test."""
    from scheduler.config import Settings
    from tests.support.schema import sqlite_head_store

    settings = Settings(data_dir=tmp_path / "data", node_id="test-node")
    store = sqlite_head_store(tmp_path / "drover.db", settings)
    yield store
    store.dispose()


# --- ZooKeeper ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def zk_hosts() -> str:
    """DROVER_TEST_ZK_HOSTS, checked by opening (and closing) a kazoo session."""
    from kazoo.client import KazooClient

    hosts = require_env("DROVER_TEST_ZK_HOSTS")

    def session_opens() -> bool:
        client = KazooClient(hosts=hosts, timeout=2.0)
        try:
            client.start(timeout=3.0)
            client.get_children("/")
            return True
        finally:
            client.stop()
            client.close()

    wait_for_service(session_opens, f"ZooKeeper at {hosts}")
    return hosts


# --- Spark standalone -----------------------------------------------------------------------

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_get_json(url: str, timeout: float = 3.0) -> Any:
    """GET `url` (never through a proxy) and decode its JSON body; raise on a non-2xx answer."""
    with _NO_PROXY.open(url, timeout=timeout) as resp:
        return json.load(resp)


@dataclass(frozen=True)
class SparkStandalone:
    """One Spark standalone cluster started by scripts/services.sh."""

    master_url: str  # spark://127.0.0.1:7077
    rest_url: str  # http://127.0.0.1:6066 (REST submission server)
    ui_url: str  # http://127.0.0.1:8080 (master web UI; /json/ lists workers, apps, drivers)

    def master_state(self) -> dict[str, Any]:
        state: dict[str, Any] = http_get_json(f"{self.ui_url}/json/")
        return state


def _spark_cluster(letter: str) -> SparkStandalone:
    cluster = SparkStandalone(
        master_url=require_env(f"DROVER_TEST_SPARK_{letter}_MASTER"),
        rest_url=require_url(f"DROVER_TEST_SPARK_{letter}_REST"),
        ui_url=require_url(f"DROVER_TEST_SPARK_{letter}_UI"),
    )

    def alive_with_worker() -> bool:
        state = cluster.master_state()
        workers = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
        return state.get("status") == "ALIVE" and len(workers) > 0

    wait_for_service(
        alive_with_worker, f"Spark master {cluster.ui_url}/json/ to be ALIVE with a worker"
    )
    return cluster


@pytest.fixture(scope="session")
def spark_standalone() -> SparkStandalone:
    """Spark standalone cluster "a", checked through its master's /json/ endpoint."""
    return _spark_cluster("A")


@pytest.fixture(scope="session")
def spark_standalone_b() -> SparkStandalone:
    """Second cluster "b" (needs `SPARK_CLUSTERS=2 scripts/services.sh up`)."""
    return _spark_cluster("B")


@pytest.fixture
def foreign_session() -> Iterator[tuple[int, int]]:
    """A live process session that no Drover backend started: (session id, start time in ticks).

    Not this test's own session: under CI the runner's session leader may sit outside our PID
    namespace (``os.getsid(0)`` is then 0)."""
    proc = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        raw = Path(f"/proc/{proc.pid}/stat").read_bytes()
        starttime = int(raw[raw.rindex(b")") + 2 :].split()[19])
        yield proc.pid, starttime
        assert proc.poll() is None, "a backend signalled a session it did not start"
    finally:
        proc.kill()
        proc.wait(timeout=10)


# --- YARN + HDFS ----------------------------------------------------------------------------


def _yarn_cluster(letter: str) -> YarnCluster:
    cluster = YarnCluster(
        name=letter.lower(),
        rm_url=require_url(f"DROVER_TEST_YARN_{letter}_RM"),
        hdfs_url=require_url(f"DROVER_TEST_YARN_{letter}_HDFS"),
        webhdfs_url=require_url(f"DROVER_TEST_YARN_{letter}_WEBHDFS"),
        conf_dir=require_env(f"DROVER_TEST_YARN_{letter}_CONF"),
        control_url=require_url(f"DROVER_TEST_YARN_{letter}_CONTROL"),
    )

    def active() -> bool:
        return cluster.info().get("haState") == "ACTIVE"

    wait_for_service(active, f"ResourceManager {cluster.rm_url} to be ACTIVE (HADOOP_CLUSTERS=2)")
    return cluster


@pytest.fixture(scope="session")
def yarn_a() -> YarnCluster:
    """YARN + HDFS test cluster "a" (``HADOOP_CLUSTERS=2 scripts/services.sh up``)."""
    return _yarn_cluster("A")


@pytest.fixture(scope="session")
def yarn_b() -> YarnCluster:
    """YARN + HDFS test cluster "b"."""
    return _yarn_cluster("B")


# --- S3-compatible object store ---------------------------------------------------------------


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """moto's S3 server on loopback, for the session (the ``moto[server]`` dev extra)."""
    server = S3Server(log_path=tmp_path_factory.mktemp("s3") / "moto.log").start()
    yield server
    server.stop()
