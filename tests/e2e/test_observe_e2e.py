"""Stalls, alerts and structured logs end to end: a node (MariaDB, the shared Spark cluster A),
two real self-fencing pipelines that report their progress, and a webhook receiver started here.

1. A pipeline frozen with SIGSTOP on its driver (the driver JVM and its Python process) is
   reported stalled within its ``stall_after`` (the job's ``progress``, an event, the metric, a
   ``job_stalled`` message to the webhook) and recovers when thawed (``resolved`` message).
   During a cluster outage (the cluster marked abnormal, both drivers frozen) the receiver gets
   the cluster's one alert and its resolve, and no message per job: the jobs' stalls are folded
   into it.
2. The node's log (its stderr) is JSON lines, carrying node, group, job, run and request ids.
"""

from __future__ import annotations

import json
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness import http
from harness.procs import pids_of_run, signal_all
from tests.conftest import SparkStandalone, wait_until
from tests.support.nodes import NodeProcess
from tests.support.world import current_run, node_env, register_standalone

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
WINDOWED = ROOT / "pipelines" / "windowed_counts.py"
ARGS = ["--trigger-seconds", "2", "--rows-per-second", "20", "--shuffle-partitions", "1"]
STALL_AFTER = 12.0
#: the verdict comes within stall_after plus a stall check, a flush and a report's lag
VERDICT_WITHIN = STALL_AFTER + 25.0
START_TIMEOUT = 180.0


