"""Drover on real Spark standalone clusters end to end: one real Drover node process (standalone
membership, no ZooKeeper) with its metadata in a fresh MariaDB database, driven only through its
REST API, running jobs on the real Spark standalone clusters A and B (``scripts/services.sh``).

Clusters are registered through ``POST /v1/clusters`` (storage roots under ``tmp_path``, as
``file://`` URIs) and bound to groups ``ga`` (primary A) and ``gb`` (primary B). What Drover
reports is checked against the clusters themselves: the master's ``/json/`` for applications, and
``/proc`` for the Python drivers (found by the fencing token or job name in their environment).

A job's lifecycle, its checkpoint and a driver crash are in
:func:`test_lifecycle_checkpoint_and_driver_crash`; adoption after a crash between submitting and
recording in :func:`test_crash_between_submit_and_record_adopts`; the restart policy in
:func:`test_restart_policy`; jobs on both clusters at once in :func:`test_two_clusters_at_once`.
That a superseded pipeline exits by itself within two batches is shown on cluster A by
``tests/integration/test_pipelines.py::test_superseded_pipeline_exits_by_itself_on_standalone_cluster``.

At most two Spark applications of this file are alive at once. Each test's jobs carry a random
prefix; the fixture stops them through the API and, as a last resort, kills their drivers on the
clusters and their Python processes, even when the test failed.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from harness.nodes import free_port as api_port
from harness.procs import fencing_token_of_run, pids_with_env, pids_with_env_prefix, signal_all
from scheduler.backends.standalone import StandaloneRestBackend
from tests.conftest import SparkStandalone, wait_until
from tests.support.nodes import NodeProcess
from tests.support.world import current_run, node_env, register_standalone

pytestmark = [pytest.mark.e2e, pytest.mark.heavy(minutes=5)]

ROOT = Path(__file__).resolve().parents[2]
WINDOWED = ROOT / "pipelines" / "windowed_counts.py"
ALWAYS_FAILS = Path(__file__).resolve().parent / "pipelines" / "always_fails.py"
FAILS_AFTER = Path(__file__).resolve().parent / "pipelines" / "fails_after.py"

# The node's restart policy: small, so that test_restart_policy fits in two minutes. An always
# failing run lives 3-5 s on a quiet machine (driver JVM + Python), up to ~25 s when other agents
# load the 2 cores; its MAX_ATTEMPTS failures must fall within VALIDITY_S.
MAX_ATTEMPTS = 3
VALIDITY_S = 40.0
BACKOFF_INITIAL_S = 0.5
BACKOFF_MAX_S = 2.0
#: the rarely failing job fails this long after its process started: its failures are at least
#: that far apart, more than VALIDITY_S / (MAX_ATTEMPTS - 1), so the budget is never spent
FAIL_AFTER_S = 22.0
assert FAIL_AFTER_S > VALIDITY_S / (MAX_ATTEMPTS - 1)

START_TIMEOUT_S = 180.0  # submit -> app RUNNING, with other agents on the 2 cores
BATCH_TIMEOUT_S = 180.0
GONE_TIMEOUT_S = 60.0
WINDOWED_ARGS = ["--trigger-seconds", "2", "--rows-per-second", "20", "--shuffle-partitions", "1"]


# --------------------------------------------------------------------------- helpers


def live_pids(marker: bytes) -> list[int]:
    """Live processes whose environment holds the entry ``marker`` (or an entry starting with it
    when it ends with ``-``)."""
    return pids_with_env_prefix(marker) if marker.endswith(b"-") else pids_with_env(marker)


def driver_pids(token: str) -> list[int]:
    """The driver JVM and the Python driver of the run with fencing token ``token``."""
    return live_pids(f"DROVER_FENCING_TOKEN={token}".encode())


def active_apps(cluster: SparkStandalone, name: str) -> list[tuple[str, str]]:
    """(app id, state) of the master's active applications called ``name``."""
    return [
        (a["id"], a["state"]) for a in cluster.master_state()["activeapps"] if a["name"] == name
    ]


