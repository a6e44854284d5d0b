"""Cluster failover end to end, without a double run, on the shared Spark standalone
clusters A and B, two Drover node processes (ZooKeeper membership, MariaDB), self-fencing
pipelines that record which run committed each micro-batch (tests/e2e/pipelines/batch_ids.py).

Drover reaches A's REST and UI ports only through a loopback TCP proxy (harness/tcpproxy.py):
cutting it cuts Drover off from A, while A's drivers still reach A's master and Drover's fence
endpoint directly. A checker polls both masters directly every 0.2 s for the whole module and
asserts that at no instant two live applications of one job exist across A and B.

One shared setup: three jobs on A (two high priority, one normal), both nodes in group ``fo``
(primary A, failover B), then

- a failover that survives its executor --
  ``test_high_priority_jobs_fail_over_to_b_and_survive_the_executor``:
  the dry run lists exactly the items that then run, in that order; the failover runs one item at
  a time and the node executing it is killed -9 once the first item is switched to B; the other
  node finishes it; each job resumes on B from its checkpoint (its batch ids continue) and was
  submitted there once;
- a stranded driver -- ``test_a_stranded_driver_stops_by_itself_once_superseded``: Drover is cut off
  from A, whose monitors then vote it VOTE_ABNORMAL; the failover of the normal-priority job
  fences its run; the stale driver, still running on A, is answered "superseded" at its next
  fence check and stops by itself (its driver FINISHED on A: nobody could kill it); only then is
  the job started on B, from its checkpoint.

Timings are printed; nothing is asserted on them.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.nodes import poll, stop_live
from harness.pipelines import batch_files
from harness.spark import kill_drover_apps
from harness.tcpproxy import TcpProxy
from tests.conftest import SparkStandalone
from tests.support.failovers import steps_of
from tests.support.nodes import NodeProcess
from tests.support.world import NodesWorld, az_nodes, port_of, zk_node_env

pytestmark = [pytest.mark.e2e, pytest.mark.heavy(minutes=4)]

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "tests" / "e2e" / "pipelines" / "batch_ids.py"
GROUP = "fo"
SESSION = 2.0
START_TIMEOUT_S = 240.0
EXIT_GRACE_S = 8.0


class Checker:
    """Polls both masters' /json/ every 0.2 s: per application name (one per job), the most live
    applications seen at once across A and B, and when each (cluster, app id) was seen live."""

    def __init__(self, clusters: dict[str, SparkStandalone], names: list[str]) -> None:
        self.clusters = clusters
        self.names = set(names)
        self.most: dict[str, int] = dict.fromkeys(names, 0)
        self.overlaps: list[tuple[float, str, list[tuple[str, str]]]] = []
        self.seen: dict[tuple[str, str], tuple[str, float, float]] = {}
        self.polls = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="checker", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            live: dict[str, list[tuple[str, str]]] = {}
            try:
                for letter, cluster in self.clusters.items():
                    for app in cluster.master_state()["activeapps"]:
                        if app["name"] in self.names:
                            live.setdefault(app["name"], []).append((letter, app["id"]))
            except Exception:  # noqa: BLE001 - a missed poll; the next one counts
                self.errors += 1
            else:
                self.polls += 1
                for name, apps in live.items():
                    self.most[name] = max(self.most[name], len(apps))
                    if len(apps) > 1:
                        self.overlaps.append((now, name, apps))
                    for letter, app_id in apps:
                        first = self.seen.get((letter, app_id), (name, now, now))[1]
                        self.seen[(letter, app_id)] = (name, first, now)
            self._stop.wait(0.2)

    def apps(self, name: str, letter: str) -> list[tuple[float, float]]:
        """(first seen, last seen) of each live application of ``name`` on cluster ``letter``."""
        return sorted(
            (first, last) for (c, _), (n, first, last) in self.seen.items()
            if c == letter and n == name
        )  # fmt: skip

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


@dataclass
class World(NodesWorld):
    tmp: Path
    a: SparkStandalone
    b: SparkStandalone
    proxies: list[TcpProxy]
    nodes: dict[str, NodeProcess]
    checker: Checker
    jobs: dict[str, str]  # job -> its application's own name
    prefix: str
    started: dict[str, float] = field(default_factory=dict)
    log_tail_chars = 4000

    def batches(self, name: str) -> dict[int, int]:
        """batch id -> id of the run that committed it."""
        return batch_files(self.tmp / "out" / name)


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory,
    module_mysql_url: str,
    zk_hosts: str,
    spark_standalone: SparkStandalone,
    spark_standalone_b: SparkStandalone,
) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("failover")
    prefix = f"fo{uuid.uuid4().hex[:8]}"
    env = zk_node_env(
        tmp,
        module_mysql_url,
        zk_hosts,
        "e2e-failover",
        DROVER_ZK_SESSION_TIMEOUT=str(SESSION),
        DROVER_RECONCILE_INTERVAL="1",
        DROVER_GROUPS=f"{GROUP}:active",
        DROVER_ARTIFACT_ROOTS=f"{PIPELINE.parent}/",
        DROVER_FAILOVER_INTERVAL="0.5",
        DROVER_FAILOVER_FENCE_EXIT_GRACE=str(EXIT_GRACE_S),
        DROVER_HEALTH_PROBE_INTERVAL="1",
        DROVER_HEALTH_PROBE_TIMEOUT="2",
        DROVER_HEALTH_VOTE_FRESHNESS="5",
        DROVER_HEALTH_THRESHOLD_COUNT="1000",
        DROVER_HEALTH_QUIET_PERIOD="5",
    )
    proxies = [
        TcpProxy(port_of(spark_standalone.rest_url)),
        TcpProxy(port_of(spark_standalone.ui_url)),
    ]
    nodes = az_nodes(tmp, env, {"n1": "az-a", "n2": "az-b"})
    jobs = {f"{prefix}-hi1": "high", f"{prefix}-hi2": "high", f"{prefix}-mid": "normal"}
    names = {job: f"{job}-app" for job in jobs}
    checker = Checker({"A": spark_standalone, "B": spark_standalone_b}, list(names.values()))
    w = World(tmp, spark_standalone, spark_standalone_b, proxies, nodes, checker, names, prefix)
    try:
        began = time.monotonic()
        for node in nodes.values():
            node.start()
        for node in nodes.values():
            node.wait_ready()
        print(f"\n2 nodes ready in {time.monotonic() - began:.1f} s")
        for letter, cluster, rest, ui in (
            ("A", spark_standalone, proxies[0].url, proxies[1].url),
            ("B", spark_standalone_b, spark_standalone_b.rest_url, spark_standalone_b.ui_url),
        ):
            w.post(
                "/v1/clusters",
                {
                    "name": letter,
                    "kind": "standalone",
                    "master_url": cluster.master_url,
                    "rest_url": rest,
                    "ui_url": ui,
                    "az": f"az-{letter.lower()}",
                    "storage_root": (tmp / "storage" / letter).as_uri(),
                },
            )
        w.post("/v1/groups", {"name": GROUP, "primary_cluster": "A", "failover_cluster": "B"})
        checker.start()
        began = time.monotonic()
        for job, priority in jobs.items():
            w.post(
                "/v1/jobs",
                {
                    "name": job,
                    "group": GROUP,
                    "priority": priority,
                    "entrypoint": f"file://{PIPELINE}",
                    "args": ["--output", str(tmp / "out" / job), "--app-name", names[job]],
                    "desired_state": "RUNNING",
                },
            )
        for job in jobs:
            w.wait(
                lambda job=job: w.job(job)["state"] == "RUNNING" and len(w.batches(job)) >= 3,
                START_TIMEOUT_S,
                f"{job} RUNNING on A with 3 batches committed",
            )
        print(f"3 jobs RUNNING on A with 3 batches each in {time.monotonic() - began:.1f} s")
        yield w
    finally:
        checker.stop()
        for proxy in proxies:
            proxy.mend()
        _stop_jobs(w, list(jobs))
        stop_live(nodes.values())
        for proxy in proxies:
            proxy.close()
        leftovers = _kill_leftovers((spark_standalone, spark_standalone_b), prefix)
        print(f"checker: {checker.polls} polls ({checker.errors} missed), most {checker.most}")
        assert not leftovers, f"left behind by the test (killed now): {leftovers}"


def _stop_jobs(w: World, jobs: list[str]) -> None:
    """Stop the test's jobs through the API and wait until Drover confirms them stopped."""
    if not any(n.alive for n in w.nodes.values()):
        return
    try:
        for job in jobs:
            if w.job(job)["desired_state"] == "RUNNING":
                w.post(f"/v1/jobs/{job}/stop")
        poll(
            lambda: all(w.job(j)["state"] == "STOPPED" for j in jobs),
            timeout=90,
            interval=0.5,
            what="the test's jobs stopped",
        )
    except Exception as exc:  # noqa: BLE001 - what is left is killed and reported below
        print(f"could not stop the jobs through Drover: {exc}")


