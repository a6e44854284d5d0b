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
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.procs import kill_groups, pids_with_cmdline
from tests.conftest import wait_until
from tests.support.driver_users import TEMPLATE, open_directory, team_user
from tests.support.nodes import DROVER, NodeProcess

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ROOT / "tests" / "e2e" / "pipelines" / "hostile_neighbour.py"
VICTIM = ROOT / "pipelines" / "windowed_counts.py"
#: a Python every user may run (the test's own lives under root's private home)
SYSTEM_PYTHON = "/usr/bin/python3.11"
SECRET = "e2e-deployment-secret-" + "k" * 24


@pytest.fixture
def node() -> Iterator[tuple[NodeProcess, Path]]:
    """One node on SQLite in a directory drivers may pass through (pytest's are root's)."""
    with open_directory("drover-e2e-iso-") as base:
        data = base / "data"
        env = {
            **os.environ,
            "DROVER_DATA_DIR": str(data),
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
        node = NodeProcess("iso-node", env, base / "node.log")
        node.start()
        try:
            node.wait_ready()
            yield node, base
        finally:
            node.stop()
            # drivers: sessions of their own
            kill_groups(p for p in pids_with_cmdline(str(data).encode()) if p != os.getpid())


def job(node: NodeProcess, name: str) -> dict[str, Any]:
    return dict(node.get(f"/v1/jobs/{name}"))


def owned_directory(path: Path, user: pwd.struct_passwd) -> Path:
    """An output directory the job's driver may write (the pipelines write their results)."""
    path.mkdir(mode=0o700)
    os.chown(path, user.pw_uid, user.pw_gid)
    return path


def test_a_hostile_pipeline_reaches_nothing_and_both_jobs_run(
    node: tuple[NodeProcess, Path],
) -> None:
    alpha, beta = team_user("alpha"), team_user("beta")
    api, base = node
    data = base / "data"
    root = data / "checkpoints" / "local"
    victim_ckpt = root / "victim" / "checkpoint"

    out_a = owned_directory(base / "out-alpha", alpha)
    api.post(
        "/v1/jobs",
        {
            "name": "victim",
            "team": "alpha",
            "entrypoint": str(VICTIM),
            "args": ["--output", str(out_a), "--trigger-seconds", "2", "--rows-per-second", "5"],
            "desired_state": "RUNNING",
        },
    )
    run = wait_until(
        lambda: job(api, "victim")["current_run"],
        timeout=30,
        interval=0.2,
        what="the victim's run to be recorded",
    )
    victim_log = data / "runs" / "victim" / str(run["id"]) / "driver.log"

    out_b = owned_directory(base / "out-beta", beta)
    report = out_b / "report.json"
    api.post(
        "/v1/jobs",
        {
            "name": "hostile",
            "team": "beta",
            "entrypoint": str(HOSTILE),
            "args": [
                "--report",
                str(report),
                "--node-pid",
                str(api.proc.pid if api.proc else 0),
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

    def running(name: str) -> bool:
        current = job(api, name)
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