def batch_ids(output: Path) -> set[int]:
    if not output.is_dir():
        return set()
    return {int(p.name.split("=", 1)[1]) for p in output.glob("batch_id=*") if p.is_dir()}


def written(output: Path) -> dict[int, frozenset[str]]:
    """batch id -> names of its Parquet files (a rewritten batch gets new file names)."""
    return {
        b: frozenset(p.name for p in (output / f"batch_id={b}").iterdir())
        for b in batch_ids(output)
    }


def assert_continued(before: dict[int, frozenset[str]], after: dict[int, frozenset[str]]) -> None:
    """A run resumed from the checkpoint: it wrote batches past the earlier ones and rewrote
    none of them, except possibly the last (written, but killed before its commit: replayed)."""
    last = max(before)
    assert max(after) > last, (sorted(before), sorted(after))
    for batch in before:
        if batch != last:
            assert after[batch] == before[batch], f"batch {batch} was written again"


def ts(value: str) -> datetime:
    return datetime.fromisoformat(value)


def current_token(stack: Stack, name: str) -> str:
    """The fencing token of the job's current run, as its driver holds it (in its environment:
    the store keeps only its digest, the API shows it to nobody but the run itself)."""
    run = current_run(stack.database_url, name)
    assert run is not None, f"job {name} has no current run"
    return wait_until(
        lambda: fencing_token_of_run(name, run.id),
        timeout=GONE_TIMEOUT_S,
        what=f"a process of run {run.id} of {name}",
    )


@dataclass
class Stack:
    """A node, the clusters it knows, and the jobs this test created."""

    node: NodeProcess
    clusters: dict[str, SparkStandalone]
    tmp: Path
    prefix: str
    database_url: str
    jobs: list[str] = field(default_factory=list)

    def create_job(self, suffix: str, group: str, entrypoint: Path, args: list[str]) -> str:
        name = f"{self.prefix}-{suffix}"
        self.node.post(
            "/v1/jobs",
            {
                "name": name,
                "group": group,
                "entrypoint": f"file://{entrypoint}",
                "args": args,
                "team": "e2e",
            },
        )
        self.jobs.append(name)
        return name

    def job(self, name: str) -> dict[str, Any]:
        job: dict[str, Any] = self.node.get(f"/v1/jobs/{name}")
        return job

    def runs(self, name: str) -> list[dict[str, Any]]:
        """The job's runs, oldest first."""
        return list(reversed(self.node.get(f"/v1/jobs/{name}/runs")["data"]))

    def events(self, name: str) -> list[dict[str, Any]]:
        """The job's events, oldest first."""
        return list(reversed(self.node.get(f"/v1/jobs/{name}/events", limit=1000)["data"]))

    def command(self, name: str, command: str) -> float:
        """POST start|stop|restart; returns when it was accepted (monotonic)."""
        self.node.post(f"/v1/jobs/{name}/{command}")
        return time.monotonic()

    def wait_job(
        self,
        name: str,
        condition: Callable[[dict[str, Any]], bool],
        what: str,
        timeout: float = START_TIMEOUT_S,
    ) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            job = self.job(name)
            return job if condition(job) else None

        try:
            return wait_until(reached, timeout=timeout, interval=0.25, what=f"{name}: {what}")
        except pytest.fail.Exception as exc:
            pytest.fail(f"{exc}\njob: {self.job(name)}\nnode log:\n{self.node.log_tail()}")

    def wait_running(self, name: str, attempt: int) -> dict[str, Any]:
        """Wait for the job to be RUNNING on run ``attempt``; nothing may give up meanwhile."""

        def running(job: dict[str, Any]) -> bool:
            assert "gave up" not in job["state_reason"], job
            run = job["current_run"]
            return job["state"] == "RUNNING" and run is not None and run["attempt"] == attempt

        return self.wait_job(name, running, f"RUNNING on attempt {attempt}")

    def wait_gone(self, name: str, app_name: str, cluster: str) -> None:
        """Wait until the master no longer lists the application as active."""
        wait_until(
            lambda: not active_apps(self.clusters[cluster], app_name),
            timeout=GONE_TIMEOUT_S,
            interval=0.1,
            what=f"{app_name} to leave the active applications of {cluster}",
        )


