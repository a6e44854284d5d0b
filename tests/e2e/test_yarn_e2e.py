"""Spark on YARN end to end: two Drover node processes (ZooKeeper membership, MariaDB) driving
the real YARN + HDFS test clusters A and B (``HADOOP_CLUSTERS=2``), checkpoints on A's HDFS,
replicas on B's. A checker polls both ResourceManagers every 0.2 s for the whole module and
records any sample in which one job had two RUNNING applications across A and B.

One shared setup (the clusters, the nodes, business ``orders`` bound to YARN queue ``orders``),
then, in order:

1. ``test_start_with_a_crash_after_submit_ends_with_one_application`` (acceptance 1, 5): a
   self-fencing pipeline that names its own application and a plain PySpark pipeline start; the
   very first submission crashes the reconciler right after YARN accepted it (``DROVER_FAULTS=
   after-submit``): the run is adopted by its tags, never submitted twice; each job has exactly
   one application in the ResourceManager, in the business's queue, RUNNING; the self-fencing
   (high priority) job's checkpoint is replicated to B's HDFS, with lag figures through the API;
2. ``test_kill_9_of_the_owner_reattaches_to_the_same_application`` (acceptance 2): the owner of
   both jobs is killed -9; the other node takes them over and re-attaches to the same
   application ids, for the pipeline with its own appName and the plain one alike;
3. ``test_a_kill_across_a_resource_manager_restart_is_confirmed`` (acceptance 3): A's
   ResourceManager is stopped, the plain job is asked to stop (no kill can be confirmed: the
   job goes UNKNOWN, its run stays open), the ResourceManager comes back with recovery and
   brings the application back: it is killed, KILLED confirmed and recorded; the other job's
   application survives the restart (work-preserving recovery), never submitted again;
4. ``test_a_failover_moves_the_job_with_its_hdfs_checkpoint_to_b``: a planned failover of the
   self-fencing job from A to B: killed on A and confirmed, its checkpoint made available under
   B's HDFS root, started on B once, its batch ids continue;
5. ``test_stop_is_a_confirmed_kill`` (acceptance 1);
6. ``test_a_failing_driver_is_restarted_by_the_policy`` (acceptance 1);
7. ``test_az_loss_moves_every_job_to_b_from_its_hdfs_replica`` (acceptance 4): two self-fencing
   jobs RUNNING on A with replicas on B's HDFS; A's ResourceManager, NodeManager (with every
   container) and NameNode + DataNode killed together (SIGKILL); A turns VOTE_ABNORMAL, the
   group's automatic failover (turned on for this test) fences the jobs (the nodes grant 15 s
   fence leases, the product's default is 90 s) and starts them on B from their replicas; their
   batch ids continue. hadoop-a is started again at the end (empty), for whatever runs next.

Timings are printed; nothing is asserted on them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness import http
from harness.nodes import poll, stop_live
from harness.pipelines import batch_files
from scheduler.backends.yarn import run_tag
from tests.support.failovers import automatic_failover, steps_of, wait_all_running
from tests.support.nodes import NodeProcess
from tests.support.world import NodesWorld, az_nodes, zk_node_env
from tests.support.yarn import DoubleRunChecker, YarnCluster

pytestmark = [pytest.mark.e2e, pytest.mark.heavy(minutes=11)]

ROOT = Path(__file__).resolve().parents[2]
SELF_FENCING = ROOT / "tests" / "e2e" / "pipelines" / "batch_ids.py"
PLAIN = ROOT / "pipelines" / "plain_rate_parquet.py"
FAILS_AFTER = ROOT / "tests" / "e2e" / "pipelines" / "fails_after.py"
GROUP = "gy"
SESSION = 2.0
START_TIMEOUT_S = 300.0
STOP_TIMEOUT_S = 120.0
#: a node's start: Ray makes up to 3 attempts of ~50 s each on a starved machine
NODE_READY_S = 300.0
#: the fence lease the nodes grant (the product's default is 90 s): a failover off a lost cluster
#: waits for it to lapse
LEASE_S = 15.0


@dataclass
class World(NodesWorld):
    tmp: Path
    a: YarnCluster
    b: YarnCluster
    nodes: dict[str, NodeProcess]
    checker: DoubleRunChecker
    prefix: str
    once: Path
    jobs: list[str] = field(default_factory=list)

    log_tail_chars = 4000

    def runs(self, name: str) -> list[dict[str, Any]]:
        """The job's runs, oldest first."""
        return list(reversed(self.get(f"/v1/jobs/{name}/runs")["data"]))

    def events(self, name: str) -> list[str]:
        return [e["message"] for e in self.get(f"/v1/jobs/{name}/events", limit=1000)["data"]]

    def put(self, path: str, body: Any) -> Any:
        node = self.alive()
        response = http.put(f"{node.url}{path}", json=body, headers=node.headers(), timeout=10)
        assert response.status_code < 300, response.text
        return response.json()

    def create(self, suffix: str, entrypoint: Path, args: list[str], **extra: Any) -> str:
        name = f"{self.prefix}-{suffix}"
        self.post(
            "/v1/jobs",
            {
                "name": name,
                "group": GROUP,
                "business": "orders",
                "entrypoint": f"file://{entrypoint}",
                "args": args,
                **extra,
            },
        )
        self.jobs.append(name)
        return name

    def wait_running(self, name: str, attempt: int | None = None) -> dict[str, Any]:
        def running() -> dict[str, Any] | None:
            job = self.job(name)
            run = job["current_run"]
            ok = job["state"] == "RUNNING" and run is not None
            return job if ok and (attempt is None or run["attempt"] == attempt) else None

        return self.wait(running, START_TIMEOUT_S, f"{name} RUNNING (attempt {attempt})")

    def apps_of(self, run_id: int, cluster: YarnCluster) -> list[dict[str, Any]]:
        """Every application (any state) the ResourceManager has for one of our runs."""
        return [
            a
            for a in cluster.apps(tag=run_tag(run_id))
            if a["name"].startswith(f"drover:{self.prefix}")
        ]

    def batches(self, name: str) -> dict[int, int]:
        """batch id -> id of the run that committed it (the self-fencing pipeline's output)."""
        return batch_files(self.tmp / "out" / name)


