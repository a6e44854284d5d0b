"""What the end-to-end tests share about the Drover nodes they start: a node's environment on a
fresh database (alone, or with ZooKeeper), a standalone cluster registered through the API, and
the helpers of a test world of several nodes (the live one, its API, every node's log in a
failure message)."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from scheduler.core.records import RunRecord
from scheduler.store import jobs as jobs_store
from scheduler.store.db import Store
from tests.conftest import SparkStandalone, wait_until
from tests.support.nodes import DROVER, NodeProcess

ROOT = Path(__file__).resolve().parents[2]

#: settings of the machine's shell a node of a test must not inherit
_FOREIGN = ("DROVER_ZK_HOSTS", "DROVER_GROUPS", "DROVER_FAULTS", "DROVER_CONFIG")


def node_env(database_url: str, tmp: Path, **settings: str) -> dict[str, str]:
    """The environment of a node without ZooKeeper on ``database_url`` (migrated here), its data
    under ``tmp/data``, artifacts from ``tmp`` or the repository, reconciling every second;
    ``settings`` add to it or override it."""
    env = {k: v for k, v in os.environ.items() if k not in _FOREIGN}
    env.update(
        {
            "DROVER_DATABASE_URL": database_url,
            "DROVER_DATA_DIR": str(tmp / "data"),
            "DROVER_ARTIFACT_ROOTS": f"{tmp}/,{ROOT}/",
            "DROVER_RECONCILE_INTERVAL": "1",
            **settings,
        }
    )
    return upgraded(env)


def zk_node_env(
    tmp: Path, database_url: str, zk_hosts: str, namespace: str, **settings: str
) -> dict[str, str]:
    """The environment of nodes that meet in ZooKeeper: nothing of the machine's shell but
    ``PATH``, ``HOME`` in ``tmp``, ``database_url`` (migrated here), a ZooKeeper namespace of
    their own (``/<namespace>-<random>``), Ray on loopback; ``settings`` add to it."""
    return upgraded(
        {
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp),
            "DROVER_DATABASE_URL": database_url,
            "DROVER_ZK_HOSTS": zk_hosts,
            "DROVER_ZK_NAMESPACE": f"/{namespace}-{uuid.uuid4().hex[:12]}",
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
            **settings,
        }
    )


def az_nodes(tmp: Path, env: dict[str, str], azs: dict[str, str]) -> dict[str, NodeProcess]:
    """Nodes of ``env``, one for each ``node id: availability zone`` of ``azs``, each with its
    data under ``tmp/<node id>`` and its log in ``tmp/<node id>.log`` (not started)."""
    return {
        node_id: NodeProcess(
            node_id,
            {**env, "DROVER_DATA_DIR": str(tmp / node_id), "DROVER_AZ": az},
            tmp / f"{node_id}.log",
        )
        for node_id, az in azs.items()
    }


def upgraded(env: dict[str, str]) -> dict[str, str]:
    """``env`` once ``drover db upgrade`` has migrated its database."""
    subprocess.run([DROVER, "db", "upgrade"], env=env, check=True, capture_output=True, timeout=120)
    return env


def register_standalone(
    node: NodeProcess, name: str, cluster: SparkStandalone, root: Path, **fields: Any
) -> None:
    """Register ``cluster`` as ``name`` through the node's API, its checkpoint storage root
    ``root`` (made here); ``fields`` add to the cluster's document (``az``, ...)."""
    root.mkdir()
    node.post(
        "/v1/clusters",
        {
            "name": name,
            "kind": "standalone",
            "master_url": cluster.master_url,
            "rest_url": cluster.rest_url,
            "ui_url": cluster.ui_url,
            "storage_root": root.as_uri(),
            **fields,
        },
    )


def drover_cli(node: NodeProcess, *args: str) -> str:
    """The ``drover`` command line against ``node`` as its admin; its output (the test fails
    when it exits non-zero)."""
    node.headers()  # makes the node's admin token (identity "harness") on first use
    result = subprocess.run(
        [DROVER, *args, "--api", node.url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "DROVER_TOKEN": node.token},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def current_run(database_url: str, name: str) -> RunRecord | None:
    """Job ``name``'s current run as the store at ``database_url`` has it now."""
    store = Store(database_url)
    try:
        with store.session() as session:
            return jobs_store.get_job(session, name).current_run
    finally:
        store.dispose()


def port_of(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


class NodesWorld:
    """A test world of several nodes: calls go to any live one; a wait that times out fails with
    every node's log tail."""

    nodes: dict[str, NodeProcess]
    #: how much of each node's log a failure shows
    log_tail_chars = 3000

    def alive(self) -> NodeProcess:
        return next(n for n in self.nodes.values() if n.alive)

    def get(self, path: str, **params: Any) -> Any:
        return self.alive().get(path, **params)

    def post(self, path: str, body: Any = None) -> Any:
        return self.alive().post(path, body)

    def job(self, name: str) -> dict[str, Any]:
        answer: dict[str, Any] = self.get(f"/v1/jobs/{name}")
        return answer

    def runs(self, name: str) -> list[dict[str, Any]]:
        return list(self.get(f"/v1/jobs/{name}/runs")["data"])

    def failover(self, operation: int) -> dict[str, Any]:
        answer: dict[str, Any] = self.get(f"/v1/failovers/{operation}")
        return answer

    def drover(self, *args: str) -> str:
        return drover_cli(self.alive(), *args)

    def logs(self) -> str:
        return "\n".join(
            f"--- {n.node_id}:\n{n.log_tail(self.log_tail_chars)}" for n in self.nodes.values()
        )

    def wait(self, condition: Callable[[], Any], timeout: float, what: str) -> Any:
        try:
            return wait_until(condition, timeout=timeout, interval=0.25, what=what)
        except pytest.fail.Exception as exc:
            pytest.fail(f"{exc}\n{self.logs()}", pytrace=False)