@pytest.fixture
def stack_factory(
    tmp_path: Path,
    fresh_mysql_url: Callable[[], str],
    spark_standalone: SparkStandalone,
    spark_standalone_b: SparkStandalone,
) -> Iterator[Callable[..., Stack]]:
    """Factory: a ready node on a fresh database with clusters spark-a, spark-b and groups ga, gb
    registered through the API. Extra keyword arguments become the node's environment."""
    made: list[Stack] = []
    clusters = {"spark-a": spark_standalone, "spark-b": spark_standalone_b}

    def make(**extra_env: str) -> Stack:
        url = fresh_mysql_url()
        restart_policy = {
            "DROVER_RESTART_MAX_ATTEMPTS": str(MAX_ATTEMPTS),
            "DROVER_RESTART_VALIDITY_INTERVAL": str(VALIDITY_S),
            "DROVER_RESTART_BACKOFF_INITIAL": str(BACKOFF_INITIAL_S),
            "DROVER_RESTART_BACKOFF_MAX": str(BACKOFF_MAX_S),
        }
        # the test's own settings override the restart policy's
        env = node_env(url, tmp_path, **{**restart_policy, **extra_env})
        node = NodeProcess("e2e-standalone", env, tmp_path / "node.log", port=api_port())
        stack = Stack(node, clusters, tmp_path, f"e2e{secrets.token_hex(3)}", url)
        made.append(stack)
        started = time.monotonic()
        node.start()
        node.wait_ready()
        print(f"\nnode ready in {time.monotonic() - started:.1f} s")
        for name, cluster in clusters.items():
            register_standalone(
                node, name, cluster, tmp_path / f"storage-{name}", az=f"az-{name[-1]}"
            )
        node.post("/v1/groups", {"name": "ga", "primary_cluster": "spark-a"})
        node.post("/v1/groups", {"name": "gb", "primary_cluster": "spark-b"})
        return stack

    try:
        yield make
    finally:
        for stack in made:
            _tear_down(stack)


def _tear_down(stack: Stack) -> None:
    """Stop the jobs through the API, stop the node, then kill whatever is left (and fail)."""
    node = stack.node
    if node.alive and stack.jobs:
        try:
            for name in stack.jobs:
                if stack.job(name)["desired_state"] != "STOPPED":
                    stack.command(name, "stop")
            wait_until(
                lambda: all(stack.job(n)["state"] in ("STOPPED", "FAILED") for n in stack.jobs),
                timeout=GONE_TIMEOUT_S,
                what="every job of the test to stop",
            )
        except BaseException as exc:  # noqa: BLE001 - cleanup goes on
            print(f"teardown: stopping through the API failed: {exc}")
    if node.proc is not None:
        node.stop()
    leftovers = []
    prefix = f"drover:{stack.prefix}-"
    for name, cluster in stack.clusters.items():
        backend = StandaloneRestBackend(cluster.rest_url, cluster.master_url, cluster.ui_url)
        try:
            for app in backend.list_applications():
                if app.app_name.startswith(prefix) and app.state.is_alive:
                    leftovers.append(f"{name}: {app.app_name} ({app.submission_id})")
                    backend.kill(app.submission_id)
        finally:
            backend.close()
    marker = f"DROVER_JOB={stack.prefix}-".encode()
    try:
        wait_until(
            lambda: not live_pids(marker),
            timeout=GONE_TIMEOUT_S,
            what="the drivers of the test to exit",
        )
    finally:
        left = live_pids(marker)
        leftovers.extend(f"process {pid}" for pid in left)
        signal_all(left)
    assert not leftovers, f"left behind by the test (killed now): {leftovers}"


# ---------------------------------------------------------- lifecycle, checkpoint, driver crash


