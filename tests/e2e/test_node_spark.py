"""End to end through the REST API of a real node process on real Spark (local mode), with the
metadata in the real MariaDB: create → start → RUNNING with output → stop → STOPPED → start
again from the checkpoint (batch ids continue) → restart (a new run) → stop."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.nodes import admin_token, free_port
from harness.procs import kill_groups, pids_with_cmdline, stop_session
from tests.conftest import wait_until

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DROVER = str(Path(sys.executable).with_name("drover"))
JOB = "e2e-windowed-counts"


@pytest.fixture
def node(tmp_path: Path, fresh_mysql_url: Callable[[], str]) -> Iterator[tuple[httpx.Client, Path]]:
    port = free_port()
    env = {
        **os.environ,
        "DROVER_DATABASE_URL": fresh_mysql_url(),
        "DROVER_DATA_DIR": str(tmp_path / "data"),
        "DROVER_API_PORT": str(port),
        "DROVER_NODE_ID": "e2e-node",
        "DROVER_RECONCILE_INTERVAL": "1",
    }
    refused = subprocess.run(
        [DROVER, "node", "run"], env=env, capture_output=True, text=True, timeout=60
    )
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines()[-1].endswith("run `drover db upgrade`")
    subprocess.run([DROVER, "db", "upgrade"], env=env, check=True, capture_output=True, timeout=60)
    log = (tmp_path / "node.log").open("wb")
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
            assert proc.poll() is None, (tmp_path / "node.log").read_text()[-3000:]
            return client.get("/readyz").status_code == 200

        wait_until(ready, timeout=120, interval=0.5, what="the node to be ready")
        yield client, tmp_path
    finally:
        client.close()
        stop_session(proc)
        log.close()
        kill_groups(_live_run_processes(tmp_path))


def _live_run_processes(tmp_path: Path) -> list[int]:
    """Processes whose command line mentions this test's data dir (its Spark runs)."""
    marker = str(tmp_path / "data").encode()
    return [pid for pid in pids_with_cmdline(marker) if pid != os.getpid()]


def job(client: httpx.Client) -> dict[str, Any]:
    response = client.get(f"/v1/jobs/{JOB}")
    response.raise_for_status()
    return response.json()


def wait_state(client: httpx.Client, state: str, timeout: float = 120) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        current = job(client)
        assert current["state"] != "FAILED", current
        return current if current["state"] == state else None

    return wait_until(reached, timeout=timeout, interval=0.5, what=f"job {JOB} to be {state}")


def batch_ids(output: Path) -> set[int]:
    return {int(p.name.split("=", 1)[1]) for p in output.glob("batch_id=*")}


def files_in(output: Path, batch: int) -> set[str]:
    return {p.name for p in (output / f"batch_id={batch}").iterdir()}


def test_job_lifecycle_on_real_spark(node: tuple[httpx.Client, Path]) -> None:
    client, tmp_path = node
    output = tmp_path / "output"
    created = client.post(
        "/v1/jobs",
        json={
            "name": JOB,
            "entrypoint": f"file://{ROOT / 'pipelines' / 'windowed_counts.py'}",
            "args": ["--output", str(output), "--trigger-seconds", "2", "--rows-per-second", "20"],
            "team": "e2e",
        },
    )
    assert created.status_code == 201, created.text
    assert client.post(f"/v1/jobs/{JOB}/start").status_code == 202

    running = wait_state(client, "RUNNING")
    assert running["cluster"] == "local" and running["owner"] == "e2e-node"
    first_run = running["current_run"]
    assert first_run["state"] == "RUNNING" and first_run["started_at"]
    wait_until(
        lambda: len(batch_ids(output)) >= 2, timeout=120, interval=1, what="2 output batches"
    )

    assert client.post(f"/v1/jobs/{JOB}/stop").status_code == 202
    stopped = wait_state(client, "STOPPED")
    assert stopped["current_run"]["state"] == "KILLED"
    wait_until(lambda: not _live_run_processes(tmp_path), timeout=30, what="no Spark process left")
    before = batch_ids(output)
    first_files = files_in(output, min(before))

    assert client.post(f"/v1/jobs/{JOB}/start").status_code == 202
    wait_state(client, "RUNNING")
    new = wait_until(
        lambda: batch_ids(output) - before, timeout=120, interval=1, what="a new batch"
    )
    assert min(new) > max(before), (before, new)  # resumed from the checkpoint, not from 0
    assert files_in(output, min(before)) == first_files  # no batch was written again

    restarted = client.post(f"/v1/jobs/{JOB}/restart")
    assert restarted.status_code == 202

    def third_run_running() -> bool:
        current = job(client)
        return current["state"] == "RUNNING" and current["current_run"]["attempt"] == 3

    wait_until(third_run_running, timeout=120, interval=0.5, what="the restarted run to be RUNNING")

    assert client.post(f"/v1/jobs/{JOB}/stop").status_code == 202
    wait_state(client, "STOPPED")
    wait_until(lambda: not _live_run_processes(tmp_path), timeout=30, what="no Spark process left")

    runs = client.get(f"/v1/jobs/{JOB}/runs").json()
    assert len(runs["data"]) == 3
    for run in runs["data"]:
        assert run["state"] == "KILLED" and run["reason"] == "stopped by Drover"
        assert run["created_at"] <= run["submitted_at"] <= run["started_at"] <= run["ended_at"]
    assert [r["attempt"] for r in runs["data"]] == [3, 2, 1]
    transitions = [
        (e["from_state"], e["to_state"])
        for e in reversed(client.get(f"/v1/jobs/{JOB}/events").json()["data"])
        if e["to_state"]
    ]
    assert ("RUNNING", "STOPPING") in transitions and ("STOPPING", "STOPPED") in transitions
    assert ("STOPPING", "QUEUED") in transitions  # the restart
