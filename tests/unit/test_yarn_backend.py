"""What the YARN backend decides without a cluster: tags, the submission's properties, what an
application's REST record means, the cluster record's rules (the contract itself:
test_backend_contract.py; the real clusters: tests/integration/test_yarn_backend.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.simyarn import SimResourceManager, fake_spark_submit
from scheduler.backends.yarn import (
    MAX_TAG_LENGTH,
    YarnBackend,
    _app_status,
    _escape,
    fence_tag,
    job_tag,
    run_tag,
    yarn_tags,
)
from scheduler.core.backend import AppState, SubmitRequest
from scheduler.core.errors import ClusterUnreachable, InvalidInput
from scheduler.decisions import catalog, quotas


@given(st.text(min_size=1, max_size=300), st.integers(1, 10**12), st.text(min_size=20))
def test_tags_are_short_lower_case_ascii_whatever_the_job_name(
    job: str, run_id: int, token: str
) -> None:
    tags = yarn_tags(job, run_id, token)
    assert tags == [run_tag(run_id), job_tag(job), fence_tag(token)]
    for tag in tags:
        assert tag.isascii() and tag == tag.lower() and len(tag) <= MAX_TAG_LENGTH
        assert "," not in tag and " " not in tag
    assert token not in fence_tag(token)


def _backend(tmp_path: Path, **kwargs: object) -> YarnBackend:
    home = fake_spark_submit(tmp_path / "spark")
    return YarnBackend(
        "http://127.0.0.1:1", tmp_path / "conf", spark_home=home, python="/py", **kwargs
    )  # type: ignore[arg-type]


def _request(**kwargs: object) -> SubmitRequest:
    values: dict[str, object] = {
        "job_name": "orders",
        "run_id": 7,
        "fencing_token": "secret-token",
        "entrypoint": "/p.py",
        "checkpoint_location": "hdfs://nn:8020/drover/a/orders/checkpoint",
        "business": "payments",
    }
    values.update(kwargs)
    return SubmitRequest(**values)  # type: ignore[arg-type]


def test_the_submission_properties(tmp_path: Path) -> None:
    backend = _backend(tmp_path, queue_of={"payments": "pay"}.get)
    props = backend.properties(
        _request(
            conf={
                "spark.yarn.tags": "mine",  # owned: ignored
                "spark.yarn.maxAppAttempts": "5",  # owned: Drover's policy restarts
                "spark.executor.memory": "1g",
            },
            env={"EXTRA": "1"},
        )
    )
    assert props["spark.app.name"] == "drover:orders:7"
    assert props["spark.yarn.tags"].split(",") == yarn_tags("orders", 7, "secret-token")
    assert props["spark.yarn.submit.waitAppCompletion"] == "false"
    assert props["spark.yarn.maxAppAttempts"] == "1"
    assert props["spark.yarn.queue"] == "pay"
    assert props["spark.yarn.jars"] == f"local:{tmp_path / 'spark'}/jars/*"
    assert props["spark.executor.memory"] == "1g"
    assert props["spark.pyspark.python"] == "/py"
    # the driver's environment: the token travels there, never as a plain property
    assert props["spark.yarn.appMasterEnv.DROVER_FENCING_TOKEN"] == "secret-token"
    assert props["spark.yarn.appMasterEnv.EXTRA"] == "1"
    assert not any(v == "secret-token" for k, v in props.items() if "appMasterEnv" not in k)


def test_a_job_may_bring_its_own_jars_and_queue_when_its_business_has_none(
    tmp_path: Path,
) -> None:
    backend = _backend(tmp_path, queue_of={}.get)
    props = backend.properties(
        _request(conf={"spark.yarn.archive": "hdfs:///spark.zip", "spark.yarn.queue": "own"})
    )
    assert "spark.yarn.jars" not in props
    assert props["spark.yarn.queue"] == "own"


def test_the_queue_of_the_business_wins_over_the_jobs(tmp_path: Path) -> None:
    backend = _backend(tmp_path, queue_of={"payments": "pay"}.get)
    assert backend.properties(_request(conf={"spark.yarn.queue": "own"}))["spark.yarn.queue"] == (
        "pay"
    )


@pytest.mark.parametrize(
    ("app", "state"),
    [
        ({"state": "ACCEPTED"}, AppState.STARTING),
        ({"state": "RUNNING", "runningContainers": 1}, AppState.STARTING),
        ({"state": "RUNNING", "runningContainers": 3}, AppState.RUNNING),
        ({"state": "FINISHED", "finalStatus": "SUCCEEDED"}, AppState.FINISHED),
        ({"state": "FINISHED", "finalStatus": "FAILED"}, AppState.FAILED),
        ({"state": "FINISHED", "finalStatus": "KILLED"}, AppState.KILLED),
        ({"state": "FAILED", "finalStatus": "FAILED"}, AppState.FAILED),
        ({"state": "KILLED", "finalStatus": "KILLED"}, AppState.KILLED),
    ],
)
def test_what_an_application_record_means(app: dict[str, object], state: AppState) -> None:
    status = _app_status({"id": "application_1_0001", **app})
    assert status.state is state
    assert status.app_id == "application_1_0001"


def test_an_unknown_application_state_is_never_guessed() -> None:
    with pytest.raises(ClusterUnreachable):
        _app_status({"id": "application_1_0001", "state": "SOMETHING"})


def test_a_failed_application_says_why(tmp_path: Path) -> None:
    rm = SimResourceManager(app_start_delay=0).start()
    try:
        home = fake_spark_submit(tmp_path / "spark")
        conf = rm.write_conf(tmp_path / "conf")
        backend = YarnBackend(rm.url, conf, spark_home=home, work_dir=tmp_path / "w")
        app_id = rm.submit("drover:orders:1", yarn_tags("orders", 1, "t"), "default")
        rm._apps[app_id].logs["stdout"] = "Traceback...\nValueError: bad input\n"
        rm.fail(app_id)
        status = backend.status(app_id)
        assert status.state is AppState.FAILED
        assert "User application exited with status 1" in (status.reason or "")
        assert "ValueError: bad input" in (status.reason or "")
        page = backend.read_driver_log(app_id, "stdout")
        assert page is not None and "ValueError" in page.text
        backend.close()
    finally:
        rm.stop()


@given(st.text())
def test_properties_escape_round_trips_through_the_java_rules(text: str) -> None:
    escaped = _escape(text)
    assert "\n" not in escaped and "\r" not in escaped and escaped.isascii()
    # a Java properties reader's unescaping
    out, i = [], 0
    while i < len(escaped):
        ch = escaped[i]
        if ch == "\\":
            nxt = escaped[i + 1]
            if nxt == "u":
                out.append(chr(int(escaped[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append({"n": "\n", "r": "\r", "t": "\t"}.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    decoded = "".join(out).encode("utf-16", "surrogatepass").decode("utf-16")
    assert decoded == text


def test_a_yarn_cluster_needs_its_resource_manager_and_hadoop_configuration() -> None:
    spec = catalog.ClusterSpec(
        kind="yarn",
        storage_root="hdfs://nn:8020/drover/a",
        rest_url="http://rm:8088/",
        hadoop_conf_dir="/etc/hadoop/a/",
    )
    valid = catalog.validate_cluster(spec)
    assert valid.master_url == "yarn"
    assert valid.rest_url == valid.ui_url == "http://rm:8088"
    assert valid.hadoop_conf_dir == "/etc/hadoop/a"
    for wrong in (
        {"rest_url": ""},
        {"hadoop_conf_dir": ""},
        {"hadoop_conf_dir": "relative/conf"},
        {"master_url": "spark://h:7077"},
    ):
        with pytest.raises(InvalidInput):
            catalog.validate_cluster(catalog.spec_with(spec, wrong))


def test_a_business_quota_may_name_its_yarn_queue() -> None:
    spec = quotas.validate_quota(quotas.QuotaSpec(yarn_queue="root.bu.payments"))
    assert spec.yarn_queue == "root.bu.payments" and spec.rate is None
    for wrong in ("", "a b", "a..b", ".a", "x" * 256):
        with pytest.raises(InvalidInput):
            quotas.validate_quota(quotas.QuotaSpec(yarn_queue=wrong))


def test_a_resource_manager_still_recovering_is_never_taken_at_its_word(tmp_path: Path) -> None:
    """A restarted ResourceManager answers 404 and lists nothing until it has recovered its
    applications (it is not ACTIVE yet): neither NOT_FOUND nor "no application" then."""
    rm = SimResourceManager(app_start_delay=0).start()
    try:
        home = fake_spark_submit(tmp_path / "spark")
        backend = YarnBackend(rm.url, rm.write_conf(tmp_path / "conf"), spark_home=home)
        app_id = rm.submit("drover:orders:1", yarn_tags("orders", 1, "t"), "default")
        rm.recovering()
        with pytest.raises(ClusterUnreachable):
            backend.status(app_id)
        with pytest.raises(ClusterUnreachable):
            backend.find("drover:orders:1")
        with pytest.raises(ClusterUnreachable):
            backend.list_applications()
        rm.recovering(False)
        assert backend.status(app_id).state.is_alive
        found = backend.find("drover:orders:1")
        assert found is not None and found.submission_id == app_id
        assert backend.status("application_1_0404").state is AppState.NOT_FOUND
        backend.close()
    finally:
        rm.stop()