def test_lifecycle_checkpoint_and_driver_crash(stack_factory: Callable[..., Stack]) -> None:
    """Start → app RUNNING on cluster A, output; stop → app gone, no Python driver left, run
    KILLED; start → batch ids continue; kill -9 of the driver → Drover's restart policy
    resubmits and batch ids continue again."""
    stack = stack_factory()
    a = stack.clusters["spark-a"]
    output = stack.tmp / "out-counts"
    name = stack.create_job("counts", "ga", WINDOWED, ["--output", str(output), *WINDOWED_ARGS])

    # 1. start: the application runs on cluster A, output appears
    submitted = stack.command(name, "start")
    job = stack.wait_running(name, attempt=1)
    to_running = time.monotonic() - submitted
    run = job["current_run"]
    assert job["cluster"] == "spark-a" and run["cluster"] == "spark-a"
    assert run["submission_id"].startswith("driver-")
    assert run["app_name"] == f"drover:{name}:{run['id']}"
    assert active_apps(a, run["app_name"]) == [(run["app_id"], "RUNNING")]
    assert not active_apps(stack.clusters["spark-b"], run["app_name"])
    root = (stack.tmp / "storage-spark-a").as_uri()
    assert run["checkpoint_location"].startswith(root + "/"), run["checkpoint_location"]
    wait_until(lambda: len(batch_ids(output)) >= 2, timeout=BATCH_TIMEOUT_S, what="2 batches")
    to_output = time.monotonic() - submitted
    token = current_token(stack, name)
    assert token and driver_pids(token), "the driver's processes carry the fencing token"
    # its driver log, from the worker, through the node's API: Spark's stderr, and the
    # pipeline's stdout where drover_runtime says which application it is
    log = stack.node.get(f"/v1/jobs/{name}/runs/1/log")
    assert (log["stream"], log["streams"]) == ("stderr", ["stderr", "stdout"]), log["streams"]
    assert log["size"] > 0 and log["next_offset"] <= log["size"] and not log["run_ended"]
    head = stack.node.get(f"/v1/jobs/{name}/runs/1/log", offset=0, limit=200)
    assert head["offset"] == 0 and head["text"].startswith("Launch Command:"), head["text"]
    printed = stack.node.get(f"/v1/jobs/{name}/runs/1/log", stream="stdout")
    assert f"drover-runtime: started app_id={run['app_id']}" in printed["text"], printed["text"]

    # 1. stop: the application leaves the master, no Python driver is left, the run is KILLED
    stop_at = stack.command(name, "stop")
    stack.wait_gone(name, run["app_name"], "spark-a")
    to_gone = time.monotonic() - stop_at
    stopped = stack.wait_job(name, lambda j: j["state"] == "STOPPED", "STOPPED")
    to_stopped = time.monotonic() - stop_at
    assert stopped["current_run"]["state"] == "KILLED"
    assert stopped["current_run"]["reason"] == "stopped by Drover"
    ended = stack.node.get(f"/v1/jobs/{name}/runs/1/log", stream="stdout")
    assert ended["run_ended"] and ended["size"] >= printed["size"]  # kept by the worker
    wait_until(lambda: not driver_pids(token), timeout=GONE_TIMEOUT_S, what="no driver left")
    to_no_process = time.monotonic() - stop_at
    first = written(output)

    # 3. start again: resumes from the checkpoint, batch ids continue
    stack.command(name, "start")
    job = stack.wait_running(name, attempt=2)
    second_run = job["current_run"]
    assert second_run["checkpoint_location"] == run["checkpoint_location"]
    wait_until(
        lambda: max(batch_ids(output)) > max(first), timeout=BATCH_TIMEOUT_S, what="run 2's batch"
    )
    assert_continued(first, written(output))

    # 3. driver crash: kill -9 the run's driver JVM and Python driver on the worker
    token = current_token(stack, name)
    pids = driver_pids(token)
    assert len(pids) >= 2, f"expected the driver JVM and the Python driver, found {pids}"
    signal_all(pids)  # the JVM's death may take the Python driver with it first
    crashed_at = time.monotonic()
    wait_until(lambda: not driver_pids(token), timeout=GONE_TIMEOUT_S, what="the killed driver")
    second = written(output)  # everything run 2 wrote; anything newer is run 3's
    failed = stack.wait_job(
        name,
        lambda j: j["current_run"]["attempt"] == 3 or j["current_run"]["state"] == "FAILED",
        "the crashed run to be closed",
        timeout=GONE_TIMEOUT_S,
    )
    to_detected = time.monotonic() - crashed_at
    job = stack.wait_running(name, attempt=3)
    to_restarted = time.monotonic() - crashed_at
    third_run = job["current_run"]
    assert third_run["checkpoint_location"] == run["checkpoint_location"]
    crashed = stack.runs(name)[1]
    assert crashed["state"] == "FAILED" and crashed["reason"], crashed
    assert "restart attempt 2" in " ".join(e["message"] for e in stack.events(name)), failed
    wait_until(
        lambda: max(batch_ids(output)) > max(second),
        timeout=BATCH_TIMEOUT_S,
        what="run 3's batch",
    )
    third = written(output)
    assert_continued(second, third)
    assert active_apps(a, third_run["app_name"]) == [(third_run["app_id"], "RUNNING")]
    assert not active_apps(a, second_run["app_name"])

    stack.command(name, "stop")
    stack.wait_gone(name, third_run["app_name"], "spark-a")
    stack.wait_job(name, lambda j: j["state"] == "STOPPED", "STOPPED")
    wait_until(
        lambda: not live_pids(f"DROVER_JOB={name}".encode()),
        timeout=GONE_TIMEOUT_S,
        what="no driver of the job left",
    )
    runs = stack.runs(name)
    assert [(r["attempt"], r["state"]) for r in runs] == [
        (1, "KILLED"),
        (2, "FAILED"),
        (3, "KILLED"),
    ]
    print(
        f"\ncluster A: start→RUNNING {to_running:.1f} s, start→2 batches {to_output:.1f} s; "
        f"stop→app gone from /json/ {to_gone:.1f} s, →STOPPED {to_stopped:.1f} s, "
        f"→no driver process {to_no_process:.1f} s; batches {sorted(first)}, then "
        f"{sorted(set(second) - set(first))} after stop/start, then "
        f"{sorted(set(third) - set(second))} after the driver crash; "
        f"crash→run closed {to_detected:.1f} s, crash→restarted RUNNING {to_restarted:.1f} s "
        f"(crashed run: {crashed['reason']!r})"
    )


