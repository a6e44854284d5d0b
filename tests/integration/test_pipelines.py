"""The sample pipelines on real Spark (local mode through the local backend), and self-fencing
against a real Drover API (uvicorn in a thread over a SQLite store).

Every local Spark start costs ~5-12 s on a 2-core machine; at most two Spark applications are
alive at once (one pipeline, plus the reader session that checks Parquet contents). The runs_dir
fixture SIGKILLs every process a test's runs started, even when the test fails.
"""

from __future__ import annotations

import json
import re
import socket
import statistics
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyspark
import pytest
import uvicorn

from api.app import create_app
from api.deps import NodeContext
from harness.procs import pids_with_env_prefix, signal_all
from pipelines.drover_runtime import FENCED_LINE_PREFIX, HttpFence, Verdict, progress_report
from scheduler.backends.local import LocalSparkSubmitBackend
from scheduler.backends.standalone import StandaloneRestBackend
from scheduler.config import Settings
from scheduler.core.backend import AppState, SubmitRequest
from scheduler.core.records import JobSpec, RunRecord
from scheduler.core.states import DesiredState, JobState, RunState
from scheduler.store import jobs as jobs_store
from scheduler.store import ledger
from scheduler.store.bootstrap import ensure_defaults
from scheduler.store.db import Store
from tests.conftest import SparkStandalone, wait_until
from tests.support.auth import admin_token
from tests.support.drivers import log_tail
from tests.support.runs import record_run
from tests.support.schema import install_head_schema

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
WINDOWED = REPO / "pipelines" / "windowed_counts.py"
FILE_DROP = REPO / "pipelines" / "file_drop_etl.py"
RUNTIME = REPO / "pipelines" / "drover_runtime.py"
SPARK_HOME = Path(pyspark.__file__).parent
START_TIMEOUT_S = 120.0  # JVM + SparkContext + first batch, with other agents on the 2 cores
BATCH_TIMEOUT_S = 90.0
GONE_TIMEOUT_S = 60.0
NODE = "test-node"
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


# --------------------------------------------------------------------------- helpers


def batch_ids(output: Path) -> list[int]:
    if not output.is_dir():
        return []
    return sorted(int(p.name.split("=", 1)[1]) for p in output.glob("batch_id=*") if p.is_dir())


def committed(checkpoint: Path) -> list[int]:
    commits = checkpoint / "commits"
    if not commits.is_dir():
        return []
    return sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())


def refused_batch(
    log: str, context: str, last_before: int, checkpoint: Path, output: Path
) -> tuple[int, str]:
    """The batch a superseded pipeline refused, from the one fenced-out line of its driver
    ``log`` (``context``: what a failure shows): at most two batches past ``last_before``, the
    last commit seen before the supersession, and nothing of it committed or written. Returns
    the batch and the line."""
    fenced = [line for line in log.splitlines() if line.startswith(FENCED_LINE_PREFIX)]
    assert len(fenced) == 1, context
    match = re.search(r"nothing of batch (\d+) was committed", fenced[0])
    assert match is not None, fenced[0]
    refused = int(match.group(1))
    assert last_before < refused <= last_before + 2, (last_before, refused)
    assert max(committed(checkpoint)) < refused
    assert max(batch_ids(output)) < refused
    return refused, fenced[0]


def wait_with_log(condition: Callable[[], Any], timeout: float, what: str, run_dir: Path) -> Any:
    """wait_until, with the driver log's tail in the failure message."""
    try:
        return wait_until(condition, timeout=timeout, what=what)
    except pytest.fail.Exception as exc:
        pytest.fail(f"{exc}\n{log_tail(run_dir)}", pytrace=False)


# --------------------------------------------------------------------------- fixtures


@pytest.fixture
def runs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("SPARK_LOCAL_HOSTNAME", "127.0.0.1")
    runs = (tmp_path / "runs").resolve()
    yield runs

    def leftovers() -> list[int]:
        return pids_with_env_prefix(f"DROVER_RUN_DIR={runs}/".encode())

    signal_all(leftovers())  # also after failures: nothing may outlive the test
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while leftovers() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not leftovers(), "processes of the test survived SIGKILL"


@pytest.fixture
def backend(runs_dir: Path) -> Iterator[LocalSparkSubmitBackend]:
    made = LocalSparkSubmitBackend(SPARK_HOME, runs_dir, master="local[1]", kill_grace_s=5.0)
    yield made
    made.close()