def _mkdir_hdfs(cluster: YarnCluster, path: str) -> None:
    response = http.put(
        f"{cluster.webhdfs_url}/webhdfs/v1{path}",
        params={"op": "MKDIRS", "user.name": "root"},
        timeout=10,
    )
    response.raise_for_status()


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory,
    module_mysql_url: str,
    zk_hosts: str,
    yarn_a: YarnCluster,
    yarn_b: YarnCluster,
) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("yarn")
    prefix = f"y{uuid.uuid4().hex[:8]}"
    once = tmp / "after-submit.once"
    addresses = ",".join(
        f"{c.hdfs_url.removeprefix('hdfs://')}={c.webhdfs_url}" for c in (yarn_a, yarn_b)
    )
    env = zk_node_env(
        tmp,
        module_mysql_url,
        zk_hosts,
        "e2e-yarn",
        DROVER_ZK_SESSION_TIMEOUT=str(SESSION),
        DROVER_RECONCILE_INTERVAL="1",
        DROVER_GROUPS=f"{GROUP}:active",
        DROVER_ARTIFACT_ROOTS=f"{ROOT}/",
        DROVER_HEALTH_PROBE_INTERVAL="1",
        DROVER_HEALTH_PROBE_TIMEOUT="2",
        DROVER_HEALTH_VOTE_FRESHNESS="5",
        DROVER_HEALTH_THRESHOLD_COUNT="1000",
        DROVER_RESTART_MAX_ATTEMPTS="3",
        DROVER_RESTART_VALIDITY_INTERVAL="600",
        DROVER_RESTART_BACKOFF_INITIAL="0.5",
        DROVER_RESTART_BACKOFF_MAX="2",
        DROVER_REPLICATION_INTERVAL="2",
        DROVER_FENCE_LEASE_SECONDS=str(LEASE_S),
        DROVER_WEBHDFS_ADDRESSES=addresses,
        DROVER_FAULTS=f"after-submit:{once}",
    )
    nodes = az_nodes(tmp, env, {"n1": "az-a", "n2": "az-b"})
    checker = DoubleRunChecker([yarn_a, yarn_b])
    w = World(tmp, yarn_a, yarn_b, nodes, checker, prefix, once)
    roots = {c.name: f"/drover-e2e/{prefix}/{c.name}" for c in (yarn_a, yarn_b)}
    with checker.running():
        try:
            began = time.monotonic()
            for node in nodes.values():  # one after the other: two Ray starts at once starve
                node.start()
                node.wait_ready(NODE_READY_S)
            print(f"\n2 nodes ready in {time.monotonic() - began:.1f} s")
            for cluster in (yarn_a, yarn_b):
                _mkdir_hdfs(cluster, roots[cluster.name])
                w.post(
                    "/v1/clusters",
                    {
                        "name": f"yarn-{cluster.name}",
                        "kind": "yarn",
                        "rest_url": cluster.rm_url,
                        "hadoop_conf_dir": cluster.conf_dir,
                        "az": f"az-{cluster.name}",
                        "storage_root": f"{cluster.hdfs_url}{roots[cluster.name]}",
                    },
                )
            w.post(
                "/v1/groups",
                {"name": GROUP, "primary_cluster": "yarn-a", "failover_cluster": "yarn-b"},
            )
            w.put("/v1/quotas/orders", {"yarn_queue": "orders"})
            yield w
        finally:
            _stop_jobs(w)
            stop_live(nodes.values())
            leftovers = []
            for cluster in (yarn_a, yarn_b):
                for app in cluster.apps(live=True):
                    if app["name"].startswith(f"drover:{prefix}"):
                        leftovers.append(f"{cluster.name}: {app['id']} {app['name']}")
                        cluster.kill(app["id"])
    print(f"checker: {checker.samples} samples ({checker.errors} missed), {checker.violations}")
    assert not leftovers, f"left behind by the test (killed now): {leftovers}"
    assert not checker.violations, checker.violations


