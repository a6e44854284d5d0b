"""Real Drover node processes for end-to-end tests: ``harness/nodes.py``'s NodeProcess (start,
stop, kill -9, freeze, thaw, get/post), failing the test instead of raising on a deadline."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.nodes import DROVER, free_port, session_pids
from harness.nodes import NodeProcess as _NodeProcess
from harness.procs import pids_with_cmdline, signal_all

__all__ = ["DROVER", "NodeProcess", "embedded_node", "free_port", "owners", "session_pids"]


class NodeProcess(_NodeProcess):
    def wait_ready(self, timeout: float = 120.0) -> None:
        try:
            super().wait_ready(timeout)
        except (TimeoutError, RuntimeError) as exc:
            pytest.fail(str(exc), pytrace=False)


def owners(node: NodeProcess, group: str | None = None) -> dict[str, str | None]:
    """job name -> owner, as the store says (read through any node's API)."""
    params: dict[str, Any] = {"limit": 1000}
    if group is not None:
        params["group"] = group
    page = node.get("/v1/jobs", **params)
    return {job["name"]: job["owner"] for job in page["data"]}


#: a ``spark-submit`` for nodes whose tests are about Drover, not Spark: it logs the lines the
#: local backend reads (``scheduler/backends/local.py``: the start marker) and runs the
#: "pipeline" with the driver's Python
FAKE_SPARK_SUBMIT = """\
#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in
    --*) shift 2 ;;
    *) break ;;
  esac
done
echo "26/11/23 08:44:18 INFO BlockManager: Initialized BlockManager: BlockManagerId(driver, \
127.0.0.1, 1, None)" >&2
exec "$PYSPARK_PYTHON" "$@"
"""
FAKE_PIPELINE = "import time\nprint('fake pipeline running', flush=True)\ntime.sleep(600)\n"


class EmbeddedNode(NodeProcess):
    """A node whose stop also ends the fake drivers it started: a driver outlives its node by
    design, a test's must not outlive the test."""

    def stop(self, timeout: float = 60.0) -> float:
        took = super().stop(timeout)
        artifacts = Path(self.env["DROVER_DATA_DIR"]) / "artifacts"
        signal_all(pids_with_cmdline(str(artifacts).encode()))
        return took


def embedded_node(tmp_path: Path, **env: str) -> NodeProcess:
    """A started, ready node of the embedded default (SQLite under ``tmp_path/data``, no
    ZooKeeper, local cluster), whose spark-submit is :data:`FAKE_SPARK_SUBMIT`; its fake
    pipeline is ``<data>/artifacts/pipeline.py``. The caller stops it (and its drivers)."""
    data = tmp_path / "data"
    home = tmp_path / "spark"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "spark-submit").write_text(FAKE_SPARK_SUBMIT)
    (home / "bin" / "spark-submit").chmod(0o755)
    (data / "artifacts").mkdir(parents=True)
    (data / "artifacts" / "pipeline.py").write_text(FAKE_PIPELINE)
    base = {k: v for k, v in os.environ.items() if not k.startswith("DROVER_") or "_TEST_" in k}
    full = {
        **base,
        "DROVER_DATA_DIR": str(data),
        "DROVER_SPARK_HOME": str(home),
        "DROVER_RECONCILE_INTERVAL": "1",
        **env,
    }
    upgrade = subprocess.run(
        [DROVER, "db", "upgrade"], env=full, capture_output=True, text=True, timeout=120
    )
    assert upgrade.returncode == 0, upgrade.stderr
    node = EmbeddedNode("embedded", full, tmp_path / "node.log")
    node.start()
    try:
        node.wait_ready()
    except BaseException:
        node.stop()
        raise
    return node