# ------------------------------------------------------------ a crash between submit and record


def test_crash_between_submit_and_record_adopts(
    stack_factory: Callable[..., Stack], tmp_path: Path
) -> None:
    """The reconciler dies right after cluster A accepted a submission, before the store records
    it (DROVER_FAULTS); the node is killed too and restarted: it adopts the one application by
    its name instead of submitting a second."""
    once = tmp_path / "after-submit.once"
    stack = stack_factory(DROVER_FAULTS=f"after-submit:{once}")
    a = stack.clusters["spark-a"]
    output = stack.tmp / "out-adopt"
    name = stack.create_job("adopt", "ga", WINDOWED, ["--output", str(output), *WINDOWED_ARGS])

    stack.command(name, "start")
    wait_until(once.exists, timeout=START_TIMEOUT_S, interval=0.02, what="the injected crash")
    stack.node.kill9()  # before Ray restarts the reconciler actor: the node as a whole is gone
    crashed_at = time.monotonic()

    run = current_run(stack.database_url, name)
    assert run is not None
    assert (run.attempt, run.state, run.submission_id) == (1, "SUBMITTING", None), run
    # ... yet cluster A has the application
    app = wait_until(
        lambda: active_apps(a, run.app_name),
        timeout=START_TIMEOUT_S,
        what=f"{run.app_name} to register on cluster A",
    )
    assert len(app) == 1

    restart_at = time.monotonic()
    stack.node.start()
    stack.node.wait_ready()
    ready_at = time.monotonic()
    job = stack.wait_running(name, attempt=1)
    adopted_at = time.monotonic()
    current = job["current_run"]
    assert current["id"] == run.id and current["submission_id"].startswith("driver-")
    assert len(stack.node.get(f"/v1/jobs/{name}/runs")["data"]) == 1
    adoptions = [e for e in stack.events(name) if e["message"].startswith("adopted application")]
    assert len(adoptions) == 1 and current["submission_id"] in adoptions[0]["message"]
    # exactly one application (and one live driver) of the job on the clusters
    assert active_apps(a, run.app_name) == [(current["app_id"], "RUNNING")] == app
    backend = StandaloneRestBackend(a.rest_url, a.master_url, a.ui_url)
    try:
        drivers = [
            x for x in backend.list_applications() if x.app_name.startswith(f"drover:{name}:")
        ]
    finally:
        backend.close()
    assert [(d.submission_id, d.state.value) for d in drivers] == [
        (current["submission_id"], "RUNNING")
    ]
    assert not [
        x for x in stack.clusters["spark-b"].master_state()["activeapps"] if name in x["name"]
    ]
    before = batch_ids(output)
    wait_until(
        lambda: batch_ids(output) - before,
        timeout=BATCH_TIMEOUT_S,
        what="output of the adopted run",
    )
    print(
        f"\ncrash between submit and record: node restarted and ready in "
        f"{ready_at - restart_at:.1f} s, run adopted and RUNNING {adopted_at - restart_at:.1f} s "
        f"after the restart ({adopted_at - crashed_at:.1f} s after the crash); "
        f"one application: {app[0][0]}"
    )