def _stop_jobs(w: World) -> None:
    if not any(n.alive for n in w.nodes.values()) or not w.jobs:
        return
    try:
        for job in w.jobs:
            if w.job(job)["desired_state"] == "RUNNING":
                w.post(f"/v1/jobs/{job}/stop")
        poll(
            lambda: all(w.job(j)["state"] in ("STOPPED", "FAILED") for j in w.jobs),
            timeout=STOP_TIMEOUT_S,
            interval=0.5,
            what="the test's jobs stopped",
        )
    except Exception as exc:  # noqa: BLE001 - what is left is killed and reported
        print(f"could not stop the jobs through Drover: {exc}")


def test_start_with_a_crash_after_submit_ends_with_one_application(world: World) -> None:
    w = world
    own = w.create(
        "own",
        SELF_FENCING,
        ["--output", str(w.tmp / "out" / f"{w.prefix}-own"), "--app-name", "its-own-name"],
        priority="high",  # replicated to B's HDFS
    )
    plain = w.create("plain", PLAIN, ["--output", str(w.tmp / "out" / f"{w.prefix}-plain")])
    began = time.monotonic()
    for job in (own, plain):
        w.post(f"/v1/jobs/{job}/start")
    w.wait(w.once.exists, START_TIMEOUT_S, "the crash right after a submission")
    crashed_at = time.monotonic() - began
    for job in (own, plain):
        done = w.wait_running(job, attempt=1)
        run = done["current_run"]
        apps = w.apps_of(run["id"], w.a)
        assert [a["id"] for a in apps] == [run["app_id"]], apps  # one application, ever
        assert apps[0]["state"] == "RUNNING" and apps[0]["queue"] == "root.orders"
        assert apps[0]["name"] == run["app_name"] == f"drover:{job}:{run['id']}"
        assert run["submission_id"] == run["app_id"]
        assert not w.apps_of(run["id"], w.b)
    running_at = time.monotonic() - began
    # submissions go out side by side: the crash after the first one may also cut off the record
    # of the other, already accepted; each such run is adopted, none submitted again
    adopted = [j for j in (own, plain) if any(m.startswith("adopted") for m in w.events(j))]
    assert adopted, {j: w.events(j) for j in (own, plain)}
    w.wait(lambda: len(w.batches(own)) >= 2, START_TIMEOUT_S, f"{own}: 2 batches committed")
    # the high-priority job's checkpoint is replicated to B's HDFS; the lag is in the API
    replica = w.wait(
        lambda: (r := w.get(f"/v1/jobs/{own}/replication"))["replica_batch"] is not None and r,
        START_TIMEOUT_S,
        f"{own}: a replica on B",
    )
    assert replica["target_cluster"] == "yarn-b"
    assert replica["location"].startswith(f"{w.b.hdfs_url}/drover-e2e/")
    listing = w.get("/v1/replication")
    assert any(r["job"] == own for r in listing["data"])
    print(
        f"\nboth jobs started; crash after submit at {crashed_at:.1f} s "
        f"({' and '.join(adopted)} adopted), "
        f"both RUNNING at {running_at:.1f} s; replica of {own}: batch "
        f"{replica['replica_batch']} of {replica['source_batch']}, lag "
        f"{replica['lag_batches']} batches / {replica['lag_seconds']} s"
    )


