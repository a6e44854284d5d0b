"""StandaloneRestBackend against the real Spark standalone clusters A and B (scripts/services.sh).

A tiny PySpark pipeline (written to tmp_path: the workers share this host's file system) starts
a session, records what Drover handed it and sleeps until killed. At most one application is
alive at a time; every driver a test submitted is killed in a finaliser, even on failure.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.nodes import free_port
from scheduler.backends.standalone import StandaloneRestBackend
from scheduler.core.backend import AppState, SubmitRequest
from scheduler.core.errors import ClusterUnreachable
from tests.conftest import SparkStandalone, wait_until
from tests.support.drivers import reap_drivers

pytestmark = [pytest.mark.integration, pytest.mark.serial]

REGISTER_TIMEOUT_S = 90.0  # the app registers ~4 s after create; slow when the 2 cores are busy
GONE_TIMEOUT_S = 30.0

PIPELINE = """\
import json, os, sys, time
from pyspark.sql import SparkSession
import drover_test_helper  # shipped through py_files

spark = SparkSession.builder.getOrCreate()
conf = spark.sparkContext.getConf()
record = {
    "app_id": spark.sparkContext.applicationId,
    "app_name": conf.get("spark.app.name"),
    "fence_urls_conf": conf.get("spark.drover.fenceUrls", ""),
    "fence_urls_env": os.environ.get("DROVER_FENCE_URLS", ""),
    "token": os.environ.get("DROVER_FENCING_TOKEN", ""),
    "token_in_conf": conf.get("spark.drover.fencingToken", ""),
    "helper": drover_test_helper.MARK,
    "argv": sys.argv[1:],
}
out = sys.argv[1]
with open(out + ".tmp", "w") as fh:
    json.dump(record, fh)
os.replace(out + ".tmp", out)
jsc = spark.sparkContext._jsc
while not jsc.sc().isStopped():  # a Py4J error once the killed driver JVM is gone ends us
    time.sleep(1)