@dataclass
class DroverApi:
    """A real node API on a free loopback port, over its own SQLite store."""

    url: str
    store: Store
    #: a platform admin's token (people read the fence too; they never see the token)
    token: str = ""

    def create_running_job(self, name: str, checkpoint: str) -> RunRecord:
        """A job whose current run is open (RUNNING), as an owner would have recorded it."""
        spec = JobSpec(name=name, entrypoint=str(WINDOWED), desired_state=DesiredState.RUNNING)
        with self.store.transaction() as session:
            jobs_store.create_job(session, spec, cause="test", node_id=NODE)
            return self._new_current_run(session, name, checkpoint)

    def supersede(self, name: str) -> RunRecord:
        """Another run becomes the job's current run (e.g. after a failover)."""
        with self.store.transaction() as session:
            job = jobs_store.get_job(session, name)
            for state in (JobState.UNKNOWN, JobState.QUEUED):
                version = ledger.transition_job(
                    session, job, state, reason="test: superseded", cause="test", node_id=NODE
                )
                job = replace(job, state=state, version=version)
            old = job.current_run
            assert old is not None
            return self._new_current_run(session, name, old.checkpoint_location)

    def _new_current_run(self, session: Any, name: str, checkpoint: str) -> RunRecord:
        run = record_run(session, name, node_id=NODE, started=True, checkpoint_location=checkpoint)
        return ledger.update_run(session, run, state=RunState.RUNNING)


@pytest.fixture
def drover_api(tmp_path: Path) -> Iterator[DroverApi]:
    settings = Settings(data_dir=tmp_path / "data", node_id=NODE)
    store = Store(f"sqlite:///{tmp_path / 'drover.db'}")
    install_head_schema(store)
    ensure_defaults(store, settings)
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(NodeContext(settings, store)), log_level="warning", lifespan="off"
        )
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, timeout=20, what="the node API to start")
        yield DroverApi(f"http://127.0.0.1:{port}", store, admin_token(store))
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
        store.dispose()
    assert not thread.is_alive(), "uvicorn did not stop"


# --------------------------------------------------------------------------- fence endpoint


def token(run: RunRecord) -> str:
    """The run's fencing token, as its driver would hold it (the store keeps its digest)."""
    assert run.fencing_secret is not None
    return run.fencing_secret