def test_kill_9_of_the_owner_reattaches_to_the_same_application(world: World) -> None:
    w = world
    jobs = [f"{w.prefix}-own", f"{w.prefix}-plain"]
    before = {j: w.job(j) for j in jobs}
    victim = before[jobs[0]]["owner"]
    assert victim in w.nodes
    survivor = next(n for n in w.nodes if n != victim)
    w.nodes[victim].kill9()
    killed_at = time.monotonic()
    w.wait(
        lambda: all(w.nodes[survivor].get(f"/v1/jobs/{j}")["owner"] == survivor for j in jobs),
        60,
        f"{survivor} to own every job",
    )
    taken = time.monotonic() - killed_at
    for job in jobs:
        after = w.wait_running(job)
        assert after["current_run"]["id"] == before[job]["current_run"]["id"]
        assert after["current_run"]["app_id"] == before[job]["current_run"]["app_id"]
        assert len(w.runs(job)) == 1
        run_id = after["current_run"]["id"]
        assert [a["id"] for a in w.apps_of(run_id, w.a)] == [after["current_run"]["app_id"]]
    batches = len(w.batches(jobs[0]))
    w.wait(lambda: len(w.batches(jobs[0])) > batches, START_TIMEOUT_S, "a batch after takeover")
    w.nodes[victim].start()
    w.nodes[victim].wait_ready()
    print(f"\nkill -9 of {victim}: {survivor} owned both jobs {taken:.1f} s later, same apps")


