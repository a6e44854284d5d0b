"""The driver <-> application link end to end: pipelines that name their
own application, on the real Spark standalone cluster A, driven by two real Drover nodes
(ZooKeeper, MariaDB) through their REST API.

Two pipelines run side by side in one flow, so that node processes, the cluster and every wait
are shared:

- ``pipelines/rate_counter.py``: ``builder.appName(<own name>)`` and ``drover_runtime``;
- ``pipelines/plain_rate_parquet.py``: plain PySpark (rate source -> Parquet with a checkpoint),
  its own app name, no ``drover_runtime``.

Both are owned by node n1, which runs with ``DROVER_FAULTS`` arming the ``after-submit`` crash
point twice (one once-file each): n1's reconciler dies right after the master accepted a
submission, before the store recorded it (submissions run in parallel, so the first crash may
also catch the other job's submission in flight). Then, for each job:

1. crash point -> the restarted reconciler adopts the one application (one run, an "adopted"
   event), RUNNING with exactly one application on the master: the one linked to the run;
2. kill -9 of the owner n1 -> n2 owns the job and re-attaches: same run, same app id, never a
   second application (the master's ``/json/`` polled throughout);
3. restart of the plain pipeline -> run 2 RUNNING with exactly one (new) application, run 1's
   gone; stop of both -> 0 applications of them left, runs KILLED, jobs STOPPED.

And the self-fencing report: the drover_runtime pipeline's run has checked in
(``self_fencing: true``); the plain one never asks its fence (``fence_checked_at: null``).

The applications' own names carry a random suffix, so other tests on the shared cluster never
match them; "exactly one application" counts the master's active apps of that name.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.nodes import stop_live
from harness.spark import kill_drover_apps
from scheduler.core.ownership import owner_of
from tests.conftest import SparkStandalone, wait_until
from tests.support.nodes import NodeProcess
from tests.support.pollers import Poller
from tests.support.world import zk_node_env

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
RATE_COUNTER = ROOT / "pipelines" / "rate_counter.py"
PLAIN = ROOT / "pipelines" / "plain_rate_parquet.py"
SESSION = 2.0  # ZooKeeper session timeout of the nodes
START_TIMEOUT_S = 180.0  # submit -> app RUNNING, with other agents on the 2 cores
GONE_TIMEOUT_S = 60.0


class OwnNameMonitor(Poller):
    """Polls the master's /json/ in a thread: per app name, the most active apps seen at once
    and every app id seen."""

    def __init__(self, cluster: SparkStandalone, names: list[str]) -> None:
        super().__init__()
        self.cluster = cluster
        self.most = dict.fromkeys(names, 0)
        self.ids: dict[str, set[str]] = {n: set() for n in names}

    def active(self, name: str) -> list[tuple[str, str]]:
        """(app id, state) of the master's active applications called ``name``, now."""
        return [
            (a["id"], a["state"])
            for a in self.cluster.master_state()["activeapps"]
            if a["name"] == name
        ]

    def poll(self) -> None:
        apps = self.cluster.master_state()["activeapps"]
        for name in self.most:
            mine = [a["id"] for a in apps if a["name"] == name]
            self.most[name] = max(self.most[name], len(mine))
            self.ids[name].update(mine)


@pytest.fixture
def nodes(
    tmp_path: Path,
    fresh_mysql_url: Callable[[], str],
    zk_hosts: str,
    spark_standalone: SparkStandalone,
) -> Iterator[tuple[NodeProcess, NodeProcess, list[Path], str]]:
    """n1 (faults armed: two after-submit crashes) and n2, both active in group ``spark`` whose
    primary is cluster A; yields them, the two once-files and the test's job name prefix. At the
    end every application of a job of the test still on cluster A is killed, and the test fails
    if there was one."""
    prefix = f"link{uuid.uuid4().hex[:8]}"
    once = [tmp_path / "after-submit-1.once", tmp_path / "after-submit-2.once"]
    env = zk_node_env(
        tmp_path,
        fresh_mysql_url(),
        zk_hosts,
        "e2e",
        DROVER_ZK_SESSION_TIMEOUT=str(SESSION),
        DROVER_RECONCILE_INTERVAL="1",
        DROVER_GROUPS="spark:active",
        # the two sample pipelines and their outputs
        DROVER_ARTIFACT_ROOTS=f"{ROOT / 'pipelines'}/,{tmp_path}/",
    )
    n1 = NodeProcess(
        "n1",
        {
            **env,
            "DROVER_DATA_DIR": str(tmp_path / "n1"),
            "DROVER_FAULTS": ",".join(f"after-submit:{path}" for path in once),
        },
        tmp_path / "n1.log",
    )
    n2 = NodeProcess("n2", {**env, "DROVER_DATA_DIR": str(tmp_path / "n2")}, tmp_path / "n2.log")
    try:
        for node in (n1, n2):
            node.start()
        for node in (n1, n2):
            node.wait_ready()
        n1.post(
            "/v1/clusters",
            {
                "name": "spark-a",
                "kind": "standalone",
                "master_url": spark_standalone.master_url,
                "rest_url": spark_standalone.rest_url,
                "ui_url": spark_standalone.ui_url,
                "az": "az-a",
                "storage_root": (tmp_path / "storage-a").as_uri(),
            },
        )
        n1.post("/v1/groups", {"name": "spark", "primary_cluster": "spark-a"})
        yield n1, n2, once, prefix
    finally:
        stop_live((n1, n2))
        _kill_leftovers(spark_standalone, prefix)