"""


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    (tmp_path / "drover_test_helper.py").write_text('MARK = "helper-imported"\n')
    path = tmp_path / "sleeper.py"
    path.write_text(textwrap.dedent(PIPELINE))
    yield path, tmp_path / "drover_test_helper.py"
    # Spark's kill stops the driver JVM; the Python driver must notice and exit by itself.
    # Whatever is left after the deadline is killed, and the test fails.
    reap_drivers(tmp_path, timeout=GONE_TIMEOUT_S)


@pytest.fixture
def make_backend(
    pipeline: tuple[Path, Path],
) -> Iterator[Callable[[SparkStandalone], StandaloneRestBackend]]:
    """Backends whose submissions are all killed at the end of the test (before ``pipeline``
    checks that the Python drivers exited)."""
    made: list[StandaloneRestBackend] = []
    submitted: list[tuple[StandaloneRestBackend, str]] = []

    def make(cluster: SparkStandalone) -> StandaloneRestBackend:
        backend = StandaloneRestBackend(
            cluster.rest_url, cluster.master_url, cluster.ui_url, python=sys.executable
        )
        original = backend.submit

        def tracked(request: SubmitRequest) -> Any:
            sub = original(request)
            submitted.append((backend, sub.submission_id))
            return sub

        backend.submit = tracked  # type: ignore[method-assign]
        made.append(backend)
        return backend

    yield make
    for backend, driver_id in submitted:
        backend.kill(driver_id)
    for backend, driver_id in submitted:
        wait_until(
            lambda b=backend, d=driver_id: b.status(d).state.is_terminal,  # type: ignore[misc]
            timeout=GONE_TIMEOUT_S,
            what=f"{driver_id} to end",
        )
    for backend in made:
        backend.close()


def request(pipeline: tuple[Path, Path], tmp_path: Path, job: str, run_id: int) -> SubmitRequest:
    entry, helper = pipeline
    return SubmitRequest(
        job_name=job,
        run_id=run_id,
        fencing_token=f"tok-{job}-{run_id}",
        entrypoint=str(entry),
        args=[str(tmp_path / f"{job}-{run_id}.json")],
        checkpoint_location=str(tmp_path / "ckpt"),
        py_files=[str(helper)],
        fence_urls=["http://127.0.0.1:8000", "http://127.0.0.1:8001"],
    )


def active_apps(cluster: SparkStandalone, name: str) -> list[dict[str, Any]]:
    return [a for a in cluster.master_state()["activeapps"] if a["name"] == name]


def test_lifecycle_on_cluster_a(
    spark_standalone: SparkStandalone,
    make_backend: Callable[[SparkStandalone], StandaloneRestBackend],
    pipeline: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    cluster = spark_standalone
    backend = make_backend(cluster)
    assert backend.probe().ok
    req = request(pipeline, tmp_path, "sa-life", 1)
    sub = backend.submit(req)
    assert sub.submission_id.startswith("driver-")

    # driver launched within ~0.1 s, app not registered for seconds: STARTING, not RUNNING
    first = backend.status(sub.submission_id)
    assert first.state is AppState.STARTING, first
    assert not active_apps(cluster, req.app_name)

    def running() -> Any:
        status = backend.status(sub.submission_id)
        assert status.state.is_alive, status
        return status if status.state is AppState.RUNNING else None

    status = wait_until(running, timeout=REGISTER_TIMEOUT_S, interval=0.25, what="app RUNNING")
    apps = active_apps(cluster, req.app_name)
    assert [(a["id"], a["state"]) for a in apps] == [(status.app_id, "RUNNING")]

    record_path = tmp_path / "sa-life-1.json"
    record = json.loads(
        wait_until(
            lambda: record_path.is_file() and record_path.read_text(),
            timeout=REGISTER_TIMEOUT_S,
            what="the pipeline's record",
        )
    )
    assert record["app_id"] == status.app_id and record["app_name"] == "drover:sa-life:1"
    assert record["helper"] == "helper-imported"
    assert record["fence_urls_conf"] == "http://127.0.0.1:8000,http://127.0.0.1:8001"
    assert record["fence_urls_env"] == record["fence_urls_conf"]
    assert record["token"] == "tok-sa-life-1"  # in the driver's environment...
    assert record["token_in_conf"] == ""  # ...never in its Spark properties (command line)
    assert record["argv"] == [str(record_path)]

    # a restarted node (fresh backend, nothing cached) adopts the driver by app name
    fresh = make_backend(cluster)
    found = fresh.find(req.app_name)
    assert found is not None
    assert (found.submission_id, found.app_id) == (sub.submission_id, status.app_id)
    assert fresh.find("drover:sa-life:2") is None
    listed = {a.submission_id: a for a in fresh.list_applications()}
    assert listed[sub.submission_id].app_name == req.app_name
    assert listed[sub.submission_id].state is AppState.RUNNING

    backend.kill(sub.submission_id)
    ended = wait_until(
        lambda: (s := backend.status(sub.submission_id)).state.is_terminal and s,
        timeout=GONE_TIMEOUT_S,
        interval=0.2,
        what="the kill to be confirmed",
    )
    assert ended.state in (AppState.KILLED, AppState.NOT_FOUND)
    wait_until(
        lambda: not active_apps(cluster, req.app_name),
        timeout=GONE_TIMEOUT_S,
        what="the app to leave /json/",
    )
    backend.kill(sub.submission_id)  # idempotent
    assert fresh.find(req.app_name) is None
    listed = {a.submission_id: a for a in fresh.list_applications()}
    assert listed[sub.submission_id].state is AppState.KILLED


def test_submission_lands_on_its_own_cluster(
    spark_standalone: SparkStandalone,
    spark_standalone_b: SparkStandalone,
    make_backend: Callable[[SparkStandalone], StandaloneRestBackend],
    pipeline: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    backend_a = make_backend(spark_standalone)
    backend_b = make_backend(spark_standalone_b)
    req = request(pipeline, tmp_path, "sa-b", 1)
    sub = backend_b.submit(req)
    wait_until(
        lambda: backend_b.status(sub.submission_id).state is AppState.RUNNING,
        timeout=REGISTER_TIMEOUT_S,
        interval=0.25,
        what="the app to run on B",
    )
    assert len(active_apps(spark_standalone_b, req.app_name)) == 1
    assert active_apps(spark_standalone, req.app_name) == []
    assert backend_a.find(req.app_name) is None
    assert backend_a.status(sub.submission_id).state is AppState.NOT_FOUND
    found = backend_b.find(req.app_name)
    assert found is not None and found.submission_id == sub.submission_id
    backend_b.kill(sub.submission_id)
    wait_until(
        lambda: not active_apps(spark_standalone_b, req.app_name),
        timeout=GONE_TIMEOUT_S,
        what="the app to leave B",
    )


def test_unreachable_rest_server(spark_standalone: SparkStandalone, tmp_path: Path) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    backend = StandaloneRestBackend(
        nowhere, spark_standalone.master_url, spark_standalone.ui_url, timeout_s=1.0
    )
    try:
        entry = tmp_path / "p.py"
        entry.write_text("print('never runs')\n")
        with pytest.raises(ClusterUnreachable):
            backend.submit(SubmitRequest("x", 1, "t", str(entry)))
        with pytest.raises(ClusterUnreachable):
            backend.kill("driver-20260101000000-0000")
        probe = backend.probe()
        assert not probe.ok and "ConnectError" in probe.detail
        ui_down = StandaloneRestBackend(spark_standalone.rest_url, "spark://x:1", nowhere)
        with pytest.raises(ClusterUnreachable):
            ui_down.status("driver-20260101000000-0000")
        ui_down.close()
    finally:
        backend.close()