def test_a_kill_across_a_resource_manager_restart_is_confirmed(world: World) -> None:
    w = world
    own, plain = f"{w.prefix}-own", f"{w.prefix}-plain"
    keep = w.job(own)["current_run"]
    stopping = w.job(plain)["current_run"]
    w.a.control("rm/stop")
    stopped_at = time.monotonic()
    try:
        w.post(f"/v1/jobs/{plain}/stop")
        # nobody can confirm a kill while the ResourceManager is down: the job is not stopped
        # (UNKNOWN after a few unanswered polls), its run stays open
        w.wait(lambda: w.job(plain)["state"] == "UNKNOWN", 60, f"{plain} UNKNOWN")
        held = w.job(plain)
        assert held["desired_state"] == "STOPPED"
        assert held["current_run"]["state"] not in ("KILLED", "FINISHED", "FAILED", "LOST")
    finally:
        w.a.control("rm/start")
    restarted_at = time.monotonic()
    recovered = w.wait(
        lambda: next((a for a in w.a.apps() if a["id"] == stopping["app_id"]), None),
        60,
        "the application recovered by the restarted ResourceManager",
    )
    job = w.wait(
        lambda: (j := w.job(plain))["state"] == "STOPPED" and j,
        STOP_TIMEOUT_S,
        f"{plain} STOPPED after the restart",
    )
    confirmed_at = time.monotonic()
    assert job["current_run"]["state"] == "KILLED"
    app = w.a.app(stopping["app_id"])
    assert app["state"] in ("KILLED", "FINISHED", "FAILED") and app["finalStatus"] != "SUCCEEDED"
    assert job["current_run"]["reason"] == "stopped by Drover"  # recorded: the kill confirmed
    assert any("desired state is STOPPED" in m for m in w.events(plain)), w.events(plain)
    # the other job survived the restart on its application (work-preserving recovery)
    after = w.wait_running(own)
    assert after["current_run"]["app_id"] == keep["app_id"]
    assert [a["id"] for a in w.apps_of(keep["id"], w.a)] == [keep["app_id"]]
    print(
        f"\nResourceManager of A down {restarted_at - stopped_at:.1f} s; recovered app "
        f"{recovered['id']} ({recovered['state']}); the pending kill confirmed "
        f"{confirmed_at - restarted_at:.1f} s after the restart ({app['state']}); "
        f"{own} kept {keep['app_id']}"
    )


def test_a_failover_moves_the_job_with_its_hdfs_checkpoint_to_b(world: World) -> None:
    """A planned failover from A (reachable) to B: the application on A is killed and confirmed
    gone, the checkpoint made available under B's HDFS root, the job started on B once; its
    batch ids continue from the checkpoint."""
    w = world
    own = f"{w.prefix}-own"
    w.wait(lambda: len(w.batches(own)) >= 3, START_TIMEOUT_S, f"{own}: 3 batches")
    began = time.monotonic()
    op = w.post(
        "/v1/failovers",
        {"source": "yarn-a", "selector": {"jobs": [own]}, "reason": "YARN failover e2e"},
    )
    done = w.wait(
        lambda: (f := w.get(f"/v1/failovers/{op['id']}"))["state"] in ("SUCCEEDED", "FAILED") and f,
        START_TIMEOUT_S,
        "the failover to end",
    )
    took = time.monotonic() - began
    assert done["state"] == "SUCCEEDED", done
    [item] = done["items"]
    job = w.wait_running(own)
    assert job["cluster"] == "yarn-b"
    run = job["current_run"]
    assert run["id"] == item["target_run_id"]
    assert run["checkpoint_location"].startswith(f"{w.b.hdfs_url}/drover-e2e/")
    assert [a["id"] for a in w.apps_of(run["id"], w.b)] == [run["app_id"]]  # submitted once
    assert not w.a.apps(live=True) or not [
        a for a in w.a.apps(live=True) if a["name"].startswith(f"drover:{own}:")
    ]
    batches = w.wait(
        lambda: (
            (found := w.batches(own))
            and sum(1 for r in found.values() if r == run["id"]) >= 2
            and found
        ),
        START_TIMEOUT_S,
        f"{own} committing batches on B",
    )
    on_b = sorted(i for i, r in batches.items() if r == run["id"])
    before = sorted(i for i, r in batches.items() if r != run["id"])
    assert item["resume_batch"] is not None and on_b[0] == item["resume_batch"], (on_b, item)
    assert before == list(range(0, on_b[0]))
    print(
        f"\nfailover yarn-a -> yarn-b of {own}: SUCCEEDED in {took:.1f} s; batches "
        f"{before[0]}..{before[-1]} on A, {on_b[0]}..{on_b[-1]} on B "
        f"(checkpoint from {item['checkpoint_from']} to {item['checkpoint_to']})"
    )


