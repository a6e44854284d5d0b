"""Spark on YARN, measured on the test clusters of ``scripts/services.sh`` (``HADOOP_CLUSTERS=2``).

- ``submit``: submit -> RUNNING (the ResourceManager reports the application RUNNING with its
  ApplicationMaster and an executor, polled every 0.1 s) through Drover's YARN backend, against
  ``spark-submit`` run by hand the same way (cluster deploy mode, ``waitAppCompletion=false``,
  the same properties), N rounds each, interleaved, one application alive at a time; then
  kill requested -> confirmed (the ResourceManager reports it KILLED) for each Drover run;
- ``clusters``: memory (RSS) and start time (HDFS, YARN) of the two test clusters, read from
  their processes and the launcher's ``ready`` files;
- ``failover`` (``--failover-jobs N``, alone): N self-fencing streams RUNNING on A (checkpoints on
  A's HDFS), then the failover of all of them to B through the API: from the request until each
  job is RUNNING on B (median, p95, the last one), until the failover ended and until each
  committed a batch on B; jobs RUNNING on both clusters at once, sampled every 0.2 s (never);
  two node processes, a fresh database and ZooKeeper namespace. Each
  job takes 1.5 GB of a NodeManager (``JOB_MB``): 10 jobs need clusters started with
  ``DROVER_SVC_HADOOP_NM_MB`` >= 15360 (scripts/hadoop/services.sh; the default is 16384).

    set -a; . var/services/env; set +a
    .venv/bin/python -m bench.yarn [--rounds 3] [--failover-jobs 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.failover import (
    REAL_PIPELINE,
    DoubleRunPoller,
    request_failover,
    stop_jobs,
)
from bench.takeover import (
    bench_nodes,
    create_jobs,
    fresh_database,
    migrate,
    node_env,
    start_nodes,
    zk_namespace,
)
from harness import http
from harness.nodes import NodeProcess, poll
from harness.pipelines import batch_files
from harness.procs import terminate_like_interrupt
from scheduler.backends.yarn import LIVE_STATES, YarnBackend, _escape
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
    body = http.get(f"{rm}/ws/v1/cluster/apps", params={"applicationTags": tag}, timeout=5).json()
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


# -- the failover of N real YARN jobs from A to B, end to end -----------------------------------

#: not ``default``: a node creates that group itself at start (on its local cluster)
FAILOVER_GROUP = "bench-yarn-fo"
#: what one job takes of a NodeManager (Drover's YARN defaults: a 512 MB driver and one 512 MB
#: executor, each with 256 MB of overhead)
JOB_MB = 2 * (512 + 256)


def _apps(rm: str, states: str) -> list[dict[str, Any]]:
    """The applications of the ResourceManager at ``rm`` in ``states`` (comma-separated)."""
    body = http.get(f"{rm}/ws/v1/cluster/apps", params={"states": states}, timeout=5).json()
    return list((body.get("apps") or {}).get("app") or [])


def _running_jobs(rms: list[str]) -> list[str]:
    """The job (its ``drover-job-`` tag) of every RUNNING application of these clusters."""
    return [
        tag
        for rm in rms
        for app in _apps(rm, "RUNNING")
        for tag in str(app.get("applicationTags", "")).split(",")
        if tag.startswith("drover-job-")
    ]


def _kill_left_behind(cluster: dict[str, str], name_prefix: str) -> None:
    """Kill, through Drover's YARN backend, every live application of ``cluster`` whose name
    starts with ``name_prefix`` (what a failed bench left behind)."""
    backend = YarnBackend(
        cluster["rm"], cluster["conf"], spark_home=Settings().resolved_spark_home, user="root"
    )
    try:
        for app in _apps(cluster["rm"], ",".join(LIVE_STATES)):
            if app["name"].startswith(name_prefix):
                print(f"killing what the bench left behind: {app['id']}")
                backend.kill(app["id"])
    finally:
        backend.close()


def _free_mb(rm: str) -> int:
    metrics = http.get(f"{rm}/ws/v1/cluster/metrics", timeout=5).json()
    return int(metrics["clusterMetrics"]["availableMB"])


def _mkdir_hdfs(webhdfs: str, path: str) -> None:
    http.put(
        f"{webhdfs}/webhdfs/v1{path}",
        params={"op": "MKDIRS", "user.name": "root"},
        timeout=10,
    ).raise_for_status()


def measure_failover(
    mysql_url: str, zk_hosts: str, jobs: int = 10, start_timeout: float = 900.0
) -> dict[str, Any]:
    """``jobs`` self-fencing streams (``tests/e2e/pipelines/batch_ids.py``, checkpoints on A's
    HDFS) RUNNING on YARN cluster A with 2 batches committed each, then the failover of all of
    them to B through the API (every item at once): from the request until each job is RUNNING
    on B (per job median and p95; the last one is the total), until the failover SUCCEEDED, and
    until every job committed a batch on B (resumed from its checkpoint). Two ``drover node
    run`` processes; a sampler of both ResourceManagers every 0.2 s counts the jobs seen with
    two RUNNING applications at once (never)."""
    a, b = _cluster("A"), _cluster("B")
    webhdfs = {
        "a": os.environ["DROVER_TEST_YARN_A_WEBHDFS"],
        "b": os.environ["DROVER_TEST_YARN_B_WEBHDFS"],
    }
    for letter, c in (("A", a), ("B", b)):
        if _free_mb(c["rm"]) < jobs * JOB_MB:
            raise RuntimeError(
                f"YARN cluster {letter} has {_free_mb(c['rm'])} MB free, {jobs} jobs need "
                f"{jobs * JOB_MB} MB: start the clusters with DROVER_SVC_HADOOP_NM_MB >= "
                f"{jobs * JOB_MB} (scripts/hadoop/services.sh)"
            )
    workdir = Path(tempfile.mkdtemp(prefix="drover-yarn-failover-"))
    prefix = f"yf{uuid.uuid4().hex[:6]}"
    names = [f"{prefix}-{i}" for i in range(1, jobs + 1)]
    nodes: list[NodeProcess] = []
    ok = False
    try:
        with fresh_database(mysql_url) as database_url, zk_namespace(zk_hosts) as namespace:
            migrate(database_url)
            env = node_env(
                database_url,
                zk_hosts,
                namespace,
                "4",
                "1",
                DROVER_FAILOVER_INTERVAL="0.5",
                DROVER_ARTIFACT_ROOTS=f"{REAL_PIPELINE.parent}/",
                DROVER_WEBHDFS_ADDRESSES=",".join(
                    f"{c['hdfs'].removeprefix('hdfs://')}={webhdfs[k]}"
                    for k, c in (("a", a), ("b", b))
                ),
            )
            nodes.extend(bench_nodes(workdir, env, [f"{FAILOVER_GROUP}:active"] * 2))
            start_nodes(nodes)
            api = nodes[0]
            try:
                for key, c in (("a", a), ("b", b)):
                    root = f"/drover-bench/{prefix}/{key}"
                    _mkdir_hdfs(webhdfs[key], root)
                    api.post(
                        "/v1/clusters",
                        {
                            "name": f"yarn-{key}",
                            "kind": "yarn",
                            "rest_url": c["rm"],
                            "hadoop_conf_dir": c["conf"],
                            "az": f"az-{key}",
                            "storage_root": f"{c['hdfs']}{root}",
                        },
                    )
                api.post(
                    "/v1/groups",
                    {
                        "name": FAILOVER_GROUP,
                        "primary_cluster": "yarn-a",
                        "failover_cluster": "yarn-b",
                    },
                )
                rms = [a["rm"], b["rm"]]
                with DoubleRunPoller({}, lambda: _running_jobs(rms), 0.2) as checker:
                    figures = _fail_over(api, workdir, names, start_timeout)
                figures["double_runs"] = len(checker.doubles)
                figures["checker_samples"] = checker.samples
                ok = bool(figures["succeeded"]) and not checker.doubles
                return figures
            finally:
                stop_jobs(api, names, timeout=180)
                for node in nodes:
                    if node.alive:
                        node.stop()
                for c in (a, b):
                    _kill_left_behind(c, f"drover:{prefix}")
    finally:
        for node in nodes:
            if node.proc is not None and node.alive:
                node.kill9()
        if ok:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"logs kept in {workdir}")


def _fail_over(
    api: NodeProcess, workdir: Path, names: list[str], start_timeout: float
) -> dict[str, Any]:
    began = time.monotonic()
    create_jobs(
        api,
        names,
        FAILOVER_GROUP,
        f"file://{REAL_PIPELINE}",
        lambda name: ["--output", str(workdir / "out" / name)],
    )

    def on_a() -> bool:
        return all(
            (j := api.get(f"/v1/jobs/{n}"))["state"] == "RUNNING"
            and j["cluster"] == "yarn-a"
            and len(batch_files(workdir / "out" / n)) >= 2
            for n in names
        )

    poll(on_a, timeout=start_timeout, interval=1.0, what=f"{len(names)} jobs RUNNING on A")
    start_on_a = time.monotonic() - began
    print(f"{len(names)} YARN jobs RUNNING on A with 2 batches each after {start_on_a:.1f} s")
    op, began = request_failover(api, "yarn-a", len(names))
    running: dict[str, float] = {}
    resumed: dict[str, float] = {}
    ended: dict[str, Any] = {}

    def done() -> bool:
        now = time.monotonic() - began
        for name in names:
            job = api.get(f"/v1/jobs/{name}")
            run = job["current_run"] or {}
            if name not in running and job["state"] == "RUNNING" and job["cluster"] == "yarn-b":
                running[name] = now
            if name not in resumed and run.get("cluster") == "yarn-b":
                if run["id"] in batch_files(workdir / "out" / name).values():
                    resumed[name] = now
        if not ended:
            last = api.get(f"/v1/failovers/{op['id']}", timeout=30)
            if last["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                ended.update(last, seconds=now)
        failed = ended and ended["state"] != "SUCCEEDED"
        return bool(failed) or (bool(ended) and len(running) == len(resumed) == len(names))

    poll(done, timeout=start_timeout, interval=0.5, what="the failover of every job to B")
    per_job = sorted(running.values())
    print(
        f"YARN failover of {len(names)} jobs {ended['state']}: all RUNNING on B "
        f"{max(per_job, default=float('nan')):.1f} s after the request (median "
        f"{statistics.median(per_job) if per_job else float('nan'):.1f} s, p95 "
        f"{_p95(per_job) if per_job else float('nan'):.1f} s); failover ended at "
        f"{ended['seconds']:.1f} s; every job resumed on B at "
        f"{max(resumed.values(), default=float('nan')):.1f} s"
    )
    return {
        "jobs": len(names),
        "succeeded": ended["state"] == "SUCCEEDED",
        "start_on_a_s": round(start_on_a, 1),
        "all_running_on_b_s": round(max(per_job), 2) if per_job else None,
        "per_job_median_s": round(statistics.median(per_job), 2) if per_job else None,
        "per_job_p95_s": round(_p95(per_job), 2) if per_job else None,
        "op_s": round(ended["seconds"], 2),
        "resumed_on_b_max_s": round(max(resumed.values()), 2) if resumed else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--failover-jobs", type=int, default=0, help="only the failover of this many jobs A -> B"
    )
    args = parser.parse_args(argv)
    terminate_like_interrupt()
    if args.failover_jobs:
        mysql, zk = os.environ["DROVER_TEST_MYSQL_URL"], os.environ["DROVER_TEST_ZK_HOSTS"]
        figures = measure_failover(mysql, zk, args.failover_jobs)
    else:
        figures = {**measure_clusters(), **measure_submit(args.rounds)}
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
