"""Spark on YARN, measured on the test clusters of ``scripts/services.sh`` (``HADOOP_CLUSTERS=2``).

- ``submit``: submit -> RUNNING (the ResourceManager reports the application RUNNING with its
  ApplicationMaster and an executor, polled every 0.1 s) through Drover's YARN backend, against
  ``spark-submit`` run by hand the same way (cluster deploy mode, ``waitAppCompletion=false``,
  the same properties), N rounds each, interleaved, one application alive at a time; then
  kill requested -> confirmed (the ResourceManager reports it KILLED) for each Drover run;
- ``clusters``: memory (RSS) and start time (HDFS, YARN) of the two test clusters, read from
  their processes and the launcher's ``ready`` files.

    set -a; . var/services/env; set +a
    .venv/bin/python -m bench.yarn [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from scheduler.backends.yarn import YarnBackend, _escape
from scheduler.config import Settings
from scheduler.core.backend import AppState, SubmitRequest

PIPELINE = """\
import time
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
spark.range(10).count()  # an executor did some work
while not spark.sparkContext._jsc.sc().isStopped():
    time.sleep(1)
"""
POLL_S = 0.1
TIMEOUT_S = 300.0


def _wait(condition: Callable[[], Any], what: str, timeout: float = TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(POLL_S)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _cluster(letter: str) -> dict[str, str]:
    return {
        key: os.environ[f"DROVER_TEST_YARN_{letter}_{key.upper()}"]
        for key in ("rm", "hdfs", "conf", "control")
    }


def _running_by_tag(rm: str, tag: str) -> str | None:
    body = httpx.get(
        f"{rm}/ws/v1/cluster/apps", params={"applicationTags": tag}, timeout=5, trust_env=False
    ).json()
    for app in (body.get("apps") or {}).get("app") or []:
        if app["state"] == "RUNNING" and int(app.get("runningContainers") or 0) >= 2:
            return str(app["id"])
    return None


def measure_submit(rounds: int) -> dict[str, Any]:
    a = _cluster("A")
    settings = Settings()
    work = Path(tempfile.mkdtemp(prefix="bench-yarn-"))
    pipeline = work / "wait.py"
    pipeline.write_text(PIPELINE)
    backend = YarnBackend(
        a["rm"], a["conf"], spark_home=settings.resolved_spark_home, work_dir=work / "submit"
    )
    drover: list[float] = []
    by_hand: list[float] = []
    kills: list[float] = []
    client: list[float] = []
    try:
        for n in range(rounds):
            job = f"bench-yarn-{uuid.uuid4().hex[:6]}"
            # Drover's backend
            request = SubmitRequest(
                job_name=job,
                run_id=1,
                fencing_token=uuid.uuid4().hex,
                entrypoint=str(pipeline),
                checkpoint_location="",
            )
            started = time.monotonic()
            sub = backend.submit(request)
            client.append(time.monotonic() - started)
            _wait(
                lambda sid=sub.submission_id: backend.status(sid).state is AppState.RUNNING,
                f"{job} RUNNING",
            )
            drover.append(time.monotonic() - started)
            asked = time.monotonic()
            backend.kill(sub.submission_id)
            _wait(
                lambda sid=sub.submission_id: backend.status(sid).state.is_terminal,
                f"{job} killed",
            )
            kills.append(time.monotonic() - asked)
            # spark-submit by hand, the same way
            tag = f"bench-hand-{n}-{uuid.uuid4().hex[:6]}"
            props = work / f"hand-{n}.properties"
            conf = backend.properties(
                SubmitRequest(
                    job_name=job,
                    run_id=2,
                    fencing_token=uuid.uuid4().hex,
                    entrypoint=str(pipeline),
                )
            )
            conf["spark.yarn.tags"] = tag
            props.write_text("".join(f"{_escape(k)}={_escape(v)}\n" for k, v in conf.items()))
            env = backend._environment(work / "none")
            env["SPARK_SUBMIT_OPTS"] = ""
            started = time.monotonic()
            subprocess.run(
                [
                    str(settings.resolved_spark_home / "bin" / "spark-submit"),
                    "--master",
                    "yarn",
                    "--deploy-mode",
                    "cluster",
                    "--properties-file",
                    str(props),
                    "--load-spark-defaults",
                    str(pipeline),
                ],
                env=env,
                capture_output=True,
                timeout=TIMEOUT_S,
                check=True,
            )
            app_id = _wait(lambda tag=tag: _running_by_tag(a["rm"], tag), f"{tag} RUNNING")
            by_hand.append(time.monotonic() - started)
            backend.kill(app_id)
            _wait(lambda app_id=app_id: backend.status(app_id).state.is_terminal, "hand kill")
    finally:
        backend.close()
    return {
        "rounds": rounds,
        "drover_median_s": round(statistics.median(drover), 2),
        "drover_p95_s": round(_p95(drover), 2),
        "by_hand_median_s": round(statistics.median(by_hand), 2),
        "by_hand_p95_s": round(_p95(by_hand), 2),
        "client_median_s": round(statistics.median(client), 2),
        "kill_confirmed_median_s": round(statistics.median(kills), 3),
        "kill_confirmed_p95_s": round(_p95(kills), 3),
        "ratio_drover_vs_by_hand": round(statistics.median(drover) / statistics.median(by_hand), 2),
    }


def measure_clusters() -> dict[str, Any]:
    """RSS and start times of the running test clusters (from their processes and the
    launcher's ``ready`` file: HDFS up, then YARN up)."""
    figures: dict[str, Any] = {}
    for letter in ("A", "B"):
        conf = Path(os.environ[f"DROVER_TEST_YARN_{letter}_CONF"])
        name = conf.parent.name  # hadoop-a
        pid_file = conf.parent.parent / f"{name}.pid"
        ready = dict(
            line.split("=", 1)
            for line in (conf.parent / "work" / "ready").read_text().split()
            if "=" in line
        )
        pid = int(pid_file.read_text().strip())
        rss_kb = int(
            next(
                line.split()[1]
                for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("VmRSS:")
            )
        )
        key = letter.lower()
        figures[f"{key}_rss_mb"] = round(rss_kb / 1024)
        figures[f"{key}_hdfs_start_s"] = round(int(ready["hdfs_ms"]) / 1000, 1)
        figures[f"{key}_yarn_start_s"] = round(int(ready["yarn_ms"]) / 1000, 1)
        figures[f"{key}_start_s"] = round((int(ready["hdfs_ms"]) + int(ready["yarn_ms"])) / 1000, 1)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    figures = {**measure_clusters(), **measure_submit(args.rounds)}
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
