"""An idle node runs only the Ray processes Drover uses (every Ray helper Drover does not use
is switched off), and its actors' output is in its log.

One real node (``drover node run``, fresh MariaDB database, a ZooKeeper namespace of its own):

- its session holds the node process, Ray's GCS, raylet and two agents (the raylet requires
  them), and one worker per actor (Membership, JobReconciler): no dashboard, autoscaler monitor
  or log monitor, and no idle worker kept;
- every process of the session at the node's own priority (Ray's workers included);
- the actors' records (their start, their ZooKeeper registration) reach the node's log, though
  Ray's log monitor does not run (``scheduler/actors/worker_output.py`` follows their files), as
  JSON with their process names; and what they log while the node stops is there after it stopped.

Memory figures are the bench's (``bench/node_rss.py``), not asserted here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from harness.procs import session_pids
from tests.conftest import wait_until
from tests.support.nodes import DROVER, NodeProcess

pytestmark = pytest.mark.e2e

#: the processes Drover does not use, by a fragment of their command line
UNUSED = {
    "dashboard": b"dashboard/dashboard.py",
    "autoscaler monitor": b"autoscaler/_private/monitor.py",
    "log monitor": b"log_monitor.py",
}


def cmdline(pid: int) -> bytes:
    try:
        return " ".join(psutil.Process(pid).cmdline()).encode()
    except (psutil.Error, OSError):
        return b""


def records(log: Path) -> list[dict[str, Any]]:
    found = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            found.append(doc)
    return found


def logged(log: Path, process: str, fragment: str) -> bool:
    return any(
        r.get("process") == process and fragment in str(r.get("message", "")) for r in records(log)
    )


def test_idle_node_runs_only_the_ray_processes_it_uses_and_logs_its_actors(
    tmp_path: Path, fresh_mysql_url: Callable[[], str], zk_hosts: str
) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "DROVER_DATABASE_URL": fresh_mysql_url(),
        "DROVER_ZK_HOSTS": zk_hosts,
        "DROVER_ZK_NAMESPACE": f"/e2e-{uuid.uuid4().hex[:12]}",
        "DROVER_ZK_SESSION_TIMEOUT": "2",
        "DROVER_DATA_DIR": str(tmp_path / "node"),
        "DROVER_LOG_FORMAT": "json",
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        # the checkout under test, where it is not the one the environment has installed
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }
    subprocess.run([DROVER, "db", "upgrade"], env=env, check=True, capture_output=True, timeout=120)
    node = NodeProcess("e2e-helpers", env, tmp_path / "node.log")
    node.start()
    try:
        node.wait_ready()
        assert node.proc is not None
        sid = node.proc.pid

        # the actors' own records, read from their files by the node process
        wait_until(
            lambda: logged(node.log_path, "reconciler", "reconcile loop of group default started"),
            timeout=30,
            what="the reconciler's start in the node's log",
        )
        wait_until(
            lambda: logged(node.log_path, "membership", "registered in ZooKeeper"),
            timeout=30,
            what="membership's registration in the node's log",
        )

        def two_ray_workers() -> list[bytes] | None:
            # Ray titles its two agents ray::DashboardAgent and ray::RuntimeEnvAgent too
            found = [
                c
                for c in map(cmdline, session_pids(sid))
                if c.startswith(b"ray::") and b"Agent" not in c.split()[0]
            ]
            return found if len(found) == 2 else None

        # one worker per actor; an idle one Ray may have started is gone within its idle limit
        workers = wait_until(
            two_ray_workers,
            timeout=30,
            what="exactly the two actors' workers",
        )
        # a worker's title is ray::<actor class>, with .<method> while it runs a call
        names = sorted(re.sub(rb"^ray::(\w+).*", rb"\1", w.strip()) for w in workers)
        assert names == [b"JobReconciler", b"Membership"], workers
        lines = [cmdline(pid) for pid in session_pids(sid)]
        for name, fragment in UNUSED.items():
            running = [c for c in lines if fragment in c]
            assert not running, f"Ray's {name} runs: {running}"
        assert any(b"gcs_server" in c for c in lines) and any(b"raylet" in c for c in lines)
        # the actors at the node's own priority (Ray's default would put them at nice 15)
        niceness = {pid: psutil.Process(pid).nice() for pid in session_pids(sid)}
        assert set(niceness.values()) == {psutil.Process(sid).nice()}, niceness

        every = records(node.log_path)
        assert every and all(r.get("node") == "e2e-helpers" for r in every)
        assert not any("(JobReconciler pid=" in str(r.get("message")) for r in every)
    finally:
        node.stop()

    # what the reconciler logged as the node drained made it into the log before Ray went
    assert logged(node.log_path, "reconciler", "drained"), node.log_tail()
    assert "\x1b[" not in node.log_path.read_text(errors="replace"), "colour codes in the log"