def test_stop_is_a_confirmed_kill(world: World) -> None:
    w = world
    own = f"{w.prefix}-own"
    job = w.job(own)
    run = job["current_run"]
    cluster = w.b if job["cluster"] == "yarn-b" else w.a
    began = time.monotonic()
    w.post(f"/v1/jobs/{own}/stop")
    job = w.wait(
        lambda: (j := w.job(own))["state"] == "STOPPED" and j, STOP_TIMEOUT_S, f"{own} STOPPED"
    )
    took = time.monotonic() - began
    assert job["current_run"]["state"] in ("KILLED", "FINISHED")
    state = cluster.app(run["app_id"])["state"]
    assert state in ("KILLED", "FINISHED")
    assert not [a for a in cluster.apps(live=True) if a["id"] == run["app_id"]]
    print(f"\nstop -> STOPPED with the application {state}: {took:.1f} s")


def test_a_failing_driver_is_restarted_by_the_policy(world: World) -> None:
    w = world
    name = w.create("fails", FAILS_AFTER, ["--after", "25"])
    w.post(f"/v1/jobs/{name}/start")
    w.wait_running(name, attempt=2)
    runs = w.runs(name)
    assert runs[0]["state"] == "FAILED" and runs[0]["reason"], runs[0]
    assert [a["state"] for a in w.apps_of(runs[0]["id"], w.a)] == ["FINISHED"]
    w.post(f"/v1/jobs/{name}/stop")
    w.wait(lambda: w.job(name)["state"] == "STOPPED", STOP_TIMEOUT_S, f"{name} STOPPED")
    print(f"\nfailed run: {runs[0]['reason']!r}")