def test_fence_endpoint_and_check_cost(drover_api: DroverApi, tmp_path: Path) -> None:
    """The endpoint's answers, and the cost of one check (median/p99 over 200 calls)."""
    run = drover_api.create_running_job("orders", str(tmp_path / "ckpt"))
    fence = HttpFence(drover_api.url)
    assert fence.ask("orders", token(run))[0] is Verdict.CURRENT
    assert fence.ask("orders", "not-our-token")[0] is Verdict.SUPERSEDED
    assert fence.ask("no-such-job", "x")[0] is Verdict.SUPERSEDED  # 404 naming the job
    # without its token a run proves nothing: 401, which the runtime treats as no answer
    anonymous = urllib.request.Request(f"{drover_api.url}/v1/jobs/orders/fence")
    with pytest.raises(urllib.error.HTTPError) as refused:
        _NO_PROXY.open(anonymous, timeout=5)
    assert refused.value.code == 401

    timings = []
    for _ in range(200):
        started = time.perf_counter()
        verdict, _ = fence.ask("orders", token(run))
        timings.append(time.perf_counter() - started)
        assert verdict is Verdict.CURRENT
    timings.sort()
    median, p99 = statistics.median(timings) * 1000, timings[197] * 1000
    print(
        f"\nfence check over HTTP (loopback, uvicorn, SQLite): median {median:.1f} ms, "
        f"p99 {p99:.1f} ms, max {timings[-1] * 1000:.1f} ms"
    )
    assert median < 50, "a fence check must stay cheap enough to run every batch"
    # every confirming answer granted the run a lease (the node's default, 90 s)
    assert fence.lease_until is not None and 80 < fence.lease_until - time.monotonic() <= 90
    # the same check carrying the run's progress (what drover_runtime sends per batch)
    with_progress = []
    for batch in range(200):
        last = {
            "batchId": batch - 1,
            "numInputRows": 40,
            "inputRowsPerSecond": 20.0,
            "processedRowsPerSecond": 35.5,
            "durationMs": {"triggerExecution": 1130},
            "timestamp": "2026-11-24T21:48:31.643Z",
        }
        report = progress_report(batch, last, 2000)
        started = time.perf_counter()
        verdict, _ = fence.ask("orders", token(run), report)
        with_progress.append(time.perf_counter() - started)
        assert verdict is Verdict.CURRENT
    with_progress.sort()
    print(
        f"the same with a progress report: median {statistics.median(with_progress) * 1000:.1f} "
        f"ms, p99 {with_progress[197] * 1000:.1f} ms"
    )

    second = drover_api.supersede("orders")
    assert fence.ask("orders", token(run))[0] is Verdict.SUPERSEDED
    assert fence.ask("orders", token(second))[0] is Verdict.CURRENT
    # a person (here an admin) sees which run is current, never its token
    assert get_json(f"{drover_api.url}/v1/jobs/orders/fence", drover_api.token) == {
        "job": "orders",
        "current_run_id": second.id,
        "fencing_token": None,
        "current": None,
        "run_state": "RUNNING",
        "desired_state": "RUNNING",
        "stop": None,  # a graceful stop is told only to the run itself
        "lease_seconds": None,  # nor is a lease granted to anyone else
    }
    # the run itself gets its own token echoed: it is current
    mine = get_json(f"{drover_api.url}/v1/jobs/orders/fence", fencing_token=token(second))
    assert (mine["fencing_token"], mine["current"]) == (token(second), True)

    # a closed current run is nobody's fence: even its own token is superseded
    with drover_api.store.transaction() as session:
        ledger.update_run(session, second, state=RunState.KILLED)
    body = get_json(f"{drover_api.url}/v1/jobs/orders/fence", fencing_token=token(second))
    assert (body["fencing_token"], body["current"], body["run_state"]) == (None, False, "KILLED")
    assert fence.ask("orders", token(second))[0] is Verdict.SUPERSEDED


def get_json(url: str, token: str = "", fencing_token: str = "") -> Any:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if fencing_token:
        headers["X-Drover-Fencing-Token"] = fencing_token
    with _NO_PROXY.open(urllib.request.Request(url, headers=headers), timeout=5) as resp:
        assert resp.headers["Cache-Control"] == "no-store"
        return json.load(resp)


# --------------------------------------------------------------------------- self-fencing


def test_superseded_pipeline_exits_by_itself(
    tmp_path: Path, runs_dir: Path, backend: LocalSparkSubmitBackend, drover_api: DroverApi
) -> None:
    """windowed_counts commits batches; its token is superseded in the store; it stops by itself
    within two batches, exit code 0, one fenced-out line, nothing committed after it."""
    output, checkpoint = tmp_path / "out", tmp_path / "ckpt"
    run = drover_api.create_running_job("counts", str(checkpoint))
    request = SubmitRequest(
        job_name="counts",
        run_id=run.id,
        fencing_token=token(run),
        entrypoint=str(WINDOWED),
        args=["--output", str(output), "--trigger-seconds", "2", "--rows-per-second", "20"],
        fence_urls=("http://127.0.0.1:1", drover_api.url),
        checkpoint_location=str(checkpoint),
    )
    submission = backend.submit(request)
    run_dir = runs_dir / "counts" / str(run.id)
    wait_with_log(
        lambda: len(committed(checkpoint)) >= 2, START_TIMEOUT_S, "two committed batches", run_dir
    )

    drover_api.supersede("counts")
    superseded_at = time.monotonic()
    last_before = max(committed(checkpoint))  # batch last+1 may be past its check already

    ended = wait_with_log(
        lambda: (s := backend.status(submission.submission_id)).state.is_terminal and s,
        GONE_TIMEOUT_S,
        "the superseded pipeline to exit by itself",
        run_dir,
    )
    took = time.monotonic() - superseded_at
    assert ended.state is AppState.FINISHED and ended.exit_code == 0, (ended, log_tail(run_dir))

    log = (run_dir / "driver.log").read_text(errors="replace")
    refused, fenced = refused_batch(log, log_tail(run_dir), last_before, checkpoint, output)
    # the first URL is dead: the fence fell through to the node, without stopping the run
    assert "drover-runtime: warning:" not in log
    print(
        f"\nfenced out at batch {refused} (last commit before supersession {last_before}), "
        f"process gone {took:.1f} s after the supersession: {fenced}"
    )