def _kill_leftovers(clusters: tuple[SparkStandalone, ...], prefix: str) -> list[str]:
    return [
        f"{c.master_url} {name}"
        for c in clusters
        for name in kill_drover_apps(c.rest_url, c.master_url, c.ui_url, prefix)
    ]


def run_of(w: World, job: str, run_id: int) -> dict[str, Any]:
    return next(r for r in w.runs(job) if r["id"] == run_id)


def assert_no_double_run(w: World) -> None:
    assert w.checker.polls > 0
    assert w.checker.overlaps == [], f"two live applications of one job: {w.checker.overlaps[:5]}"
    assert all(n <= 1 for n in w.checker.most.values()), w.checker.most


def assert_resumed_on_b(w: World, job: str, item: dict[str, Any]) -> None:
    """The run on B went on from the checkpoint A's run left: its first batch is the one the
    item said it resumes from, every earlier batch was A's."""
    b_run = item["target_run_id"]
    batches = w.wait(
        lambda: (
            (found := w.batches(job))
            and sum(1 for r in found.values() if r == b_run) >= 2
            and found
        ),
        120,
        f"{job} committing batches on B",
    )
    on_b = sorted(i for i, r in batches.items() if r == b_run)
    before = sorted(i for i, r in batches.items() if r != b_run)
    print(f"{job}: batches {before[0]}..{before[-1]} on A, {on_b[0]}..{on_b[-1]} on B")
    assert item["resume_batch"] is not None and item["resume_batch"] >= 3
    assert on_b[0] == item["resume_batch"], (on_b, item)
    assert before == list(range(0, on_b[0])), "every batch before the resume point is A's"
    assert on_b == list(range(on_b[0], on_b[-1] + 1))


