"""An availability zone lost, on real Spark: from the kill until every job runs on the other
cluster (per job and in total).

Starts everything it needs and removes it at the end (also on Ctrl-C or an error): two private
Spark standalone clusters A and B (``harness/spark.py``, ports of their own: the bench kills one
whole, which it may not do to the shared clusters), a fresh MariaDB database on the server of
``DROVER_TEST_MYSQL_URL``, a ZooKeeper namespace on ``DROVER_TEST_ZK_HOSTS``, two ``drover node
run`` processes with default settings (the fence lease too: ``fence_lease_seconds``) but for
short intervals of their loops, and ``--jobs`` self-fencing streams of the sample pipeline
(``pipelines/rate_counter.py``, 2 s trigger, recording which run committed each batch) in group
``az`` (primary A, failover B, automatic failover on where this checkout has it).

Once every job is RUNNING on A with two batches committed, every process of A dies at once
(master, worker, drivers, executors: SIGKILL). Where the group cannot fail over by itself, the
bench asks for the failover of every job from A as soon as Drover has A abnormal (an operator
who reacts at once; Drover refuses to fence a cluster it still has NORMAL). Then
it waits for every job to be RUNNING on B, and for its first batch committed there.

Figures (wall clock, from the kill): per job until RUNNING on B (p50, max = the total) and until
its first batch on B; the lease the nodes granted; batches committed by two runs (never); whether
the failover was automatic. Target: every job RUNNING on B within the lease plus 60 s
(``bench/targets.py``).

    set -a; . var/services/env; set +a
    .venv/bin/python -m bench.azloss [--jobs 4]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.takeover import create_jobs, fresh_database, migrate, zk_namespace
from chaos.checker import batch_verdicts
from chaos.history import BatchCommit, History
from chaos.recorder import commit_records
from harness.nodes import NodeProcess, poll
from harness.procs import terminate_like_interrupt
from harness.spark import PrivateSparkCluster

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "pipelines" / "rate_counter.py"
GROUP = "az"
#: the lease a node grants unless told otherwise (scheduler/config.py ``fence_lease_seconds``)
DEFAULT_LEASE_S = 90.0


def _lease(env: dict[str, str]) -> float:
    """The fence lease the nodes grant, seconds (0 when this checkout grants none)."""
    try:
        from scheduler.config import Settings
    except ImportError:  # pragma: no cover
        return 0.0
    field = Settings.model_fields.get("fence_lease_seconds")
    if field is None:
        return 0.0
    raw = env.get("DROVER_FENCE_LEASE_SECONDS")
    return float(raw) if raw else float(field.default)


def _batches(workdir: Path, job: str) -> list[BatchCommit]:
    return commit_records(job, workdir / "commits" / f"{job}.log")


def measure(
    mysql_url: str,
    zk_hosts: str,
    jobs: int = 4,
    start_timeout: float = 300.0,
    extra_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    workdir = Path(tempfile.mkdtemp(prefix="drover-azloss-"))
    names = [f"az-{i}" for i in range(1, jobs + 1)]
    clusters = {
        letter: PrivateSparkCluster(workdir / letter, cores=2 * jobs + 1, memory=f"{jobs + 1}g")
        for letter in ("A", "B")
    }
    nodes: list[NodeProcess] = []
    ok = False
    try:
        for cluster in clusters.values():
            cluster.start(timeout=180)
        with fresh_database(mysql_url) as database_url, zk_namespace(zk_hosts) as namespace:
            migrate(database_url)
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith("DROVER_")},
                "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
                "DROVER_DATABASE_URL": database_url,
                "DROVER_ZK_HOSTS": zk_hosts,
                "DROVER_ZK_NAMESPACE": namespace,
                "DROVER_GROUPS": f"{GROUP}:active",
                "DROVER_RECONCILE_INTERVAL": "1",
                "DROVER_FAILOVER_INTERVAL": "0.5",
                "DROVER_HEALTH_PROBE_INTERVAL": "2",
                "DROVER_ARTIFACT_ROOTS": f"{PIPELINE.parent}/",
                **(extra_env or {}),
            }
            lease = _lease(env)
            for i in (1, 2):
                node_env = {**env, "DROVER_DATA_DIR": str(workdir / f"node-{i}")}
                nodes.append(NodeProcess(f"node-{i}", node_env, workdir / f"node-{i}.log"))
            for node in nodes:
                node.start()
            for node in nodes:
                node.wait_ready()
            api = nodes[0]
            (workdir / "commits").mkdir()
            for letter, cluster in clusters.items():
                (workdir / "storage" / letter).mkdir(parents=True)
                api.post(
                    "/v1/clusters",
                    {
                        "name": letter,
                        "kind": "standalone",
                        "master_url": cluster.master_url,
                        "rest_url": cluster.rest_url,
                        "ui_url": cluster.ui_url,
                        "az": f"az-{letter.lower()}",
                        "storage_root": (workdir / "storage" / letter).as_uri(),
                    },
                )
            group = {"name": GROUP, "primary_cluster": "A", "failover_cluster": "B"}
            automatic = _automatic_failover(api, group)
            began = time.monotonic()
            create_jobs(
                api,
                names,
                GROUP,
                str(PIPELINE),
                lambda name: [
                    "--output",
                    str(workdir / "out" / name),
                    "--app-name",
                    name,
                    "--trigger-seconds",
                    "2",
                    "--commit-log",
                    str(workdir / "commits" / f"{name}.log"),
                ],
                priority="high",
            )

            def on(cluster: str, batches: int) -> bool:
                for name in names:
                    job = api.get(f"/v1/jobs/{name}")
                    if job["state"] != "RUNNING" or job["cluster"] != cluster:
                        return False
                    if sum(b.committed for b in _batches(workdir, name)) < batches:
                        return False
                return True

            poll(
                lambda: on("A", 2),
                timeout=start_timeout,
                interval=1.0,
                what=f"{jobs} jobs RUNNING on A with two batches committed each",
            )
            print(f"{jobs} jobs RUNNING on A after {time.monotonic() - began:.1f} s", flush=True)
            runs_on_a = {n: api.get(f"/v1/jobs/{n}")["current_run"] for n in names}
            killed_at = time.monotonic()
            processes = len(clusters["A"].pids())
            took = clusters["A"].kill()
            print(f"cluster A killed ({processes} processes, gone in {took:.1f} s)", flush=True)
            detected = None
            if not automatic:
                # what an operator does: wait for Drover to see A down, then fail every job over
                poll(
                    lambda: api.get("/v1/clusters/A")["health"] != "NORMAL",
                    timeout=120,
                    interval=0.5,
                    what="cluster A abnormal",
                )
                detected = time.monotonic() - killed_at
                api.post(
                    "/v1/failovers",
                    {"source": "A", "selector": {"all": True}, "reason": "bench: AZ lost"},
                    timeout=60,
                )
            running: dict[str, float] = {}
            resumed: dict[str, float] = {}

            def all_on_b() -> bool:
                for name in names:
                    if name not in running:
                        job = api.get(f"/v1/jobs/{name}")
                        if job["state"] == "RUNNING" and job["cluster"] == "B":
                            running[name] = time.monotonic() - killed_at
                    if name not in resumed:
                        old = str((runs_on_a[name] or {}).get("id", ""))
                        if any(b.run != old for b in _batches(workdir, name) if b.committed):
                            resumed[name] = time.monotonic() - killed_at
                return len(running) == len(resumed) == len(names)

            poll(
                all_on_b,
                timeout=lease + start_timeout,
                interval=0.5,
                what="every job RUNNING on B with a batch committed there",
            )
            history = History(batches=[b for n in names for b in _batches(workdir, n)])
            _, doubled = batch_verdicts(history)
            per_job = sorted(running.values())
            print(
                f"AZ loss: every job RUNNING on B {max(per_job):.1f} s after the kill "
                f"(per job {', '.join(f'{t:.1f}' for t in per_job)}; lease {lease:g} s; "
                f"{'automatic' if automatic else 'operator'} failover); first batch on B after "
                f"{max(resumed.values()):.1f} s; batches committed twice: {len(doubled)}",
                flush=True,
            )
            ok = True
            return {
                "jobs": jobs,
                "lease_s": lease,
                "automatic": automatic,
                "detected_s": detected,
                "all_running_on_b_s": max(per_job),
                "per_job_p50_s": statistics.median(per_job),
                "per_job_max_s": max(per_job),
                "per_job_s": max(per_job) / jobs,
                "resumed_on_b_max_s": max(resumed.values()),
                "double_commits": len(doubled),
            }
    finally:
        for node in nodes:
            if node.proc is not None and node.alive:
                node.thaw()
                node.stop(timeout=30)
        for cluster in clusters.values():
            cluster.kill()
        if ok:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"logs kept in {workdir}")


def _automatic_failover(api: NodeProcess, group: dict[str, Any]) -> bool:
    """Create the group with automatic failover on where this checkout has it; whether on."""
    try:
        api.post("/v1/groups", {**group, "auto_failover": True})
    except AssertionError:
        api.post("/v1/groups", group)
        return False
    try:
        return bool(api.get(f"/v1/groups/{group['name']}").get("auto_failover"))
    except httpx.HTTPError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--mysql-url", default=os.environ.get("DROVER_TEST_MYSQL_URL", ""))
    parser.add_argument("--zk-hosts", default=os.environ.get("DROVER_TEST_ZK_HOSTS", ""))
    args = parser.parse_args(argv)
    if not args.mysql_url or not args.zk_hosts:
        parser.error("needs DROVER_TEST_MYSQL_URL and DROVER_TEST_ZK_HOSTS (var/services/env)")
    terminate_like_interrupt()
    try:
        figures = measure(args.mysql_url, args.zk_hosts, args.jobs)
    except KeyboardInterrupt:
        print("interrupted")
        return 130
    return 0 if figures["double_commits"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