# --------------------------------------------------------------------------- file-drop ETL

FILE_1 = """order_id,customer,country,amount,ordered_at
1,  Ada   Lovelace ,gb,12.50,2024-05-01 10:00:00
2,Bob,us,abc,2024-05-01 10:00:00
3,,fr,1.00,2024-05-01 10:00:00
4,Carol,france,2.00,2024-05-01 10:00:00
1,Ada Lovelace,GB,13.00,2024-05-01 11:00:00
7,Frank,es
"""
FILE_2 = """order_id,customer,country,amount,ordered_at
8,"Grace, H",nl,4.5,2024-05-02T09:30:00
9,Heidi,se,-1,2024-05-01 10:00:00
x10,Ivan,pl,5,2024-05-01 10:00:00
11,Judy,de,7.25,not-a-time
12, Mallory ,Fr,0,2024-05-03 00:00:00
12, Mallory ,Fr,0,2024-05-03 00:00:00
"""
FILE_3 = """order_id,customer,country,amount,ordered_at
13,Niaj,ca,99.99,2024-05-04 12:00:00
14,Olivia,au,1,2024-05-04 12:00:00,extra
"""
EXPECTED = {
    0: {(1, "Ada Lovelace", "GB", Decimal("13.00"), "2024-05-01 11:00:00", "orders-1.csv")},
    1: {
        (8, "Grace, H", "NL", Decimal("4.50"), "2024-05-02 09:30:00", "orders-2.csv"),
        (12, "Mallory", "FR", Decimal("0.00"), "2024-05-03 00:00:00", "orders-2.csv"),
    },
    2: {(13, "Niaj", "CA", Decimal("99.99"), "2024-05-04 12:00:00", "orders-3.csv")},
}


def drop(inbox: Path, name: str, text: str) -> None:
    """Make a file appear in the input directory atomically (hidden name, then rename)."""
    hidden = inbox / f".{name}.tmp"
    hidden.write_text(text)
    hidden.rename(inbox / name)


@pytest.fixture
def reader(runs_dir: Path) -> Iterator[Callable[[Path], dict[int, set[tuple[Any, ...]]]]]:
    """Reads the ETL's Parquet output by batch (a second, small Spark app; started lazily)."""
    sessions: list[Any] = []

    def read(output: Path) -> dict[int, set[tuple[Any, ...]]]:
        from pyspark.sql import SparkSession
        from pyspark.sql import functions as F

        if not sessions:
            sessions.append(
                SparkSession.builder.master("local[1]")
                .appName("test-pipelines-reader")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "1")
                .getOrCreate()
            )
        rows = (
            sessions[0]
            .read.parquet(str(output))
            .select(
                "batch_id",
                "order_id",
                "customer",
                "country",
                "amount",
                F.date_format("ordered_at", "yyyy-MM-dd HH:mm:ss").alias("ordered_at"),
                "source_file",
                "ingested_at",
                "run_id",
            )
            .collect()
        )
        by_batch: dict[int, set[tuple[Any, ...]]] = {}
        for row in rows:
            assert row.ingested_at is not None and row.run_id
            by_batch.setdefault(row.batch_id, set()).add(tuple(row)[1:7])
        return by_batch

    try:
        yield read
    finally:
        for session in sessions:
            stop_spark_and_jvm(session)


def stop_spark_and_jvm(session: Any) -> None:
    """Stop a SparkSession of this process and its gateway JVM (spark.stop() leaves the JVM)."""
    from pyspark import SparkContext

    session.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    gateway.shutdown()
    proc = getattr(gateway, "proc", None)
    if proc is not None:
        proc.kill()
        proc.wait(timeout=30)
    SparkContext._gateway = None
    SparkContext._jvm = None