# ------------------------------------------------------------------------------- restart policy


def test_restart_policy(stack_factory: Callable[..., Stack]) -> None:
    """A job that always fails is retried MAX_ATTEMPTS times within the validity interval, then
    FAILED with the reason; a job failing every FAIL_AFTER_S seconds is restarted again and
    again and never given up."""
    stack = stack_factory()
    always = stack.create_job("always-fails", "ga", ALWAYS_FAILS, [])
    rarely = stack.create_job("fails-rarely", "gb", FAILS_AFTER, ["--after", str(FAIL_AFTER_S)])
    started = stack.command(always, "start")
    stack.command(rarely, "start")

    gave_up = stack.wait_job(
        always,
        lambda j: j["state"] == "FAILED" and "gave up" in j["state_reason"],
        "to be given up",
    )
    to_gave_up = time.monotonic() - started
    runs = stack.runs(always)
    assert [r["attempt"] for r in runs] == list(range(1, MAX_ATTEMPTS + 1)), runs
    assert all(r["state"] == "FAILED" for r in runs), runs
    assert gave_up["desired_state"] == "RUNNING"
    reason = gave_up["state_reason"]
    assert reason.startswith(f"gave up after {MAX_ATTEMPTS} failures within {VALIDITY_S:g} s: ")
    assert runs[-1]["reason"] in reason, (reason, runs[-1])
    # the master says only FAILED; exit code and last line come from the driver's logs
    assert reason.endswith(
        "driver exited with code 1; last output: always_fails: failing on purpose"
    )
    span = (ts(runs[-1]["ended_at"]) - ts(runs[0]["ended_at"])).total_seconds()
    assert span < VALIDITY_S
    always_gaps = [
        (ts(b["submitted_at"]) - ts(a["ended_at"])).total_seconds()
        for a, b in zip(runs, runs[1:], strict=False)
    ]

    def restarted_three_times(job: dict[str, Any]) -> bool:
        assert "gave up" not in job["state_reason"], job
        run = job["current_run"]
        return run["attempt"] >= 4 and run["state"] == "RUNNING"

    stack.wait_job(rarely, restarted_three_times, "restarted three times", timeout=300)
    runs_rarely = stack.runs(rarely)
    failed = [r for r in runs_rarely if r["state"] == "FAILED"]
    assert len(failed) >= 3 and all(r["started_at"] for r in runs_rarely), runs_rarely
    assert all(
        r["reason"].endswith("code 1; last output: fails_after: failing on purpose") for r in failed
    ), failed
    ends = [ts(r["ended_at"]) for r in failed]
    spacing = [(b - a).total_seconds() for a, b in zip(ends, ends[1:], strict=False)]
    assert min(spacing) > VALIDITY_S / (MAX_ATTEMPTS - 1), spacing
    assert not [e for e in stack.events(rarely) if e["message"].startswith("gave up")]
    rarely_gaps = [
        (ts(b["started_at"]) - ts(a["ended_at"])).total_seconds()
        for a, b in zip(runs_rarely, runs_rarely[1:], strict=False)
    ]

    # the given-up job stayed given up while the other one kept going
    assert len(stack.runs(always)) == MAX_ATTEMPTS
    assert stack.job(always)["state"] == "FAILED"
    print(
        f"\nalways failing: {MAX_ATTEMPTS} attempts, given up {to_gave_up:.1f} s after the start "
        f"(failures {span:.1f} s apart first to last), failure→resubmitted "
        f"{', '.join(f'{g:.1f}' for g in always_gaps)} s; reason: {reason!r}\n"
        f"failing every {FAIL_AFTER_S:g} s: {len(failed)} failures "
        f"{', '.join(f'{s:.1f}' for s in spacing)} s apart, never given up; failure→RUNNING "
        f"again {', '.join(f'{g:.1f}' for g in rarely_gaps)} s"
    )


