"""Latency from "submit" to "application registered" on a real Spark standalone cluster.

Two paths, N rounds each (interleaved), one application alive at a time:

- ``rest``: :class:`~scheduler.backends.standalone.StandaloneRestBackend` (cluster deploy mode,
  the driver starts on a worker; no JVM on this host);
- ``spark-submit``: ``$SPARK_HOME/bin/spark-submit --master spark://...`` in client mode (the
  driver JVM starts on this host).

The clock starts right before the submit call / process start and stops when the app's name is
in the master's ``/json/`` ``activeapps`` (polled every 50 ms). Each app is then killed (REST
kill / SIGKILL of the spark-submit session) and the next round waits until it left ``/json/``.

    set -a; . var/services/env; set +a
    .venv/bin/python -m bench.submit [--rounds 3] [--master ... --rest ... --ui ...]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scheduler.backends.standalone import StandaloneRestBackend
from scheduler.core.backend import SubmitRequest

PIPELINE = """\
import time
from pyspark.sql import SparkSession
jsc = SparkSession.builder.getOrCreate().sparkContext._jsc
while not jsc.sc().isStopped():  # a Py4J error once the killed driver JVM is gone ends us
    time.sleep(1)
"""
POLL_S = 0.05
_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def active_app_names(ui_url: str) -> set[str]:
    with _NO_PROXY.open(f"{ui_url}/json/", timeout=3) as resp:
        state: dict[str, Any] = json.load(resp)
    return {app["name"] for app in state.get("activeapps", [])}


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(POLL_S)


def spark_home() -> Path:
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def run_rest(
    backend: StandaloneRestBackend, ui: str, entry: Path, name: str, timeout: float
) -> tuple[float, float]:
    """(seconds until the create call answered, seconds until the app registered)."""
    run_id = int(name.rsplit("-", 1)[1])
    request = SubmitRequest(
        job_name=name.rsplit("-", 1)[0], run_id=run_id, fencing_token="bench", entrypoint=str(entry)
    )
    started = time.monotonic()
    sub = backend.submit(request)
    answered = time.monotonic() - started
    try:
        wait_for(lambda: request.app_name in active_app_names(ui), timeout, request.app_name)
        return answered, time.monotonic() - started
    finally:
        backend.kill(sub.submission_id)
        wait_for(lambda: request.app_name not in active_app_names(ui), timeout, "the kill")


def run_client(
    master: str, ui: str, entry: Path, name: str, workdir: Path, timeout: float
) -> float:
    app_name = f"drover:{name}"
    command = [
        str(spark_home() / "bin" / "spark-submit"),
        "--master",
        master,
        "--name",
        app_name,
        "--conf",
        "spark.driver.host=127.0.0.1",
        "--conf",
        "spark.driver.bindAddress=127.0.0.1",
        "--conf",
        "spark.driver.memory=512m",
        "--conf",
        "spark.executor.memory=512m",
        "--conf",
        "spark.cores.max=1",
        str(entry),
    ]
    env = {
        **os.environ,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
    }
    log = open(workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed in finally
    started = time.monotonic()
    proc = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    try:
        wait_for(lambda: app_name in active_app_names(ui), timeout, app_name)
        return time.monotonic() - started
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)
        log.close()
        wait_for(lambda: app_name not in active_app_names(ui), timeout, "the client app to go")


def measure(
    rounds: int, master: str, rest: str, ui: str, timeout: float = 120.0, echo: bool = True
) -> dict[str, Any]:
    """Both paths, ``rounds`` rounds interleaved; figures in seconds, ratio of the medians."""
    ui = ui.rstrip("/")
    backend = StandaloneRestBackend(rest, master, ui, python=sys.executable)
    results: dict[str, list[float]] = {"rest (cluster mode)": [], "spark-submit (client)": []}
    create_answers: list[float] = []
    with tempfile.TemporaryDirectory(prefix="drover-bench-submit-") as tmp:
        workdir = Path(tmp)
        entry = workdir / "sleeper.py"
        entry.write_text(PIPELINE)
        stamp = int(time.time())
        try:
            for i in range(1, rounds + 1):
                answered, rest_s = run_rest(backend, ui, entry, f"bench-rest-{stamp}-{i}", timeout)
                results["rest (cluster mode)"].append(rest_s)
                create_answers.append(answered)
                client = run_client(
                    master, ui, entry, f"bench-client-{stamp}-{i}", workdir, timeout
                )
                results["spark-submit (client)"].append(client)
                if echo:
                    print(
                        f"round {i}: rest {rest_s:.2f} s, spark-submit {client:.2f} s", flush=True
                    )
        finally:
            backend.close()
    if echo:
        print(f"\nsubmit -> app registered in {ui}/json/ ({master}), {rounds} rounds")
        print(f"{'path':<24}{'median s':>10}{'min s':>10}{'max s':>10}")
        for path, values in results.items():
            print(
                f"{path:<24}{statistics.median(values):>10.2f}{min(values):>10.2f}"
                f"{max(values):>10.2f}"
            )
    rest_median = statistics.median(results["rest (cluster mode)"])
    client_median = statistics.median(results["spark-submit (client)"])
    return {
        "rounds": rounds,
        "rest_median_s": rest_median,
        "cli_median_s": client_median,
        "ratio_rest_vs_cli": rest_median / client_median,
        "rest_create_answer_ms": statistics.median(create_answers) * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--master", default=os.environ.get("DROVER_TEST_SPARK_A_MASTER", ""))
    parser.add_argument("--rest", default=os.environ.get("DROVER_TEST_SPARK_A_REST", ""))
    parser.add_argument("--ui", default=os.environ.get("DROVER_TEST_SPARK_A_UI", ""))
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    if not (args.master and args.rest and args.ui):
        parser.error("need --master, --rest and --ui (or `set -a; . var/services/env; set +a`)")
    figures = measure(args.rounds, args.master, args.rest, args.ui, args.timeout)
    print(f"ratio rest / spark-submit (medians): {figures['ratio_rest_vs_cli']:.2f}")
    print(
        f"rest create call answered in {figures['rest_create_answer_ms']:.0f} ms (median;"
        " spark-submit instead keeps a driver JVM on this host)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
