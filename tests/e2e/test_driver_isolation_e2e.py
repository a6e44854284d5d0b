"""A hostile tenant on a real node (SQLite store, real Spark in local mode): its pipeline, under
an allowed artifact root, tries to read the node's environment, the store file and the data
directory, and to read and write another team's job's checkpoint. Every attempt is denied by
Unix permissions -- the drivers run as their teams' users (``DROVER_DRIVER_USER``) -- and both
jobs keep running.
"""

from __future__ import annotations

import json
import os
import pwd
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.nodes import admin_token, free_port
from harness.procs import pids_with_cmdline
from tests.conftest import wait_until
from tests.support.driver_users import TEMPLATE, open_directory, team_user

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DROVER = str(Path(sys.executable).with_name("drover"))
HOSTILE = ROOT / "tests" / "e2e" / "pipelines" / "hostile_neighbour.py"
VICTIM = ROOT / "pipelines" / "windowed_counts.py"
#: a Python every user may run (the test's own lives under root's private home)
SYSTEM_PYTHON = "/usr/bin/python3.11"
SECRET = "e2e-deployment-secret-" + "k" * 24


@dataclass
class Node:
    client: httpx.Client
    proc: subprocess.Popen[bytes]
    base: Path
    data: Path


@pytest.fixture
def node() -> Iterator[Node]:
    with open_directory("drover-e2e-iso-") as base:
        data = base / "data"
        port = free_port()
        env = {
            **os.environ,
            "DROVER_DATA_DIR": str(data),
            "DROVER_API_PORT": str(port),
            "DROVER_NODE_ID": "iso-node",
            "DROVER_RECONCILE_INTERVAL": "1",
            "DROVER_DEPLOYMENT_SECRET": SECRET,
            "DROVER_DRIVER_USER": TEMPLATE,
            "DROVER_SPARK_PYTHON": SYSTEM_PYTHON,
            "DROVER_SPARK_LOCAL_MASTER": "local[1]",
            "DROVER_ARTIFACT_ROOTS": f"{ROOT / 'pipelines'}/,{HOSTILE.parent}/",
            "DROVER_HEALTH_MONITOR": "false",
            "DROVER_REPLICATION": "false",
            "DROVER_ALERTS": "false",
        }
        env.pop("DROVER_DATABASE_URL", None)
        subprocess.run(
            [DROVER, "db", "upgrade"], env=env, check=True, capture_output=True, timeout=60
        )
        log = (base / "node.log").open("wb")
        proc = subprocess.Popen(
            [DROVER, "node", "run"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        client = httpx.Client(
            base_url=f"http://127.0.0.1:{port}",
            timeout=10,
            headers={"Authorization": f"Bearer {admin_token(env)}", "X-Drover-Client": "e2e"},
        )
        try:

            def ready() -> bool:
                assert proc.poll() is None, (base / "node.log").read_text()[-3000:]
                return client.get("/readyz").status_code == 200

            wait_until(ready, timeout=120, interval=0.5, what="the node to be ready")
            yield Node(client, proc, base, data)
        finally:
            client.close()
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            log.close()
            for pid in pids_with_cmdline(str(data).encode()):
                if pid != os.getpid():
                    try:
                        os.killpg(os.getpgid(pid), signal.SIGKILL)
                    except OSError:
                        pass


def job(client: httpx.Client, name: str) -> dict[str, Any]:
    response = client.get(f"/v1/jobs/{name}")
    response.raise_for_status()
    return dict(response.json())


def owned_directory(path: Path, user: pwd.struct_passwd) -> Path:
    """An output directory the job's driver may write (the pipelines write their results)."""
    path.mkdir(mode=0o700)
    os.chown(path, user.pw_uid, user.pw_gid)
    return path


def test_a_hostile_pipeline_reaches_nothing_and_both_jobs_run(node: Node) -> None:
    alpha, beta = team_user("alpha"), team_user("beta")
    client, data = node.client, node.data
    root = data / "checkpoints" / "local"
    victim_ckpt = root / "victim" / "checkpoint"

    out_a = owned_directory(node.base / "out-alpha", alpha)
    made = client.post(
        "/v1/jobs",
        json={
            "name": "victim",
            "team": "alpha",
            "entrypoint": str(VICTIM),
            "args": ["--output", str(out_a), "--trigger-seconds", "2", "--rows-per-second", "5"],
            "desired_state": "RUNNING",
        },
    )
    assert made.status_code == 201, made.text
    run = wait_until(
        lambda: job(client, "victim")["current_run"],
        timeout=30,
        interval=0.2,
        what="the victim's run to be recorded",
    )
    victim_log = data / "runs" / "victim" / str(run["id"]) / "driver.log"

    out_b = owned_directory(node.base / "out-beta", beta)
    report = out_b / "report.json"
    made = client.post(
        "/v1/jobs",
        json={
            "name": "hostile",
            "team": "beta",
            "entrypoint": str(HOSTILE),
            "args": [
                "--report",
                str(report),
                "--node-pid",
                str(node.proc.pid),
                "--data-dir",
                str(data),
                "--store",
                str(data / "drover.db"),
                "--victim-checkpoint",
                str(victim_ckpt),
                "--victim-log",
                str(victim_log),
            ],
            "desired_state": "RUNNING",
        },
    )
    assert made.status_code == 201, made.text

    def running(name: str) -> bool:
        current = job(client, name)
        assert current["state"] != "FAILED", current
        return bool(current["state"] == "RUNNING")

    wait_until(lambda: running("hostile"), timeout=120, interval=0.5, what="hostile RUNNING")
    wait_until(report.exists, timeout=60, interval=0.5, what="the hostile pipeline's report")
    got = json.loads(report.read_text())
    assert got["uid"] == beta.pw_uid and got["victim_checkpoint_exists"], got
    for what in (
        "node_environ",
        "signal_node",
        "store_file",
        "data_dir_list",
        "data_dir_write",
        "runs_list",
        "victim_log",
        "victim_checkpoint_list",
        "victim_checkpoint_read",
        "victim_checkpoint_write",
        "beside_victim_checkpoint",
    ):
        assert got[what] == "denied", (what, got)
    assert got["secrets_in_environment"] == []

    wait_until(lambda: running("victim"), timeout=120, interval=0.5, what="victim RUNNING")
    assert running("hostile")  # refused everywhere, still running
    wait_until(
        lambda: (victim_ckpt / "commits").is_dir(), timeout=60, interval=0.5, what="a commit"
    )
    assert not (victim_ckpt / "intruder").exists() and not (data / "planted").exists()
    assert victim_ckpt.stat().st_uid == alpha.pw_uid
    assert (data / "drover.db").stat().st_mode & 0o077 == 0