def test_high_priority_jobs_fail_over_to_b_and_survive_the_executor(world: World) -> None:
    w = world
    high = sorted(j for j in w.jobs if j.endswith(("-hi1", "-hi2")))
    table = w.drover("failover", "plan", "A", "--priority", "high")
    assert all(j in table for j in high) and "plan digest" in table
    dry = w.post(
        "/v1/failovers",
        {"source": "A", "selector": {"priorities": ["high"]}, "dry_run": True},
    )
    assert dry["id"] is None and dry["source_reachable"] is True
    assert [(i["job"], i["action"], i["target_cluster"]) for i in dry["items"]] == [
        (j, "kill", "B") for j in high
    ]
    began = time.monotonic()
    op = w.post(
        "/v1/failovers",
        {
            "source": "A",
            "selector": {"priorities": ["high"]},
            "reason": "acceptance 2 and 4",
            "parallelism": 1,
            "expected_plan": dry["plan_digest"],
        },
    )
    assert op["plan_digest"] == dry["plan_digest"]

    # mid-way: the first item is switched to B, the second has not started
    def midway() -> dict[str, Any] | None:
        now = w.failover(op["id"])
        steps = [i["step"] for i in now["items"]]
        return now if steps[0] in ("STARTING", "DONE") and steps[1] == "PENDING" else None

    now = w.wait(midway, START_TIMEOUT_S, "the first item switched to B")
    executor = now["executor"]
    print(f"first item {now['items'][0]['step']} after {time.monotonic() - began:.1f} s; "
          f"kill -9 of the executor {executor}")  # fmt: skip
    w.nodes[executor].kill9()
    killed_at = time.monotonic()
    survivor = next(n for n in w.nodes if n != executor)

    done = w.wait(
        lambda: (f := w.failover(op["id"]))["state"] in ("SUCCEEDED", "FAILED") and f,
        START_TIMEOUT_S + 60,
        "the failover to end",
    )
    print(f"failover {done['state']} {time.monotonic() - began:.1f} s after it started "
          f"({time.monotonic() - killed_at:.1f} s after the kill)")  # fmt: skip
    assert done["state"] == "SUCCEEDED", done
    assert done["executor"] == survivor and done["executor_epoch"] > now["executor_epoch"]
    # the dry run listed exactly the items that then ran, in that order
    assert [(i["job"], i["action"]) for i in done["items"]] == [
        (i["job"], i["action"]) for i in dry["items"]
    ]
    for item in done["items"]:
        assert steps_of(item) == [
            "PENDING", "DRAINING", "CHECKPOINT", "SWITCHING", "STARTING", "DONE"
        ], item  # fmt: skip
        job = w.job(item["job"])
        assert job["cluster"] == "B" and job["state"] == "RUNNING" and job["directive"] is None
        runs = w.runs(item["job"])
        on_b = [r for r in runs if r["cluster"] == "B"]
        assert len(on_b) == 1, runs  # no item submitted twice
        assert on_b[0]["id"] == item["target_run_id"] == job["current_run"]["id"]
        assert [r["state"] for r in runs if r["cluster"] == "A"] == ["KILLED"]
        assert_resumed_on_b(w, item["job"], item)
    status = w.drover("failover", "status", str(op["id"]))
    assert f"failover {op['id']}  SUCCEEDED" in status
    assert w.job(next(j for j in w.jobs if j.endswith("-mid")))["cluster"] == "A"
    assert_no_double_run(w)


