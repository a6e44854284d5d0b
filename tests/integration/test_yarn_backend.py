"""The YARN backend against the real test cluster A (``HADOOP_CLUSTERS=2``): the contract of
``tests/unit/test_backend_contract.py`` with a real ``spark-submit``, a real ResourceManager and
a real PySpark pipeline in cluster deploy mode.

One application of a plain PySpark pipeline (its own appName) goes through submit -> RUNNING
(tags, name and the business's queue in the ResourceManager), find by the run's tag from a fresh
instance (a restarted node), listing, the driver's log, kill -> KILLED confirmed; a submission
to a queue YARN does not have is rejected; an unknown application is NOT_FOUND.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.backends.yarn import DEFAULT_RESOURCE_CONF, YarnBackend, yarn_tags
from scheduler.config import Settings
from scheduler.core.backend import AppState, SubmitRequest
from scheduler.core.errors import SubmissionRejected
from tests.conftest import wait_until
from tests.support.yarn import YarnCluster

pytestmark = [pytest.mark.integration, pytest.mark.serial]

REPO = Path(__file__).resolve().parents[2]
PIPELINE = REPO / "pipelines" / "plain_rate_parquet.py"
#: a fresh cluster's first application takes ~30 s to RUNNING on 2 busy cores
RUNNING_WITHIN = 150.0


@pytest.fixture(scope="module")
def backend(yarn_a: YarnCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[YarnBackend]:
    made = YarnBackend(
        yarn_a.rm_url,
        yarn_a.conf_dir,
        spark_home=Settings().resolved_spark_home,
        queue_of={"orders": "orders"}.get,
        work_dir=tmp_path_factory.mktemp("yarn-submit"),
    )
    yield made
    made.close()


def _request(job: str, run_id: int, tmp: Path, **kwargs: object) -> SubmitRequest:
    values: dict[str, object] = {
        "job_name": job,
        "run_id": run_id,
        "fencing_token": uuid.uuid4().hex,
        "entrypoint": str(PIPELINE),
        "args": ["--output", str(tmp / "out"), "--app-name", "its-own-name"],
        "checkpoint_location": "",
        "business": "orders",
    }
    values.update(kwargs)
    return SubmitRequest(**values)  # type: ignore[arg-type]


def test_probe_reads_the_resource_manager(backend: YarnBackend) -> None:
    probe = backend.probe()
    assert probe.ok, probe
    assert "ResourceManager ACTIVE, 1 NodeManagers active" in probe.detail


def test_a_run_lives_and_dies_through_the_resource_manager(
    backend: YarnBackend, yarn_a: YarnCluster, tmp_path: Path
) -> None:
    job = f"yarn-it-{uuid.uuid4().hex[:8]}"
    request = _request(
        job,
        1,
        tmp_path,
        checkpoint_location=f"{yarn_a.hdfs_url}/drover/it/{job}/checkpoint",
    )
    sub = backend.submit(request)
    assert sub.submission_id.startswith("application_") and sub.app_id == sub.submission_id
    app = yarn_a.app(sub.submission_id)
    assert app["name"] == request.app_name  # not the pipeline's own name: fixed at submission
    assert set(app["applicationTags"].split(",")) == set(yarn_tags(job, 1, request.fencing_token))
    assert app["queue"] == "root.orders"
    assert app["applicationType"] == "SPARK"

    running = wait_until(
        lambda: (s := backend.status(sub.submission_id)).state is AppState.RUNNING and s,
        timeout=RUNNING_WITHIN,
        interval=0.5,
        what="the application RUNNING with an executor",
    )
    assert running.app_id == sub.submission_id

    # a restarted node knows nothing: the run's tag finds the same application
    fresh = YarnBackend(yarn_a.rm_url, yarn_a.conf_dir, spark_home=backend.spark_home)
    try:
        found = fresh.find(request.app_name)
        assert found is not None and found.submission_id == sub.submission_id
        assert fresh.find(f"drover:{job}:2") is None
        listed = {a.submission_id: a for a in fresh.list_applications()}
        assert listed[sub.submission_id].app_name == request.app_name
        assert listed[sub.submission_id].job == job
        log = fresh.read_driver_log(sub.submission_id, "stderr")
        assert log is not None and "ApplicationMaster" in log.text
    finally:
        fresh.close()

    # a second submit of the same run adopts, never submits twice
    again = backend.submit(request)
    assert again.submission_id == sub.submission_id
    assert [a["id"] for a in yarn_a.apps(tag=yarn_tags(job, 1, "x")[1])] == [sub.submission_id]

    backend.kill(sub.submission_id)
    backend.kill(sub.submission_id)  # idempotent
    killed = wait_until(
        lambda: (s := backend.status(sub.submission_id)).state.is_terminal and s,
        timeout=30,
        interval=0.1,
        what="the kill confirmed",
    )
    assert killed.state is AppState.KILLED, killed
    backend.kill(sub.submission_id)  # an ended application: nothing to do
    assert backend.find(request.app_name) is None
    assert yarn_a.app(sub.submission_id)["finalStatus"] == "KILLED"


def test_a_queue_yarn_does_not_have_is_a_rejected_submission(
    backend: YarnBackend, tmp_path: Path
) -> None:
    request = _request(
        f"yarn-it-{uuid.uuid4().hex[:8]}", 1, tmp_path, conf={"spark.yarn.queue": "no-such-q"}
    )
    request = SubmitRequest(**{**request.__dict__, "business": "nobody"})
    with pytest.raises(SubmissionRejected, match="no-such-q"):
        backend.submit(request)


def test_an_unknown_application_is_not_found(backend: YarnBackend) -> None:
    assert backend.status("application_1_999999").state is AppState.NOT_FOUND
    backend.kill("application_1_999999")


def test_the_default_resources_fit_five_applications_on_a_test_node_manager() -> None:
    mb = sum(
        int(DEFAULT_RESOURCE_CONF[k].removesuffix("m"))
        for k in (
            "spark.driver.memory",
            "spark.driver.memoryOverhead",
            "spark.executor.memory",
            "spark.executor.memoryOverhead",
        )
    )
    assert 5 * mb <= 8192