# ------------------------------------------------------------------------- two clusters at once


def test_two_clusters_at_once(stack_factory: Callable[..., Stack]) -> None:
    """Jobs of group ga run on cluster A, jobs of group gb on cluster B, at the same time."""
    stack = stack_factory()
    on_a = stack.create_job(
        "on-a", "ga", WINDOWED, ["--output", str(stack.tmp / "out-a"), *WINDOWED_ARGS]
    )
    on_b = stack.create_job(
        "on-b", "gb", WINDOWED, ["--output", str(stack.tmp / "out-b"), *WINDOWED_ARGS]
    )
    started = stack.command(on_a, "start")
    stack.command(on_b, "start")
    job_a = stack.wait_running(on_a, attempt=1)
    job_b = stack.wait_running(on_b, attempt=1)
    both = time.monotonic() - started
    a, b = stack.clusters["spark-a"], stack.clusters["spark-b"]
    run_a, run_b = job_a["current_run"], job_b["current_run"]
    assert (job_a["cluster"], job_b["cluster"]) == ("spark-a", "spark-b")
    assert active_apps(a, run_a["app_name"]) == [(run_a["app_id"], "RUNNING")]
    assert active_apps(b, run_b["app_name"]) == [(run_b["app_id"], "RUNNING")]
    assert not active_apps(a, run_b["app_name"]) and not active_apps(b, run_a["app_name"])
    assert run_a["checkpoint_location"].startswith((stack.tmp / "storage-spark-a").as_uri() + "/")
    assert run_b["checkpoint_location"].startswith((stack.tmp / "storage-spark-b").as_uri() + "/")
    # each streaming query starts in its own checkpoint, under its own cluster's storage root
    # (output and checkpoint resume are shown on cluster A by the lifecycle test)
    metadata = [
        Path(urlsplit(run["checkpoint_location"]).path) / "metadata" for run in (run_a, run_b)
    ]
    wait_until(
        lambda: all(m.is_file() for m in metadata),
        timeout=BATCH_TIMEOUT_S,
        what="both streaming queries to start",
    )
    queries = time.monotonic() - started
    for name, run, cluster in ((on_a, run_a, "spark-a"), (on_b, run_b, "spark-b")):
        stack.command(name, "stop")
        stack.wait_gone(name, run["app_name"], cluster)
    print(
        f"\ntwo clusters: both jobs RUNNING {both:.1f} s after the starts, both queries "
        f"started {queries:.1f} s after"
    )