def test_a_stranded_driver_stops_by_itself_once_superseded(world: World) -> None:
    w = world
    mid = next(j for j in w.jobs if j.endswith("-mid"))
    app_name = w.jobs[mid]
    job = w.job(mid)
    assert job["cluster"] == "A" and job["state"] == "RUNNING" and job["self_fencing"] is True
    stale_run = job["current_run"]
    began = time.monotonic()
    for proxy in w.proxies:  # Drover cannot reach A's REST and UI ports any more
        proxy.cut()
    health = w.wait(
        lambda: (h := w.get("/v1/clusters/A/health"))["state"] == "VOTE_ABNORMAL" and h,
        60,
        "cluster A VOTE_ABNORMAL",
    )
    print(f"A VOTE_ABNORMAL {time.monotonic() - began:.1f} s after the cut: {health['reason']}")
    assert w.checker.apps(app_name, "A"), "the driver on A is alive (the checker sees its app)"

    dry = w.post("/v1/failovers", {"source": "A", "selector": {"jobs": [mid]}, "dry_run": True})
    assert dry["source_reachable"] is False
    (item,) = dry["items"]
    assert item["action"] == "fence", item
    assert item["why"].startswith(
        f"source A unreachable and VOTE_ABNORMAL: will fence run {stale_run['id']}"
    )
    op = w.post(
        "/v1/failovers",
        {"source": "A", "selector": {"jobs": [mid]}, "expected_plan": dry["plan_digest"]},
    )
    fenced = w.wait(
        lambda: (r := run_of(w, mid, stale_run["id"]))["fenced_at"] and r,
        60,
        "the run fenced by its owner",
    )
    assert fenced["id"] == stale_run["id"] and fenced["state"] == "LOST"
    print(f"run {fenced['id']} fenced {time.monotonic() - began:.1f} s after the cut")
    told = w.wait(
        lambda: (r := run_of(w, mid, stale_run["id"]))["fence_superseded_at"] and r,
        60,
        "the stale driver answered 'superseded' at a fence check",
    )
    a_apps = w.wait(
        lambda: (
            (apps := w.checker.apps(app_name, "A"))
            and apps[-1][1] < time.monotonic() - 1.0
            and apps
        ),
        60,
        "the stale application gone from A",
    )
    gone_at = a_apps[-1][1]
    print(f"stale driver answered 'superseded' at {told['fence_superseded_at']}; its application "
          f"left A {gone_at - began:.1f} s after the cut")  # fmt: skip
    done = w.wait(
        lambda: (f := w.failover(op["id"]))["state"] in ("SUCCEEDED", "FAILED") and f,
        START_TIMEOUT_S,
        "the fence failover to end",
    )
    assert done["state"] == "SUCCEEDED", done
    (item,) = done["items"]
    assert steps_of(item) == [
        "PENDING", "DRAINING", "FENCING", "CHECKPOINT", "SWITCHING", "STARTING", "DONE"
    ]  # fmt: skip
    fencing = next(h for h in item["history"] if h["step"] == "CHECKPOINT")
    assert "answered 'superseded'" in fencing["note"], item["history"]
    b_apps = w.checker.apps(app_name, "B")
    assert b_apps and b_apps[0][0] > gone_at, "on B only after the stale driver left A"
    # nobody could kill it: the stale driver ended by itself (exit 0 after "fenced out")
    drivers = w.a.master_state()["completeddrivers"]
    ours = [d for d in drivers if d["id"] == fenced["submission_id"]]
    assert ours and ours[0]["state"] == "FINISHED", ours
    assert_resumed_on_b(w, mid, item)
    print(f"{mid} RUNNING on B {time.monotonic() - began:.1f} s after the cut")
    assert_no_double_run(w)
    for proxy in w.proxies:
        proxy.mend()