def test_file_drop_etl_cleans_and_resumes_from_its_checkpoint(
    tmp_path: Path,
    runs_dir: Path,
    backend: LocalSparkSubmitBackend,
    reader: Callable[[Path], dict[int, set[tuple[Any, ...]]]],
) -> None:
    inbox, output, checkpoint = tmp_path / "inbox", tmp_path / "out", tmp_path / "ckpt"
    inbox.mkdir()

    def start(run_id: int) -> tuple[str, Path]:
        request = SubmitRequest(
            job_name="orders",
            run_id=run_id,
            fencing_token=f"tok-{run_id}",
            entrypoint=str(FILE_DROP),
            args=[
                "--input",
                str(inbox),
                "--output",
                str(output),
                "--trigger-seconds",
                "1",
                "--max-files-per-trigger",
                "1",
            ],  # fmt: skip
            checkpoint_location=str(checkpoint),
        )
        return backend.submit(request).submission_id, runs_dir / "orders" / str(run_id)

    first, run_dir = start(1)
    drop(inbox, "orders-1.csv", FILE_1)
    wait_with_log(lambda: committed(checkpoint) == [0], START_TIMEOUT_S, "batch 0", run_dir)
    drop(inbox, "orders-2.csv", FILE_2)
    wait_with_log(lambda: committed(checkpoint) == [0, 1], BATCH_TIMEOUT_S, "batch 1", run_dir)
    assert reader(output) == {0: EXPECTED[0], 1: EXPECTED[1]}
    written = {b: sorted(p.name for p in (output / f"batch_id={b}").iterdir()) for b in (0, 1)}

    backend.kill(first)
    wait_with_log(
        lambda: backend.status(first).state is AppState.KILLED,
        GONE_TIMEOUT_S,
        "the first run to be killed",
        run_dir,
    )
    drop(inbox, "orders-3.csv", FILE_3)  # arrives while nothing runs

    second, run_dir = start(2)
    wait_with_log(lambda: committed(checkpoint) == [0, 1, 2], START_TIMEOUT_S, "batch 2", run_dir)
    # earlier files were not read again: their partitions are untouched, batch ids continue
    assert reader(output) == EXPECTED
    for batch_id, files in written.items():
        assert sorted(p.name for p in (output / f"batch_id={batch_id}").iterdir()) == files
    assert backend.status(second).state is AppState.RUNNING
    log = (run_dir / "driver.log").read_text(errors="replace")
    assert "self-fencing is off" in log  # managed run without fence URLs says so
    backend.kill(second)
    wait_with_log(
        lambda: backend.status(second).state is AppState.KILLED,
        GONE_TIMEOUT_S,
        "the second run to be killed",
        run_dir,
    )


# --------------------------------------------------------------------------- standalone cluster A


def driver_log_tail(cluster: SparkStandalone, driver_id: str, size: int = 256 << 10) -> str:
    """The tails of a driver's stdout and stderr, through its worker's log endpoint.

    PythonRunner merges the Python process's stderr into the driver's stdout."""
    state = cluster.master_state()
    drivers = state.get("activedrivers", []) + state.get("completeddrivers", [])
    worker_id = next(d.get("worker") for d in drivers if d["id"] == driver_id)
    address = next(w["webuiaddress"] for w in state["workers"] if w["id"] == worker_id)
    tails = []
    for kind in ("stdout", "stderr"):
        query = urllib.parse.urlencode({"driverId": driver_id, "logType": kind, "byteLength": size})
        with _NO_PROXY.open(f"{address.rstrip('/')}/log/?{query}", timeout=5) as resp:
            tails.append(resp.read().decode("utf-8", errors="replace"))
    return "\n".join(tails)


@contextmanager
def fenced_run_on(
    cluster: SparkStandalone,
    drover_api: DroverApi,
    run: RunRecord,
    entrypoint: Path,
    args: list[str],
    checkpoint: Path,
    conf: dict[str, str] | None = None,
) -> Iterator[tuple[StandaloneRestBackend, SubmitRequest, str]]:
    """Submit ``run`` of a pipeline to ``cluster`` through the REST backend, fencing against the
    test's Drover API; kill the driver and wait for its end afterwards, whatever happened."""
    backend = StandaloneRestBackend(
        cluster.rest_url, cluster.master_url, cluster.ui_url, python=sys.executable
    )
    request = SubmitRequest(
        job_name=run.job_name,
        run_id=run.id,
        fencing_token=token(run),
        entrypoint=str(entrypoint),
        args=args,
        conf=conf or {},
        checkpoint_location=str(checkpoint),
        py_files=[str(RUNTIME)],
        fence_urls=(drover_api.url,),
    )
    driver_id = backend.submit(request).submission_id
    try:
        yield backend, request, driver_id
    finally:
        backend.kill(driver_id)
        wait_until(
            lambda: backend.status(driver_id).state.is_terminal,
            timeout=GONE_TIMEOUT_S,
            what=f"{driver_id} to end",
        )
        backend.close()