@pytest.mark.timeout(1200)
def test_az_loss_moves_every_job_to_b_from_its_hdfs_replica(world: World) -> None:
    """A's ResourceManager, NodeManager (with the jobs' containers) and NameNode die together:
    A turns abnormal by the votes, the group's automatic failover moves both jobs to B, each
    resumes from its replica on B's HDFS (A's checkpoints died with A): batch ids continue."""
    w = world
    names = [
        w.create(
            f"az{i}",
            SELF_FENCING,
            ["--output", str(w.tmp / "out" / f"{w.prefix}-az{i}")],
            priority="high",
        )
        for i in (1, 2)
    ]
    began = time.monotonic()
    for name in names:
        w.post(f"/v1/jobs/{name}/start")
    replicas: dict[str, dict[str, Any]] = {}
    try:

        def started_and_replicated() -> bool:
            """RUNNING on A, 2 batches committed, a replica on B of a batch it committed."""
            for name in names:
                job = w.job(name)
                if job["state"] != "RUNNING" or job["cluster"] != "yarn-a":
                    return False
                if len(w.batches(name)) < 2:
                    return False
                replica = w.get(f"/v1/jobs/{name}/replication")
                if replica["replica_batch"] is None:
                    return False
                replicas[name] = replica
            return True

        # two submissions at once, each a spark-submit JVM (80 s each seen at load 50)
        w.wait(started_and_replicated, START_TIMEOUT_S + 180, "both jobs on A, replicated to B")
        print(f"\n{len(names)} jobs RUNNING on A with a replica on B in "
              f"{time.monotonic() - began:.1f} s")  # fmt: skip
        runs_on_a = {n: w.job(n)["current_run"]["id"] for n in names}
        w.put(
            f"/v1/groups/{GROUP}/auto-failover",
            {"enabled": True, "after_seconds": 2, "min_priority": "low"},
        )
        lost_at = time.monotonic()
        killed = w.a.lose()
        at = {n: (r["replica_batch"], r["source_batch"]) for n, r in replicas.items()}
        print(f"A lost: {len(killed)} processes killed; (replica, source) batches {at}")
        w.wait(
            lambda: w.get("/v1/clusters/yarn-a/health")["state"] == "VOTE_ABNORMAL",
            60,
            "yarn-a VOTE_ABNORMAL",
        )
        print(f"yarn-a VOTE_ABNORMAL {time.monotonic() - lost_at:.1f} s after the loss")
        op = automatic_failover(w, "yarn-a", lost_at, set())
        # (the module's other jobs are stopped: moved without a start, if at all)
        assert set(names) <= {i["job"] for i in op["items"]}, op["items"]
        seen = wait_all_running(w, names, "yarn-b", lost_at, LEASE_S + START_TIMEOUT_S)
        print("loss -> RUNNING on B: "
              + ", ".join(f"{n}: {s:.1f} s" for n, s in sorted(seen.items())))  # fmt: skip
        done = w.wait(
            lambda: (
                (f := w.get(f"/v1/failovers/{op['id']}"))["state"] in ("SUCCEEDED", "FAILED") and f
            ),
            60,
            "the automatic failover to end",
        )
        assert done["state"] == "SUCCEEDED", done
        for item in (i for i in done["items"] if i["job"] in names):
            name = item["job"]
            assert item["action"] == "fence", item
            assert steps_of(item)[-4:] == ["CHECKPOINT", "SWITCHING", "STARTING", "DONE"], item
            # A's HDFS is gone: the checkpoint comes from the replica on B's HDFS
            switched = next(h for h in item["history"] if h["step"] == "SWITCHING")
            assert "the source checkpoint cannot be read" in switched["note"], item["history"]
            assert "the replica" in switched["note"], item["history"]
            assert item["checkpoint_to"].startswith(f"{w.b.hdfs_url}/drover-e2e/"), item
            run = w.job(name)["current_run"]
            assert run["id"] == item["target_run_id"]
            assert run["checkpoint_location"].startswith(f"{w.b.hdfs_url}/drover-e2e/")
            assert [a["id"] for a in w.apps_of(run["id"], w.b)] == [run["app_id"]]  # once
            batches = w.wait(
                lambda name=name, run=run: _past_a(w.batches(name), run["id"]),
                START_TIMEOUT_S,
                f"{name} committing batches on B past A's last",
            )
            on_b = sorted(i for i, r in batches.items() if r == run["id"])
            on_a = sorted(i for i, r in batches.items() if r == runs_on_a[name])
            # from its checkpoint: batch ids continue (what A committed after the replica's
            # batch is done again by B: at-least-once, as for any crash)
            assert item["resume_batch"] is not None and on_b[0] == item["resume_batch"] > 0
            assert on_a == list(range(0, on_b[0])), (on_a, on_b)
            assert on_b[0] >= replicas[name]["replica_batch"], (on_b, replicas[name])
            print(f"{name}: batches 0..{on_a[-1]} on A, from {on_b[0]} on B "
                  f"(replica batch {replicas[name]['replica_batch']})")  # fmt: skip
        assert not w.checker.violations, w.checker.violations
    finally:
        w.put(f"/v1/groups/{GROUP}/auto-failover", {"enabled": False})
        if not _alive(w.a):
            restored_at = time.monotonic()
            w.a.restore()
            print(f"hadoop-a restored in {time.monotonic() - restored_at:.1f} s")


def _past_a(found: dict[int, int], run_id: int) -> dict[int, int] | None:
    """The batches once the run on B committed 2 and the newest (every batch A committed past
    the replica's is then done again by B), else None."""
    ours = sum(1 for r in found.values() if r == run_id)
    return found if ours >= 2 and found[max(found)] == run_id else None


def _alive(cluster: YarnCluster) -> bool:
    try:
        return cluster.info().get("haState") == "ACTIVE"
    except httpx.HTTPError:
        return False
