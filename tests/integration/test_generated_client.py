"""A client made by a standard generator from a real node's ``/openapi.json`` is clean and works:
``openapi-python-client`` (a dev dependency) generates it with no warning, it compiles with
warnings as errors, authenticates with a bearer token and drives a job's lifecycle (create,
start, read its state until RUNNING, stop, delete) against a real node (the embedded default:
SQLite, no ZooKeeper, a fake ``spark-submit``: Spark is not what this is about)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.nodes import admin_token
from tests.conftest import wait_until
from tests.support.nodes import NodeProcess

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

BIN = Path(sys.executable).parent
PACKAGE = "drover_generated_client"


@pytest.fixture(scope="module")
def generated(embedded: NodeProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    where = tmp_path_factory.mktemp("client")
    spec = where / "openapi.json"
    spec.write_bytes(httpx.get(f"{embedded.url}/openapi.json", timeout=10).content)
    made = subprocess.run(
        [
            str(BIN / "openapi-python-client"),
            "generate",
            "--path",
            str(spec),
            "--output-path",
            str(where / PACKAGE),
            "--meta",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(where)},  # its formatter: our ruff
    )
    said = made.stdout + made.stderr
    assert made.returncode == 0, said
    assert "warning" not in said.lower() and "error" not in said.lower(), said
    compiled = subprocess.run(
        [sys.executable, "-W", "error", "-m", "compileall", "-q", str(where / PACKAGE)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    sys.path.insert(0, str(where))
    try:
        yield importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(where))
        for name in [m for m in sys.modules if m.split(".")[0] == PACKAGE]:
            del sys.modules[name]


def test_the_generated_client_drives_a_jobs_lifecycle(
    embedded: NodeProcess, generated: Any
) -> None:
    api = importlib.import_module(f"{PACKAGE}.api.jobs")
    models = importlib.import_module(f"{PACKAGE}.models")
    for operation in ("create_job", "start_job", "get_job", "stop_job", "delete_job"):
        importlib.import_module(f"{PACKAGE}.api.jobs.{operation}")
    anonymous = generated.Client(base_url=embedded.url)
    refused = api.get_job.sync_detailed("nope", client=anonymous)
    assert refused.status_code == 401 and isinstance(refused.parsed, models.Problem)
    client = generated.AuthenticatedClient(base_url=embedded.url, token=admin_token(embedded.env))
    pipeline = str(Path(embedded.env["DROVER_DATA_DIR"]) / "artifacts" / "pipeline.py")
    created = api.create_job.sync(
        client=client, body=models.JobCreate(name="gen-client", entrypoint=pipeline, team="ads")
    )
    assert isinstance(created, models.JobPublic), created
    assert created.desired_state == models.DesiredState.STOPPED
    started = api.start_job.sync("gen-client", client=client)  # no body, no extra header
    assert isinstance(started, models.JobPublic), started
    assert started.desired_state == models.DesiredState.RUNNING

    def state() -> str:
        job = api.get_job.sync("gen-client", client=client)
        assert isinstance(job, models.JobPublic), job
        return str(job.state.value)

    wait_until(lambda: state() == "RUNNING", timeout=90, interval=0.5, what="RUNNING")
    stopped = api.stop_job.sync("gen-client", client=client)
    assert isinstance(stopped, models.JobPublic) and stopped.desired_state.value == "STOPPED"
    wait_until(lambda: state() in ("STOPPED", "FINISHED"), timeout=90, interval=0.5, what="stop")
    gone = api.delete_job.sync_detailed("gen-client", client=client)
    assert gone.status_code == 204, gone.content
    missing = api.get_job.sync_detailed("gen-client", client=client)
    assert missing.status_code == 404 and missing.parsed.type_ == "urn:drover:problem:not-found"