class Receiver:
    """A webhook receiver on a loopback port: every POST body, in arrival order."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        lock = self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with lock:
                    outer.messages.append(json.loads(body))
                    outer.headers.append(dict(self.headers))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/hook"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def of(self, kind: str, subject: str | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return [
                m
                for m in self.messages
                if m["kind"] == kind and (subject is None or m["subject"]["name"] == subject)
            ]

    def count(self) -> int:
        with self._lock:
            return len(self.messages)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    try:
        yield r
    finally:
        r.close()


@pytest.fixture
def node(
    tmp_path: Path, fresh_mysql_url: Callable[[], str], spark_standalone: SparkStandalone
) -> Iterator[tuple[NodeProcess, str]]:
    url = fresh_mysql_url()
    env = node_env(
        url,
        tmp_path,
        DROVER_STALL_CHECK_INTERVAL="1",
        DROVER_PROGRESS_FLUSH_INTERVAL="0.5",
        DROVER_ALERT_INTERVAL="0.5",
        DROVER_ALERT_ALLOWED_HOSTS="127.0.0.1",  # the test's receiver, on loopback
        DROVER_METRICS_INTERVAL="1",
        DROVER_METRICS_STORE_TTL="0",
        DROVER_HEALTH_PROBE_INTERVAL="2",
        DROVER_LOG_FORMAT="json",
    )
    proc = NodeProcess("e2e-observe", env, tmp_path / "node.log")
    started = time.monotonic()
    proc.start()
    try:
        proc.wait_ready()
        print(f"\nnode ready in {time.monotonic() - started:.1f} s")
        register_standalone(proc, "obs-a", spark_standalone, tmp_path / "storage-a")
        proc.post("/v1/groups", {"name": "obs", "primary_cluster": "obs-a"})
        yield proc, url
    finally:
        try:
            for job in proc.get("/v1/jobs", limit=100)["data"]:
                if job["desired_state"] == "RUNNING":
                    proc.post(f"/v1/jobs/{job['name']}/stop")
            wait_until(
                lambda: all(
                    j["state"] in ("STOPPED", "FAILED", "FINISHED")
                    for j in proc.get("/v1/jobs", limit=100)["data"]
                ),
                timeout=90,
                what="the jobs to stop",
            )
        finally:
            proc.stop()


def driver_pids(database_url: str, job: str) -> list[int]:
    run = current_run(database_url, job)
    assert run is not None
    return pids_of_run(job, run.id)


def metric(node: NodeProcess, name: str, **labels: str) -> float:
    text = http.get(f"{node.url}/metrics", timeout=5).text
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def progress(node: NodeProcess, job: str) -> dict[str, Any]:
    data: dict[str, Any] = node.get(f"/v1/jobs/{job}")["progress"] or {}
    return data


def test_stall_recovery_folded_cluster_alert_and_json_logs(
    node: tuple[NodeProcess, str], receiver: Receiver, tmp_path: Path
) -> None:
    proc, database_url = node
    prefix = f"obs{secrets.token_hex(3)}"
    first, second = f"{prefix}-a", f"{prefix}-b"
    proc.post(
        "/v1/alert-channels",
        {"name": f"{prefix}-hook", "kind": "webhook", "url": receiver.url, "secret": "s" * 32},
    )
    for name in (first, second):
        proc.post(
            "/v1/jobs",
            {
                "name": name,
                "group": "obs",
                "entrypoint": str(WINDOWED),
                "args": ["--output", str(tmp_path / name), *ARGS],
                "conf": {"spark.cores.max": "1", "spark.executor.cores": "1"},
                "stall_after": STALL_AFTER,
                "desired_state": "RUNNING",
            },
        )
    started = time.monotonic()
    for name in (first, second):
        wait_until(
            lambda n=name: (
                progress(proc, n).get("status") == "progressing"
                and (progress(proc, n).get("batch_id") or 0) >= 1
            ),
            timeout=START_TIMEOUT,
            interval=0.5,
            what=f"{name} to commit batches",
        )
    print(f"both pipelines report progress {time.monotonic() - started:.0f} s after the start")
    shown = progress(proc, first)
    assert shown["rows"] is not None and shown["processing_rate"] is not None, shown
    history = proc.get(f"/v1/jobs/{first}/progress")
    assert history["effective_stall_after"] == STALL_AFTER

    # 2a: frozen -> stalled within stall_after (and its margin), alerted; thawed -> recovered
    pids = driver_pids(database_url, first)
    assert pids, "no driver process found"
    # a slow start may already have stalled (and recovered) before the first batch: count on
    earlier = len(receiver.of("job_stalled", first))
    signal_all(pids, signal.SIGSTOP)
    frozen = time.monotonic()
    try:
        wait_until(
            lambda: progress(proc, first).get("status") == "stalled",
            timeout=VERDICT_WITHIN,
            interval=0.25,
            what=f"{first} to be reported stalled",
        )
        stalled_after = time.monotonic() - frozen
        wait_until(
            lambda: len(receiver.of("job_stalled", first)) > earlier,
            timeout=20,
            what="the stall message",
        )
        assert metric(proc, "drover_jobs_stalled", group="obs") == 1
    finally:
        signal_all(pids, signal.SIGCONT)
    thawed = time.monotonic()
    wait_until(
        lambda: progress(proc, first).get("status") in ("progressing", "idle"),
        timeout=60,
        interval=0.25,
        what=f"{first} to recover",
    )
    recovered_after = time.monotonic() - thawed
    wait_until(
        lambda: len(receiver.of("job_stalled", first)) == earlier + 2,
        timeout=20,
        what="the resolve",
    )
    firing, resolved = receiver.of("job_stalled", first)[earlier:]
    assert (firing["event"], resolved["event"]) == ("firing", "resolved")
    assert firing["alert_id"] == resolved["alert_id"] and firing["team"] is None
    assert receiver.headers[0]["X-Drover-Signature"].startswith("sha256=")
    events = proc.get(f"/v1/jobs/{first}/events", limit=200)["data"]
    causes = [e["cause"] for e in events]
    assert "stall" in causes and "stall:recovered" in causes, causes
    print(
        f"frozen: stalled after {stalled_after:.1f} s (stall_after {STALL_AFTER:g} s); "
        f"thawed: progressing after {recovered_after:.1f} s"
    )

    # 2b: a cluster outage: one folded cluster alert, no message per job
    before = receiver.count()
    proc.post("/v1/clusters/obs-a/mark-abnormal", {"reason": "e2e: simulated outage"})
    wait_until(lambda: receiver.of("cluster_abnormal", "obs-a"), timeout=20,
               what="the cluster alert")  # fmt: skip
    both = driver_pids(database_url, first) + driver_pids(database_url, second)
    signal_all(both, signal.SIGSTOP)
    try:
        for name in (first, second):
            wait_until(
                lambda n=name: progress(proc, n).get("status") == "stalled",
                timeout=VERDICT_WITHIN,
                interval=0.25,
                what=f"{name} stalled during the outage",
            )
        alerts = proc.get("/v1/alerts", status="firing")["data"]
        folded = [a for a in alerts if a["kind"] == "job_stalled"]
        assert len(folded) == 2 and all(a["folded_into"] for a in folded), alerts
    finally:
        signal_all(both, signal.SIGCONT)
    for name in (first, second):
        wait_until(
            lambda n=name: progress(proc, n).get("status") in ("progressing", "idle"),
            timeout=60,
            interval=0.25,
            what=f"{name} to recover after the outage",
        )
    proc.post("/v1/clusters/obs-a/clear", {"reason": "e2e: outage over"})
    wait_until(
        lambda: len(receiver.of("cluster_abnormal", "obs-a")) == 2,
        timeout=20,
        what="the cluster's resolve",
    )
    during = receiver.messages[before:]
    assert [m["kind"] for m in during] == ["cluster_abnormal", "cluster_abnormal"], during
    fired, cleared = during
    assert (fired["event"], cleared["event"]) == ("firing", "resolved")
    assert cleared["folded"]["count"] == 2, cleared
    assert sorted(cleared["folded"]["jobs"]) == [first, second]

    # 3: the node's log is JSON lines carrying the ids
    lines = proc.log_path.read_text().splitlines()
    records = []
    for number, line in enumerate(lines, 1):
        try:
            records.append(json.loads(line))
        except ValueError:
            pytest.fail(f"line {number} of the node's log is not JSON: {line!r}")
    assert all(isinstance(r, dict) and {"ts", "level", "message"} <= r.keys() for r in records)
    assert all(r.get("node") == "e2e-observe" for r in records)
    assert any(r.get("group") == "obs" and r.get("job") == first and r.get("run")
               for r in records)  # fmt: skip
    assert any(r.get("request_id") for r in records), "no record carries a request id"
    assert not any("\x1b[" in line for line in lines), "colour codes in the log"
    assert not any("blocking ray.get" in line for line in lines)
    processes = {r.get("process") for r in records}
    assert {"api", "reconciler"} <= processes, processes
    print(f"node log: {len(records)} JSON records from processes {sorted(map(str, processes))}")