def _kill_leftovers(cluster: SparkStandalone, prefix: str) -> None:
    """Kill what the test left on the cluster (found by the runs' tags, whatever the apps are
    called), and fail if there was anything."""
    leftovers = kill_drover_apps(cluster.rest_url, cluster.master_url, cluster.ui_url, prefix)
    assert not leftovers, f"left behind by the test (killed now): {leftovers}"


def last_tick_at(node: NodeProcess) -> float:
    actors = node.get("/v1/nodes")["actors"]
    return float(actors["reconcilers"]["spark"]["last_tick"].get("at", 0.0))


def name_owned_by_n1(prefix: str) -> str:
    return next(
        f"{prefix}-{i}" for i in range(1000) if owner_of(f"{prefix}-{i}", ("n1", "n2")) == "n1"
    )


def test_pipelines_with_their_own_app_names_start_adopt_reattach_restart_stop(
    nodes: tuple[NodeProcess, NodeProcess, list[Path], str],
    spark_standalone: SparkStandalone,
    tmp_path: Path,
) -> None:
    n1, n2, once, prefix = nodes
    suffix = prefix.removeprefix("link")
    jobs = {
        name_owned_by_n1(f"{prefix}-counter"): (RATE_COUNTER, f"rate-counter-{suffix}"),
        name_owned_by_n1(f"{prefix}-plain"): (PLAIN, f"plain-rate-parquet-{suffix}"),
    }
    counter, plain = list(jobs)
    app_names = [own for _, own in jobs.values()]

    def job(name: str) -> dict[str, Any]:
        answer: dict[str, Any] = n2.get(f"/v1/jobs/{name}")
        return answer

    def wait_job(name: str, ok: Callable[[dict[str, Any]], bool], what: str) -> dict[str, Any]:
        def reached() -> dict[str, Any] | None:
            now = job(name)
            assert now["state"] != "FAILED", now
            return now if ok(now) else None

        try:
            return wait_until(reached, timeout=START_TIMEOUT_S, interval=0.25, what=what)
        except pytest.fail.Exception as exc:
            pytest.fail(f"{exc}\njob: {job(name)}\nn1:\n{n1.log_tail()}\nn2:\n{n2.log_tail()}")

    def running(attempt: int) -> Callable[[dict[str, Any]], bool]:
        def check(now: dict[str, Any]) -> bool:
            run = now["current_run"]
            return now["state"] == "RUNNING" and run is not None and run["attempt"] == attempt

        return check

    with OwnNameMonitor(spark_standalone, app_names) as monitor:
        started = time.monotonic()
        for name, (pipeline, own) in jobs.items():
            n2.post(
                "/v1/jobs",
                {
                    "name": name,
                    "group": "spark",
                    "entrypoint": f"file://{pipeline}",
                    "args": [
                        *("--output", str(tmp_path / "out" / name)),
                        *("--app-name", own, "--trigger-seconds", "2"),
                    ],
                    "conf": {"spark.executor.memory": "512m", "spark.driver.memory": "512m"},
                    "desired_state": "RUNNING",
                },
            )

        # 1. the crash point (twice: one per job), then adoption; RUNNING, one app each
        first: dict[str, dict[str, Any]] = {}
        linked_after: dict[str, float] = {}
        for name in jobs:
            first[name] = wait_job(name, running(1), f"{name} RUNNING after the crash point")
            linked_after[name] = time.monotonic() - started
        # The reconciler submits in parallel: the first crash may take the other job's
        # submission down with it in flight (accepted by the master, never recorded), or
        # before it was sent (then it is submitted after the restart and the second crash
        # point fires). Either way each job's one run went through "submitted, not recorded,
        # crash" and was adopted: the adoption events below say so.
        assert once[0].exists(), "the crash point was hit"
        for name, (_, own) in jobs.items():
            run = first[name]["current_run"]
            assert first[name]["owner"] == "n1"
            assert run["app_id"] and run["app_id"].startswith("app-"), run
            assert monitor.active(own) == [(run["app_id"], "RUNNING")]
            assert len(n2.get(f"/v1/jobs/{name}/runs")["data"]) == 1
            events = n2.get(f"/v1/jobs/{name}/events", limit=1000)["data"]
            adopted = [e for e in events if e["message"].startswith("adopted application")]
            assert len(adopted) == 1 and run["submission_id"] in adopted[0]["message"], events

        # 2. kill -9 of the owner: n2 re-attaches to the same applications
        killed = time.monotonic()
        n1.kill9()
        reattached_after: dict[str, float] = {}
        for name in jobs:
            wait_job(name, lambda j: j["owner"] == "n2", f"{name} owned by n2")
            reattached_after[name] = time.monotonic() - killed
        owned_at = time.time()
        wait_until(  # a whole tick of n2 after that, to see what it makes of the runs
            lambda: last_tick_at(n2) > owned_at,
            timeout=30,
            interval=0.1,
            what="a tick of n2 after the takeover",
        )
        for name, (_, own) in jobs.items():
            now = job(name)
            was = first[name]["current_run"]
            assert now["state"] == "RUNNING" and now["owner"] == "n2", now
            assert now["current_run"]["id"] == was["id"], "re-attached, not restarted"
            assert now["current_run"]["app_id"] == was["app_id"]
            assert monitor.active(own) == [(was["app_id"], "RUNNING")]
            assert len(n2.get(f"/v1/jobs/{name}/runs")["data"]) == 1

        # the self-fencing report: the runtime's run checks in once its session exists (its
        # Python side may lag the application's registration by seconds); the plain one never
        checked = wait_job(counter, lambda j: j["self_fencing"] is True, "the check-in")
        assert checked["current_run"]["fence_checked_at"] is not None
        plain_now = job(plain)
        assert plain_now["current_run"]["fence_checked_at"] is None
        assert plain_now["self_fencing"] is not True

        # 3. restart the plain pipeline and stop the other one, at once
        stop_at = time.monotonic()
        n2.post(f"/v1/jobs/{plain}/restart")
        n2.post(f"/v1/jobs/{counter}/stop")
        stopped = wait_job(counter, lambda j: j["state"] == "STOPPED", f"{counter} STOPPED")
        assert stopped["current_run"]["state"] == "KILLED"
        assert monitor.active(jobs[counter][1]) == []
        restarted = wait_job(plain, running(2), f"{plain} RUNNING on run 2")
        plain_own = jobs[plain][1]
        new_app = restarted["current_run"]["app_id"]
        assert new_app and new_app != first[plain]["current_run"]["app_id"]
        assert monitor.active(plain_own) == [(new_app, "RUNNING")]
        runs = n2.get(f"/v1/jobs/{plain}/runs")["data"]
        assert [(r["attempt"], r["state"]) for r in runs] == [(2, "RUNNING"), (1, "KILLED")]
        restart_took = time.monotonic() - stop_at

        n2.post(f"/v1/jobs/{plain}/stop")
        stopped = wait_job(plain, lambda j: j["state"] == "STOPPED", f"{plain} STOPPED")
        assert stopped["current_run"]["state"] == "KILLED"
        wait_until(
            lambda: not any(monitor.active(own) for own in app_names),
            timeout=GONE_TIMEOUT_S,
            interval=0.2,
            what="no application of the two pipelines left",
        )
        assert monitor.active(plain_own) == []

    assert monitor.polls > 20
    assert monitor.most == dict.fromkeys(app_names, 1), monitor.most  # never two at once
    assert monitor.ids[jobs[counter][1]] == {first[counter]["current_run"]["app_id"]}
    assert monitor.ids[plain_own] == {first[plain]["current_run"]["app_id"], new_app}
    print(
        "\nown app names: submit -> adopted, linked and RUNNING "
        + ", ".join(f"{n} {t:.1f} s" for n, t in linked_after.items())
        + "; kill -9 n1 -> owned by n2 "
        + ", ".join(f"{n} {t:.1f} s" for n, t in reattached_after.items())
        + f"; restart + stop {restart_took:.1f} s; plain job self_fencing="
        f"{plain_now['self_fencing']}"
    )