def test_superseded_pipeline_exits_by_itself_on_standalone_cluster(
    tmp_path: Path, spark_standalone: SparkStandalone, drover_api: DroverApi
) -> None:
    """The same on real cluster A through the REST backend: the driver runs on a worker, with
    drover_runtime.py shipped as a py-file; the driver ends FINISHED (exit 0) by itself."""
    output, checkpoint = tmp_path / "out", tmp_path / "ckpt"
    run = drover_api.create_running_job("counts-a", str(checkpoint))
    args = ["--output", str(output), "--trigger-seconds", "2", "--rows-per-second", "20"]
    with fenced_run_on(spark_standalone, drover_api, run, WINDOWED, args, checkpoint) as (
        backend,
        request,
        driver_id,
    ):
        wait_until(
            lambda: len(committed(checkpoint)) >= 2,
            timeout=START_TIMEOUT_S,
            what=f"two committed batches of {driver_id} on cluster A",
        )
        drover_api.supersede("counts-a")
        superseded_at = time.monotonic()
        last_before = max(committed(checkpoint))
        ended = wait_until(
            lambda: (s := backend.status(driver_id)).state.is_terminal and s,
            timeout=GONE_TIMEOUT_S,
            what=f"{driver_id} to exit by itself",
        )
        took = time.monotonic() - superseded_at
        assert ended.state is AppState.FINISHED, (
            ended,
            driver_log_tail(spark_standalone, driver_id),
        )
        log = driver_log_tail(spark_standalone, driver_id)
        refused, _ = refused_batch(log, log[-4000:], last_before, checkpoint, output)
        wait_until(
            lambda: (
                not [
                    a
                    for a in spark_standalone.master_state()["activeapps"]
                    if a["name"] == request.app_name
                ]
            ),
            timeout=GONE_TIMEOUT_S,
            what="the application to leave the master's active list",
        )
        print(
            f"\ncluster A: fenced out at batch {refused} (last commit before {last_before}), "
            f"driver FINISHED {took:.1f} s after the supersession"
        )


def test_idle_file_drop_etl_stops_itself_on_standalone_cluster(
    tmp_path: Path, spark_standalone: SparkStandalone, drover_api: DroverApi
) -> None:
    """file_drop_etl on cluster A cleans a dropped file; superseded while idle (no new files, so
    no batch runs), it stops by itself through the idle check of await_termination."""
    inbox, output, checkpoint = tmp_path / "inbox", tmp_path / "out", tmp_path / "ckpt"
    inbox.mkdir()
    run = drover_api.create_running_job("orders-a", str(checkpoint))
    args = ["--input", str(inbox), "--output", str(output), "--trigger-seconds", "1"]
    conf = {"spark.drover.fenceIdleCheckSeconds": "2"}
    with fenced_run_on(spark_standalone, drover_api, run, FILE_DROP, args, checkpoint, conf) as (
        backend,
        _,
        driver_id,
    ):
        drop(inbox, "orders-1.csv", FILE_1)
        wait_until(
            lambda: committed(checkpoint) == [0] and batch_ids(output) == [0],
            timeout=START_TIMEOUT_S,
            what=f"batch 0 of {driver_id} on cluster A",
        )
        assert list((output / "batch_id=0").glob("*.parquet")), "batch 0 wrote no Parquet"
        drover_api.supersede("orders-a")
        superseded_at = time.monotonic()
        ended = wait_until(
            lambda: (s := backend.status(driver_id)).state.is_terminal and s,
            timeout=GONE_TIMEOUT_S,
            what=f"idle {driver_id} to exit by itself",
        )
        took = time.monotonic() - superseded_at
        log = driver_log_tail(spark_standalone, driver_id)
        assert ended.state is AppState.FINISHED, (ended, log[-4000:])
        fenced = [line for line in log.splitlines() if line.startswith(FENCED_LINE_PREFIX)]
        assert len(fenced) == 1 and "stopped while idle" in fenced[0], log[-4000:]
        assert committed(checkpoint) == [0] and batch_ids(output) == [0]
        print(f"\ncluster A: idle file_drop_etl fenced out {took:.1f} s after the supersession")
