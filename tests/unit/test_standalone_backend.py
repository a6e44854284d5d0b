"""StandaloneRestBackend against the simulated standalone cluster (harness/simcluster.py)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from harness.nodes import free_port
from harness.simcluster import SimCluster, control
from scheduler.backends.local import LocalSparkSubmitBackend
from scheduler.backends.registry import BackendRegistry, is_loopback_master
from scheduler.backends.standalone import (
    APP_TAG_PROPERTY,
    PYTHON_RUNNER,
    StandaloneRestBackend,
    app_name_from_launch_command,
    app_tag,
)
from scheduler.config import Settings
from scheduler.core.backend import (
    AppState,
    AppStatus,
    ClusterBackend,
    SubmitRequest,
    fence_tag_of_digest,
)
from scheduler.core.errors import ClusterError, ClusterUnreachable, SubmissionRejected
from scheduler.core.ledger import fencing_digest
from scheduler.core.records import ClusterRecord
from tests.conftest import wait_until

APP_START = 0.3


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    cluster = SimCluster(app_start_delay=APP_START).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def backend(sim: SimCluster) -> Iterator[StandaloneRestBackend]:
    made = make_backend(sim)
    yield made
    made.close()


def make_backend(sim: SimCluster, **kwargs: object) -> StandaloneRestBackend:
    return StandaloneRestBackend(
        sim.rest_url, sim.master_url, sim.ui_url, python="/usr/bin/python3", timeout_s=2.0, **kwargs
    )  # type: ignore[arg-type]


def once_running(backend: StandaloneRestBackend, submission_id: str, what: str) -> AppStatus:
    """The status of ``submission_id`` once it is RUNNING (within 5 s)."""
    return wait_until(
        lambda: (s := backend.status(submission_id)).state is AppState.RUNNING and s,
        timeout=5,
        interval=0.05,
        what=what,
    )


def request(job: str = "job", run_id: int = 1, **kwargs: object) -> SubmitRequest:
    fields: dict[str, object] = {
        "entrypoint": "/pipelines/p.py",
        "checkpoint_location": "/ckpt/job",
    }
    fields.update(kwargs)
    return SubmitRequest(job_name=job, run_id=run_id, fencing_token=f"tok-{run_id}", **fields)  # type: ignore[arg-type]


def test_submission_body() -> None:
    backend = StandaloneRestBackend(
        "http://127.0.0.1:1", "spark://m:7077", "http://127.0.0.1:2", python="/py"
    )
    body = backend.submission_body(
        request(
            args=["--output", "/out"],
            conf={
                "spark.master": "local[*]",
                "spark.driver.supervise": "true",
                "spark.drover.fencingToken": "forged",
                "spark.executor.memory": "1g",
                "x.y": "z",
            },
            env={"A": "1", "DROVER_JOB": "forged"},
            py_files=["/p/drover_runtime.py", "/p/util.py"],
            fence_urls=["http://127.0.0.1:8000", "http://127.0.0.1:8001"],
        )
    )
    assert body["action"] == "CreateSubmissionRequest"
    assert body["mainClass"] == PYTHON_RUNNER
    assert body["appResource"] == "file:/pipelines/p.py"
    assert body["appArgs"] == [
        "/pipelines/p.py",
        "/p/drover_runtime.py,/p/util.py",
        "--output",
        "/out",
    ]
    props = body["sparkProperties"]
    assert props["spark.master"] == "spark://m:7077"
    assert props["spark.app.name"] == "drover:job:1"
    assert props["spark.submit.deployMode"] == "cluster"
    assert props["spark.driver.supervise"] == "false"
    assert props["spark.drover.job"] == "job"
    assert props["spark.drover.runId"] == "1"
    # the token travels in the environment only (properties reach the driver's command line)
    assert "spark.drover.fencingToken" not in props
    assert body["environmentVariables"]["DROVER_FENCING_TOKEN"] == "tok-1"
    assert "tok-1" not in json.dumps(props)
    assert props["spark.drover.checkpointLocation"] == "/ckpt/job"
    assert props["spark.drover.fenceUrls"] == "http://127.0.0.1:8000,http://127.0.0.1:8001"
    assert props["spark.submit.pyFiles"] == "/p/drover_runtime.py,/p/util.py"
    assert props[APP_TAG_PROPERTY] == app_tag("drover:job:1")
    assert props["spark.executor.memory"] == "1g" and props["spark.driver.memory"] == "512m"
    assert props["spark.cores.max"] == "1" and props["x.y"] == "z"
    env = body["environmentVariables"]
    assert env["PYSPARK_PYTHON"] == "/py" and env["A"] == "1"
    assert env["DROVER_JOB"] == "job" and env["DROVER_FENCING_TOKEN"] == "tok-1"
    assert env["DROVER_FENCE_URLS"] == "http://127.0.0.1:8000,http://127.0.0.1:8001"
    no_py = backend.submission_body(request(entrypoint="s3a://b/p.py"))
    assert no_py["appResource"] == "s3a://b/p.py" and no_py["appArgs"][1] == ""
    assert "spark.submit.pyFiles" not in no_py["sparkProperties"]
    assert isinstance(backend, ClusterBackend)
    backend.close()


def test_launch_command_parsing() -> None:
    name = "drover:token-refresher:7"  # Spark redacts values matching "token"
    redacted = '"-Dspark.app.name=*********(redacted)" "-Dspark.master=spark://x"'
    assert app_name_from_launch_command(redacted) is None
    tagged = f'{redacted} "-D{APP_TAG_PROPERTY}={app_tag(name)}"'
    assert app_name_from_launch_command(tagged) == name
    assert app_name_from_launch_command('"-Dspark.app.name=drover:jöb:1" "x"') == "drover:jöb:1"
    assert app_name_from_launch_command("Error: invalid log directory /w/driver-1/") is None


@pytest.mark.serial  # measures time: not beside the e2e tests at nice 19
def test_lifecycle_starting_running_killed(sim: SimCluster, backend: StandaloneRestBackend) -> None:
    sub = backend.submit(request())
    assert sub.submission_id.startswith("driver-")
    first = backend.status(sub.submission_id)
    assert (
        first.state is AppState.STARTING
        and first.reason == "driver launched, app not registered yet"
    )
    running = once_running(backend, sub.submission_id, "the app to run")
    assert running.app_id is not None and running.app_id.startswith("app-")
    assert sim.live_apps("drover:job:1") == [running.app_id]

    backend.kill(sub.submission_id)
    killed = backend.status(sub.submission_id)
    assert killed.state is AppState.KILLED and killed.reason == "killed"
    assert sim.live_apps() == []
    backend.kill(sub.submission_id)  # idempotent
    backend.kill("driver-20260101000000-9999")  # unknown: nothing to do
    assert backend.find("drover:job:1") is None

    # the same app name again (e.g. run 1 of a job in a fresh Drover database): the ended app
    # of the earlier driver must not pass for the new driver's app
    again = backend.submit(request())
    assert backend.status(again.submission_id).state is AppState.STARTING
    fresh = make_backend(sim, listing_ttl_s=0.0)
    assert fresh.status(again.submission_id).state is AppState.STARTING
    fresh.close()


def test_waiting_app_and_queued_driver_are_starting(sim: SimCluster) -> None:
    sim.configure(launch_delay=0.6, executor_delay=0.6)
    backend = make_backend(sim, listing_ttl_s=0.0)
    try:
        sub = backend.submit(request())
        queued = backend.status(sub.submission_id)
        assert (queued.state, queued.reason) == (AppState.STARTING, "driver waiting for a worker")
        # a fresh instance knows nothing about the queued driver: find() refuses to guess
        other = make_backend(sim)
        with pytest.raises(ClusterUnreachable, match="not identified yet"):
            other.find("drover:job:1")
        waiting = wait_until(
            lambda: (s := backend.status(sub.submission_id)).app_id and s,
            timeout=5,
            interval=0.05,
            what="the app to register",
        )
        assert (waiting.state, waiting.reason) == (AppState.STARTING, "app waiting")
        wait_until(
            lambda: backend.status(sub.submission_id).state is AppState.RUNNING,
            timeout=5,
            interval=0.05,
            what="executors",
        )
        found = other.find("drover:job:1")
        assert found is not None and found.submission_id == sub.submission_id
        other.close()
    finally:
        backend.close()


def test_adopt_after_crash_between_submit_and_record(sim: SimCluster) -> None:
    """A new backend instance (a restarted node) finds the driver by app name alone."""
    first = make_backend(sim)
    sub = first.submit(request("etl", 42))
    first.submit(request("other", 43))
    first.close()  # "crash": the driver id was never recorded

    fresh = make_backend(sim)
    try:
        found = fresh.find("drover:etl:42")
        assert found is not None and found.submission_id == sub.submission_id
        assert fresh.find("drover:nope:1") is None
        assert fresh.log_reads == 2  # each live driver's launch command read once...
        assert fresh.find("drover:nope:2") is None
        assert fresh.log_reads == 2  # ...and cached
        state = once_running(fresh, sub.submission_id, "the adopted app to run")
        found = fresh.find("drover:etl:42")
        assert found is not None and found.app_id == state.app_id
        apps = {a.app_name: a for a in fresh.list_applications()}
        assert set(apps) == {"drover:etl:42", "drover:other:43"}
        assert apps["drover:etl:42"].submission_id == sub.submission_id
        assert apps["drover:etl:42"].state is AppState.RUNNING
    finally:
        fresh.close()


@pytest.mark.serial  # measures time: not beside the e2e tests at nice 19
def test_rejected_and_unreachable(sim: SimCluster, backend: StandaloneRestBackend) -> None:
    sim.fail_next_creates(1)
    with pytest.raises(SubmissionRejected, match="injected failure"):
        backend.submit(request(run_id=1))
    sim.fail_next_creates(1, http_status=500)
    with pytest.raises(ClusterUnreachable, match="500"):
        backend.submit(request(run_id=2))
    sub = backend.submit(request(run_id=3))

    for mode in ("close", "503"):
        sim.unreachable_for(30, mode=mode)
        time.sleep(backend.listing_ttl_s)  # let the cached listing expire
        with pytest.raises(ClusterUnreachable) as info:
            backend.status(sub.submission_id)
        assert isinstance(info.value, ClusterError)
        if mode == "close":
            assert isinstance(info.value.__cause__, httpx.HTTPError)
        for call in (
            lambda: backend.submit(request(run_id=4)),
            lambda: backend.kill(sub.submission_id),
            lambda: backend.find("drover:job:3"),
            backend.list_applications,
        ):
            with pytest.raises(ClusterUnreachable):
                call()
        probe = backend.probe()
        assert not probe.ok and probe.latency_s < 2.5
        sim.reachable()
    assert backend.probe().ok
    assert backend.status(sub.submission_id).state.is_alive

    nowhere = f"http://127.0.0.1:{free_port()}"
    dead = StandaloneRestBackend(nowhere, "spark://127.0.0.1:1", nowhere, timeout_s=1.0)
    with pytest.raises(ClusterUnreachable) as info:
        dead.status("driver-1")
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    assert not dead.probe().ok
    dead.close()


def test_lost_master_state_and_failures(sim: SimCluster, backend: StandaloneRestBackend) -> None:
    doomed = backend.submit(request("doomed", 1))
    sim.fail_after("drover:doomed:1", 0.5)
    failed = wait_until(
        lambda: (s := backend.status(doomed.submission_id)).state.is_terminal and s,
        timeout=5,
        interval=0.05,
        what="the driver to fail",
    )
    assert failed.state is AppState.FAILED and failed.reason
    assert "error" in failed.reason

    sub = backend.submit(request("kept", 2))
    sim.lose_state()
    time.sleep(backend.listing_ttl_s)
    lost = backend.status(sub.submission_id)
    assert lost.state is AppState.NOT_FOUND and "does not know" in (lost.reason or "")
    assert backend.find("drover:kept:2") is None
    backend.kill(sub.submission_id)  # nothing to kill: still no error


def test_failed_driver_reason_has_exit_code_and_last_output_line() -> None:
    """The master tells neither why a driver FAILED nor its exit code: both come from the end of
    the driver's logs on its worker (here in Spark 4.3's format)."""
    driver = "driver-20260101000000-0001"
    worker = {"id": "worker-1", "webuiaddress": "http://127.0.0.1:8081", "state": "ALIVE"}
    listing = {
        "status": "ALIVE",
        "workers": [worker],
        "activeapps": [],
        "completedapps": [],
        "activedrivers": [],
        "completeddrivers": [
            {
                "id": driver,
                "state": "FAILED",
                "worker": "worker-1",
                "mainclass": PYTHON_RUNNER,
                "starttime": "1",
            }
        ],
    }
    logs = {
        "stderr": "==== Bytes 0-99 of 99 of /work/stderr ====\n"
        "Exception in thread main: org.apache.spark.SparkUserAppException: "
        "User application exited with 3\n\tat org.apache.spark.deploy.PythonRunner$.main\n",
        "stdout": "==== Bytes 0-60 of 60 of /work/stdout ====\nTraceback ...\n"
        "ValueError: no such table: orders\n\n",
    }

    def answer(req: httpx.Request) -> httpx.Response:
        if req.url.path == "/json/":
            return httpx.Response(200, json=listing)
        if req.url.path.startswith("/v1/submissions/status/"):
            return httpx.Response(
                200, json={"success": True, "driverState": "FAILED", "workerId": "worker-1"}
            )
        if req.url.path == "/log/":
            assert "offset" not in req.url.params  # no offset: the end of the log
            return httpx.Response(200, text=logs[req.url.params["logType"]])
        return httpx.Response(404)

    backend = StandaloneRestBackend(
        "http://127.0.0.1:6066",
        "spark://127.0.0.1:7077",
        "http://127.0.0.1:8080",
        transport=httpx.MockTransport(answer),
    )
    status = backend.status(driver, "drover:orders:1")
    assert status.state is AppState.FAILED and status.exit_code == 3
    assert status.reason == (
        "driver exited with code 3; last output: ValueError: no such table: orders"
    )
    logs["stderr"] = logs["stdout"] = ""  # nothing readable: the generic reason
    assert backend.status(driver).reason == "driver exited with an error"
    backend.close()


@pytest.mark.serial  # measures time: not beside the e2e tests at nice 19
def test_slow_kill(sim: SimCluster, backend: StandaloneRestBackend) -> None:
    sim.configure(kill_delay=1.0)
    sub = backend.submit(request())
    wait_until(
        lambda: backend.status(sub.submission_id).state is AppState.RUNNING,
        timeout=5,
        interval=0.05,
        what="the app to run",
    )
    asked = time.monotonic()
    backend.kill(sub.submission_id)
    assert backend.status(sub.submission_id).state is AppState.RUNNING  # not confirmed yet
    backend.kill(sub.submission_id)  # a repeated kill does not restart the clock
    wait_until(
        lambda: backend.status(sub.submission_id).state is AppState.KILLED,
        timeout=5,
        interval=0.05,
        what="the slow kill",
    )
    assert time.monotonic() - asked >= 0.9
    assert sim.live_apps() == []


def test_one_listing_per_tick(sim: SimCluster) -> None:
    backend = make_backend(sim, listing_ttl_s=30.0)
    try:
        subs = [backend.submit(request(f"j{i}", i)) for i in range(200)]
        time.sleep(APP_START + 0.1)
        before = sim.requests
        states = [backend.status(s.submission_id).state for s in subs]
        assert states == [AppState.RUNNING] * 200
        assert backend.listing_fetches == 1
        # one /json/ (names were cached at submit) and, once per driver, the read of its log
        # that links it to its application
        assert sim.requests - before == 1 + 200 and backend.log_reads == 200
        before = sim.requests
        assert [backend.status(s.submission_id).state for s in subs] == states
        assert sim.requests == before  # linked: the next tick reads no log (listing cached)
    finally:
        backend.close()


def test_slow_listing_is_reused_for_a_multiple_of_its_fetch_time(sim: SimCluster) -> None:
    """A listing slower than the TTL is not stale on arrival: work between status() calls
    (store writes) does not refetch it once per job."""
    backend = make_backend(sim, listing_ttl_s=0.05)
    try:
        subs = [backend.submit(request(f"j{i}", i)) for i in range(3)]
        sim.configure(latency=0.2)
        for sub in subs:
            backend.status(sub.submission_id)
            time.sleep(0.1)
        assert backend.listing_fetches == 1
    finally:
        backend.close()


def test_takeover_status_with_recorded_names_reads_no_launch_command(sim: SimCluster) -> None:
    """A node taking over jobs passes each run's recorded tag and app id: one listing, no log
    reads."""
    first = make_backend(sim)
    subs = [first.submit(request(f"j{i}", i)) for i in range(50)]
    time.sleep(APP_START + 0.1)
    linked = [first.status(s.submission_id) for s in subs]  # what the old owner recorded
    first.close()
    fresh = make_backend(sim, listing_ttl_s=30.0)
    try:
        before = sim.requests
        states = [
            fresh.status(s.submission_id, f"drover:j{i}:{i}", linked[i].app_id)
            for i, s in enumerate(subs)
        ]
        assert [s.state for s in states] == [AppState.RUNNING] * 50
        assert [s.app_id for s in states] == [s.app_id for s in linked]
        assert all(s.app_id for s in states)
        assert fresh.log_reads == 0
        assert sim.requests - before == 1  # the listing only
        # with the tag alone a fresh backend reads the driver's log once (the link)...
        other = make_backend(sim)
        try:
            status = other.status(subs[0].submission_id, "drover:j0:0")
            assert (status.state, status.app_id) == (AppState.RUNNING, linked[0].app_id)
            assert other.log_reads == 1
            # ...and without it as well: one read gives the launch command and the app id
            assert other.status(subs[1].submission_id).app_id == linked[1].app_id
            assert other.log_reads == 2
        finally:
            other.close()
    finally:
        fresh.close()


def test_http_control_endpoint(sim: SimCluster, backend: StandaloneRestBackend) -> None:
    sub = backend.submit(request())
    answer = control(sim.url, "unreachable_for", seconds=30, mode="503")
    assert answer["ok"] and answer["stats"]["drivers"] == 1
    assert answer["stats"]["creates"] == 1 and answer["stats"]["kills"] == 0
    time.sleep(backend.listing_ttl_s)
    with pytest.raises(ClusterUnreachable, match="503"):
        backend.status(sub.submission_id)
    control(sim.url, "reachable")
    control(sim.url, "lose_state")
    assert backend.status(sub.submission_id).state is AppState.NOT_FOUND
    with pytest.raises(httpx.HTTPStatusError):
        control(sim.url, "no_such_op")
    assert httpx.get(f"{sim.url}/sim/stats", trust_env=False).json()["drivers"] == 0


def test_registry_builds_backends(tmp_path: Path, sim: SimCluster) -> None:
    settings = Settings(data_dir=tmp_path, node_id="n1")

    def record(kind: str, master: str, rest: str = "", ui: str = "") -> ClusterRecord:
        return ClusterRecord(kind, kind, master, rest, ui, "az-1", "local", "", "NORMAL", 4)

    registry = BackendRegistry(settings)
    try:
        sa = registry.for_cluster(record("standalone", sim.master_url, sim.rest_url, sim.ui_url))
        assert isinstance(sa, StandaloneRestBackend) and sa.probe().ok
        remote = registry.for_cluster(record("spark-submit", "yarn"))
        assert isinstance(remote, LocalSparkSubmitBackend)
        assert remote.master == "yarn" and not remote.loopback_driver
        assert remote.runs_dir == (tmp_path / "cluster-runs" / "spark-submit").resolve()
        with pytest.raises(ClusterError, match="needs master_url, rest_url and ui_url"):
            registry.for_cluster(record("standalone", "spark://x:1"))
    finally:
        registry.close()
    assert is_loopback_master("spark://127.0.0.1:7077") and is_loopback_master("local[2]")
    assert not is_loopback_master("k8s://https://10.0.0.1:6443")


# --------------------------------------------------------------------------- the link


def test_a_pipeline_that_names_itself_is_linked_by_its_own_log(sim: SimCluster) -> None:
    """``builder.appName("rate-counter")``: the app registers under that name, the driver's log
    still says which app is its own; status, find and list_applications all use that link."""
    sim.configure(pipeline_app_name="rate-counter")
    backend = make_backend(sim, listing_ttl_s=0.0)
    try:
        sub = backend.submit(request("counter", 5))
        status = once_running(backend, sub.submission_id, "the renamed app to run")
        assert sim.live_apps("rate-counter") == [status.app_id]
        assert sim.live_apps("drover:counter:5") == []  # nothing carries Drover's name
        found = backend.find("drover:counter:5")
        assert found is not None and (found.submission_id, found.app_id) == (
            sub.submission_id,
            status.app_id,
        )
        [app] = backend.list_applications()
        assert (app.app_name, app.app_id, app.state) == (
            "drover:counter:5",
            status.app_id,
            AppState.RUNNING,
        )
        backend.kill(sub.submission_id)
        assert backend.status(sub.submission_id).state is AppState.KILLED
    finally:
        backend.close()


def test_the_log_link_wins_over_an_app_that_only_carries_the_same_name(sim: SimCluster) -> None:
    """Two drivers with one tag (e.g. run 1 of a job in two Drover databases on one cluster) whose
    apps register after both drivers started: the name cannot tell them apart, the logs can."""
    sim.configure(app_start_delay=0.3)
    backend = make_backend(sim, listing_ttl_s=0.0)
    try:
        first = backend.submit(request("twin", 1))
        second = backend.submit(request("twin", 1))
        a, b = (
            wait_until(
                lambda sub=sub: (s := backend.status(sub.submission_id)).app_id and s,
                timeout=5,
                interval=0.02,
                what="the link",
            )
            for sub in (first, second)
        )
        assert a.app_id != b.app_id
        assert sorted(sim.live_apps(tag="drover:twin:1")) == sorted([a.app_id, b.app_id])
        # each driver's own app, as the simulated master knows it
        assert [sim.driver_app(x.submission_id) for x in (first, second)] == [a.app_id, b.app_id]
    finally:
        backend.close()


def test_without_the_log_line_only_the_name_hint_links_and_nothing_is_guessed(
    sim: SimCluster,
) -> None:
    """A cluster whose log4j config hides INFO: a pipeline that kept Drover's name is linked by
    the name hint; one that renamed itself (and has no drover_runtime line) stays unlinked --
    STARTING with the reason, never a wrong app -- and its log reads back off."""
    sim.configure(log_app_id=False)
    backend = make_backend(sim, listing_ttl_s=0.0)
    try:
        named = backend.submit(request("named", 1))
        hinted = once_running(backend, named.submission_id, "the name hint")
        assert sim.live_apps("drover:named:1") == [hinted.app_id]

        sim.configure(pipeline_app_name="rate-counter")
        renamed = backend.submit(request("renamed", 2))
        wait_until(
            lambda: sim.live_apps("rate-counter"), timeout=5, interval=0.02, what="registration"
        )
        reads = backend.log_reads
        for _ in range(20):
            status = backend.status(renamed.submission_id)
            assert status.state is AppState.STARTING and status.app_id is None
            assert status.reason is not None and "not linked" in status.reason
        assert backend.log_reads - reads <= 4  # backing off, not a read per call
        found = backend.find("drover:renamed:2")
        assert found is not None and (found.submission_id, found.app_id) == (
            renamed.submission_id,
            None,
        )
    finally:
        backend.close()


def test_a_kill_is_confirmed_only_once_the_app_has_left(sim: SimCluster) -> None:
    sim.configure(app_linger=0.5, pipeline_app_name="rate-counter")
    backend = make_backend(sim, listing_ttl_s=0.0)
    try:
        sub = backend.submit(request())
        running = once_running(backend, sub.submission_id, "the app to run")
        backend.kill(sub.submission_id)
        lingering = backend.status(sub.submission_id)
        assert lingering.state.is_alive and lingering.app_id == running.app_id
        assert lingering.reason == f"driver killed, app {running.app_id} still registered"
        with pytest.raises(ClusterUnreachable, match="still registered"):
            backend.find("drover:job:1")  # cannot say "none" while its app is still there
        killed = wait_until(
            lambda: (s := backend.status(sub.submission_id)).state.is_terminal and s,
            timeout=5,
            interval=0.05,
            what="the app to leave",
        )
        assert (killed.state, killed.app_id) == (AppState.KILLED, running.app_id)
        assert sim.live_apps() == []
        assert backend.find("drover:job:1") is None
    finally:
        backend.close()


def test_the_change_feed_links_many_starting_drivers_in_one_parallel_pass(sim: SimCluster) -> None:
    """Thousands of jobs starting at once: ``changes()`` reads the logs of the watched, unlinked
    drivers whose apps registered in parallel, so the statuses that follow read no log."""
    backend = make_backend(sim, listing_ttl_s=0.0)
    try:
        subs = [backend.submit(request("job", i)).submission_id for i in range(1, 13)]
        for sid in subs:
            assert backend.status(sid).state is AppState.STARTING  # watched, not linked yet
        wait_until(  # asks the simulator, not the backend: its listing grows older meanwhile
            lambda: len(sim.live_apps()) == len(subs),
            timeout=10,
            interval=0.02,
            what="every app to register",
        )
        reads = backend.log_reads
        backend.changes(None)  # a fresh listing: every registered app is a candidate
        assert backend.log_reads - reads == len(subs)
        reads = backend.log_reads
        statuses = [backend.status(sid) for sid in subs]
        assert [s.state for s in statuses] == [AppState.RUNNING] * len(subs)
        assert {s.app_id for s in statuses} == {sim.driver_app(sid) for sid in subs}
        assert backend.log_reads == reads  # every link was made by the parallel pass
    finally:
        backend.close()


def test_a_mass_kill_then_statuses_fetch_the_listing_once(sim: SimCluster) -> None:
    """submit() and kill() mark their driver instead of dropping the cached listing: the statuses
    after 100 kills share one listing fetched after them (a failover asks each killed driver's
    status), and a status after a kill never answers from a listing older than the kill."""
    backend = make_backend(sim, listing_ttl_s=30.0)
    try:
        subs = [backend.submit(request(f"k{i}", i)) for i in range(100)]
        time.sleep(APP_START + 0.1)
        assert {backend.status(s.submission_id).state for s in subs} == {AppState.RUNNING}
        fetched = backend.listing_fetches
        for sub in subs:
            backend.kill(sub.submission_id)
        states = {backend.status(s.submission_id).state for s in subs}
        assert states == {AppState.KILLED}  # the kill is seen: no stale RUNNING
        assert backend.listing_fetches == fetched + 1
        other = backend.submit(request("later", 1000))
        assert backend.status(other.submission_id).state is AppState.STARTING
        assert backend.listing_fetches == fetched + 2  # fetched after that submit
        assert backend.status(subs[0].submission_id).state is AppState.KILLED
        assert backend.listing_fetches == fetched + 2
    finally:
        backend.close()


@pytest.mark.serial  # measures time: not beside the e2e tests at nice 19
def test_a_slow_failed_listing_fails_fast_for_a_while(sim: SimCluster) -> None:
    """1,000 statuses on a master that times out cost one timeout, not one each; a successful
    probe forgets the failure at once."""
    backend = make_backend(sim, listing_ttl_s=0.05)
    try:
        subs = [backend.submit(request(f"s{i}", i)) for i in range(20)]
        time.sleep(APP_START + 0.1)
        sim.configure(latency=0.6)
        backend._http.timeout = httpx.Timeout(0.5)  # the fetch times out after 0.5 s
        started = time.monotonic()
        for sub in subs:
            with pytest.raises(ClusterUnreachable):
                backend.status(sub.submission_id)
        assert time.monotonic() - started < 1.5  # one timeout, then the remembered failure
        sim.configure(latency=0.0)
        backend._http.timeout = httpx.Timeout(2.0)
        assert backend.probe().ok
        assert backend.status(subs[0].submission_id).state is AppState.RUNNING
    finally:
        backend.close()


def test_list_tagged_names_the_live_drivers_of_each_run_tag(sim: SimCluster) -> None:
    """The stray sweep's listing: every live driver with the run tag of its launch command (two
    of one run when a timed-out submission reached the master late), no ended driver, and no
    fence tag of its launch command as its only tag."""
    first = make_backend(sim)
    late = first.submit(request("etl", 42))
    recorded = first.submit(request("etl", 42))
    ended = first.submit(request("other", 43))
    first.kill(ended.submission_id)
    first.close()
    fresh = make_backend(sim)
    try:
        listed = wait_until(
            lambda: len(found := fresh.list_tagged()) == 2 and found,
            timeout=5,
            interval=0.05,
            what="the two live drivers to be listed",
        )
        tag = fence_tag_of_digest(fencing_digest("tok-42"))  # request() gives each run its token
        assert sorted((info.submission_id, info.app_name, tags) for info, tags in listed) == sorted(
            [
                (late.submission_id, "drover:etl:42", frozenset({tag})),
                (recorded.submission_id, "drover:etl:42", frozenset({tag})),
            ]
        )
        assert all(info.state.is_alive for info, _ in listed)
    finally:
        fresh.close()
