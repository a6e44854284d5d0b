"""What both deployments of a chaos run share (I/O): the private ZooKeeper and MariaDB, the
nodes' environment, starting and stopping the nodes, registering the clusters and groups.
``chaos/run.py`` deploys simulated clusters with these, ``chaos/realspark.py`` real ones."""

from __future__ import annotations

import os
import subprocess
from contextlib import ExitStack
from pathlib import Path

from harness.mariadb import MariaDbServer
from harness.nodes import DROVER, NodeProcess, free_port
from harness.zkserver import ZkServer

ROOT = Path(__file__).resolve().parents[1]


def services(stack: ExitStack, workdir: Path) -> tuple[ZkServer, MariaDbServer, str]:
    """A ZooKeeper and a MariaDB server of the run's own (stopped when ``stack`` closes), and
    the URL of the migrated database ``drover``."""
    zk = ZkServer(free_port(), workdir / "zk")
    stack.callback(zk.close)
    zk.start()
    db = MariaDbServer(free_port(), workdir / "mariadb")
    stack.callback(db.close)
    db.start()
    return zk, db, db.database("drover")


def node_env(
    workdir: Path, database_url: str, zk_hosts: str, settings: dict[str, str]
) -> dict[str, str]:
    """Every node's environment (the store migrated on the way)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(workdir),
        "LC_ALL": "C",
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "DROVER_DATABASE_URL": database_url,
        "DROVER_ZK_HOSTS": zk_hosts,
        "DROVER_ZK_NAMESPACE": "/chaos",
        "DROVER_ARTIFACT_ROOTS": f"{ROOT / 'pipelines'}/",
        **settings,
    }
    if "JAVA_HOME" in os.environ:
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    subprocess.run([DROVER, "db", "upgrade"], env=env, check=True, capture_output=True, timeout=120)
    return env


def node_processes(workdir: Path, count: int) -> list[NodeProcess]:
    """``c1`` .. ``c<count>``, not started (their environment comes from :func:`start_nodes`)."""
    return [NodeProcess(f"c{i}", {}, workdir / f"c{i}.log") for i in range(1, count + 1)]


def start_nodes(
    stack: ExitStack, workdir: Path, procs: list[NodeProcess], env: dict[str, str], groups: str
) -> None:
    """Start every node (active in ``groups``, an AZ each) and wait until all are ready; they
    stop (thawed first) when ``stack`` closes."""
    for i, node in enumerate(procs, start=1):
        node.env = {
            **env,
            "DROVER_GROUPS": groups,
            "DROVER_AZ": f"az-{i}",
            "DROVER_DATA_DIR": str(workdir / node.node_id),
        }

    def stop_nodes() -> None:
        live = [node for node in procs if node.proc is not None and node.alive]
        for node in live:  # all at once: each one's graceful stop takes seconds
            node.thaw()
            node.terminate()
        for node in live:
            node.wait_exit(timeout=30)

    stack.callback(stop_nodes)
    for node in procs:
        node.start()
    for node in procs:
        node.wait_ready()


def register(
    api: NodeProcess,
    clusters: dict[str, tuple[str, str, str]],
    layout: dict[str, tuple[str, str, str]],
    workdir: Path,
) -> None:
    """Register each cluster (name -> master URL, REST URL, UI URL) with its storage root under
    ``workdir``, and its group (``layout``: cluster -> group, failover cluster, AZ)."""
    for name, (master_url, rest_url, ui_url) in clusters.items():
        root = workdir / "storage" / name
        root.mkdir(parents=True, exist_ok=True)
        api.post(
            "/v1/clusters",
            {
                "name": name,
                "kind": "standalone",
                "master_url": master_url,
                "rest_url": rest_url,
                "ui_url": ui_url,
                "az": layout[name][2],
                "storage_root": root.as_uri(),
            },
        )
    for name, (group, failover, _) in layout.items():
        api.post(
            "/v1/groups", {"name": group, "primary_cluster": name, "failover_cluster": failover}
        )


def start_registered(
    stack: ExitStack,
    workdir: Path,
    procs: list[NodeProcess],
    env: dict[str, str],
    clusters: dict[str, tuple[str, str, str]],
    layout: dict[str, tuple[str, str, str]],
) -> None:
    """Start the nodes active in every group of ``layout`` (:func:`start_nodes`), then register
    ``clusters`` and the groups through the first one (:func:`register`)."""
    start_nodes(stack, workdir, procs, env, ",".join(f"{g}:active" for g, _, _ in layout.values()))
    register(procs[0], clusters, layout, workdir)
