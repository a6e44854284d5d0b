"""An AZ lost or cut off, on real Spark: the jobs move within a bound, never twice.

One world for the module: two private Spark standalone clusters A and B (harness/spark.py; the
shared clusters of the services stay untouched), three Drover node processes (ZooKeeper,
MariaDB) in group ``az`` (primary A, failover B, automatic failover on), self-fencing pipelines
(tests/e2e/pipelines/batch_ids.py) that log which run committed each batch (a commit log per
job), and a checker polling both masters every 0.2 s for two live applications of one job.

Drover reaches each cluster's REST and UI ports through a TCP proxy it can cut; the drivers
reach Drover through one proxy per node (``DROVER_FENCE_URLS``), which can refuse the fence
checks of one cluster's drivers only (their tokens, read from /proc: ``TcpProxy.cut_if``).
Settings are the defaults but for the test's short fence lease (``DROVER_FENCE_LEASE_SECONDS``
= 15, the product's default is 90) and a 5 s quiet period (the way back to NORMAL after a
cluster recovered; it plays no part in a failover).

In order (each test leaves the world as the next one needs it):

1. AZ loss -- A's master, worker and every driver killed at once; the group's automatic
   failover moves every job to B from its checkpoint (batch ids continue) within L + 60 s.
2. Cut off both ways -- A alive, Drover cannot reach A, A's drivers cannot reach Drover: the
   drivers stop committing when their leases lapse (exit 75), the automatic failover starts the
   jobs on B after that; no batch is committed by two runs, no instant with two live
   applications; once the cut heals nothing runs on A.
3. The executor killed -9, then 4. frozen past its session, while the items of one failover
   are in DRAINING, FENCING and CHECKPOINT (held there: ``DROVER_FAULT_HOLDS``): another node
   finishes the failover; the thawed node changes nothing.

Timings are printed (``-s``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness import http
from harness.nodes import stop_live
from harness.overlap import MasterChecker, commits_by_run, double_commits
from harness.spark import PrivateSparkCluster
from harness.tcpproxy import TcpProxy
from pipelines.drover_runtime import read_commit_log
from tests.support.failovers import automatic_failover, running_on, steps_of, wait_all_running
from tests.support.nodes import NodeProcess
from tests.support.world import NodesWorld, az_nodes, port_of, zk_node_env

pytestmark = [pytest.mark.e2e, pytest.mark.heavy(minutes=10)]

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "tests" / "e2e" / "pipelines" / "batch_ids.py"
GROUP = "az"
LEASE_S = 15.0
#: the product's defaults (scheduler/config.py), which the failover path keeps
MARGIN_S = 5.0
EXIT_GRACE_S = 15.0
SESSION_S = 10.0
START_TIMEOUT_S = 360.0
NODES = ("n1", "n2", "n3")


@dataclass
class World(NodesWorld):
    tmp: Path
    clusters: dict[str, PrivateSparkCluster]
    #: Drover -> cluster: "A-rest", "A-ui", "B-rest", "B-ui"
    proxies: dict[str, TcpProxy]
    #: drivers -> Drover, one per node
    fence_proxies: list[TcpProxy]
    nodes: dict[str, NodeProcess]
    checker: MasterChecker
    prefix: str
    jobs: list[str] = field(default_factory=list)
    #: the automatic failovers the tests have looked at already
    seen_ops: set[int] = field(default_factory=set)
    #: failed polls of A allowed: those while A was being killed
    a_failed_at_kill: int = 0

    def commit_log(self, job: str) -> str:
        return str(self.tmp / "commits" / job)

    def last_batch(self, job: str) -> int:
        return max((b for b, _, _ in read_commit_log(self.commit_log(job))), default=-1)

    def holds(self, node: str) -> Path:
        return self.tmp / "holds" / node

    def app(self, job: str) -> str:
        return f"{job}-app"


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory, module_mysql_url: str, zk_hosts: str
) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("azloss")
    (tmp / "commits").mkdir()
    prefix = f"az{uuid.uuid4().hex[:6]}"
    clusters = {
        letter: PrivateSparkCluster(tmp / f"spark-{letter}", cores=8, memory="4g")
        for letter in ("A", "B")
    }
    env = zk_node_env(
        tmp,
        module_mysql_url,
        zk_hosts,
        "e2e-azloss",
        DROVER_GROUPS=f"{GROUP}:active",
        DROVER_ARTIFACT_ROOTS=f"{PIPELINE.parent}/",
        DROVER_FENCE_LEASE_SECONDS=str(LEASE_S),
        DROVER_HEALTH_QUIET_PERIOD="5",
    )
    nodes = az_nodes(tmp, env, {node_id: f"az-{i}" for i, node_id in enumerate(NODES)})
    fence_proxies = [TcpProxy(node.port) for node in nodes.values()]
    for node in nodes.values():
        node.env["DROVER_FENCE_URLS"] = ",".join(p.url for p in fence_proxies)
        node.env["DROVER_FAULT_HOLDS"] = str(tmp / "holds" / node.node_id)
        (tmp / "holds" / node.node_id).mkdir(parents=True)
    proxies: dict[str, TcpProxy] = {}
    checker = MasterChecker({}, set())
    w = World(tmp, clusters, proxies, fence_proxies, nodes, checker, prefix)
    try:
        began = time.monotonic()
        for node in nodes.values():
            node.start()
        for letter, cluster in clusters.items():
            cluster.start()
            proxies[f"{letter}-rest"] = TcpProxy(port_of(cluster.rest_url))
            proxies[f"{letter}-ui"] = TcpProxy(port_of(cluster.ui_url))
            checker.masters[letter] = cluster.ui_url
        for node in nodes.values():
            node.wait_ready()
        print(f"\n3 nodes and 2 private clusters ready in {time.monotonic() - began:.1f} s")
        for letter, cluster in clusters.items():
            w.post(
                "/v1/clusters",
                {
                    "name": letter,
                    "kind": "standalone",
                    "master_url": cluster.master_url,
                    "rest_url": proxies[f"{letter}-rest"].url,
                    "ui_url": proxies[f"{letter}-ui"].url,
                    "az": f"az-{letter.lower()}",
                    "storage_root": (tmp / "storage" / letter).as_uri(),
                },
            )
        w.post("/v1/groups", {"name": GROUP, "primary_cluster": "A", "failover_cluster": "B"})
        # the group's automatic failover: every job, 5 s after A is found abnormal
        node = w.alive()
        response = http.put(
            f"{node.url}/v1/groups/{GROUP}/auto-failover",
            json={"enabled": True, "after_seconds": 5, "min_priority": "low"},
            headers=node.headers(),
            timeout=10,
        )
        assert response.status_code == 200, response.text
        checker.start()
        yield w
    finally:
        checker.stop()
        for proxy in [*proxies.values(), *fence_proxies]:
            proxy.mend()
        for node in nodes.values():
            if node.proc is not None and not node.alive:
                continue
            if node.proc is not None:
                node.thaw()
        stop_live(nodes.values())
        for proxy in [*proxies.values(), *fence_proxies]:
            proxy.close()
        for cluster in clusters.values():
            cluster.kill()  # the jobs' drivers with it: nothing of these clusters outlives them
        print(
            f"checker: {checker.polls} polls ({checker.failed} failed: {checker.last_error}), "
            f"most live at once {checker.most}"
        )


def start_jobs(w: World, suffixes: list[str], batches: int = 3) -> list[str]:
    names = [f"{w.prefix}-{s}" for s in suffixes]
    w.checker.watch(*(w.app(n) for n in names))
    began = time.monotonic()
    for name in names:
        w.post(
            "/v1/jobs",
            {
                "name": name,
                "group": GROUP,
                "priority": "high",
                "entrypoint": f"file://{PIPELINE}",
                "args": [
                    "--output",
                    str(w.tmp / "out" / name),
                    "--app-name",
                    w.app(name),
                    "--commit-log",
                    w.commit_log(name),
                ],  # fmt: skip
                "desired_state": "RUNNING",
            },
        )
        w.jobs.append(name)
    for name in names:
        w.wait(
            lambda name=name: w.job(name)["state"] == "RUNNING" and w.last_batch(name) >= batches,
            START_TIMEOUT_S,
            f"{name} RUNNING on A with {batches + 1} batches committed",
        )
    print(f"{len(names)} jobs RUNNING on A in {time.monotonic() - began:.1f} s")
    return names


def stop(w: World, names: list[str]) -> None:
    for name in names:
        w.post(f"/v1/jobs/{name}/stop")
    w.wait(lambda: all(w.job(n)["state"] == "STOPPED" for n in names), 120, "the jobs stopped")


def assert_no_double_run(w: World, names: list[str]) -> None:
    assert w.checker.polls > 0
    # a poll that failed proves nothing: none may (A's only while it was being killed)
    assert w.checker.failures.get("B", 0) == 0, w.checker.last_error
    assert w.checker.failures.get("A", 0) <= w.a_failed_at_kill, w.checker.last_error
    overlaps = [o for o in w.checker.overlaps if o.name in {w.app(n) for n in names}]
    assert overlaps == [], f"two live applications of one job: {overlaps[:5]}"
    # batch ids are a job's own: each job's commit log on its own
    doubles = {n: d for n in names if (d := double_commits([w.commit_log(n)]))}
    assert doubles == {}, f"batches committed by two runs of one job: {doubles}"


# --------------------------------------------------------------------------- 1. AZ loss


@pytest.mark.timeout(900)
def test_az_loss_moves_every_job_to_b_within_the_lease_plus_a_minute(world: World) -> None:
    w = world
    names = start_jobs(w, ["loss1", "loss2"])
    before = {n: w.last_batch(n) for n in names}
    runs_on_a = {n: w.job(n)["current_run"]["id"] for n in names}
    killed_at = time.monotonic()
    took = w.clusters["A"].kill()  # master, worker, every driver and executor of A
    del w.checker.masters["A"]  # nothing to poll: it is gone (a poll under way may fail)
    print(f"cluster A killed in {took:.2f} s (last batches on A: {before})")
    assert w.clusters["A"].drivers() == []

    op = automatic_failover(w, "A", killed_at, w.seen_ops)
    bound = LEASE_S + 60
    seen = wait_all_running(w, names, "B", killed_at, bound + 60)
    total = max(seen.values())
    print(
        "kill -> RUNNING on B: "
        + ", ".join(f"{n}: {s:.1f} s" for n, s in sorted(seen.items()))
        + f"; all: {total:.1f} s (bound L + 60 = {bound:.0f} s)"
    )
    assert total <= bound, f"not every job RUNNING on B within L + 60 s: {seen}"
    done = w.wait(
        lambda: (f := w.failover(op["id"]))["state"] in ("SUCCEEDED", "FAILED") and f,
        60,
        "the automatic failover to end",
    )
    assert done["state"] == "SUCCEEDED", done
    for item in done["items"]:
        assert item["action"] == "fence", item
        assert steps_of(item) == [
            "PENDING", "DRAINING", "FENCING", "CHECKPOINT", "SWITCHING", "STARTING", "DONE"
        ], item  # fmt: skip
        fenced = next(h for h in item["history"] if h["step"] == "CHECKPOINT")
        assert "fence lease surely lapsed" in fenced["note"], item["history"]
    assert w.checker.failures.get("B", 0) == 0, w.checker.last_error
    # from its checkpoint: batch ids continue on B (a batch A wrote but had not committed when
    # it was killed is done again by B: at-least-once, as for any crash)
    for name in names:
        b_run = str(w.job(name)["current_run"]["id"])
        w.wait(lambda name=name, b_run=b_run: b_run in commits_by_run(w.commit_log(name)),
               START_TIMEOUT_S, f"{name} committing on B")  # fmt: skip
        by_run = commits_by_run(w.commit_log(name))
        on_a, on_b = by_run[str(runs_on_a[name])], by_run[b_run]
        assert on_a == list(range(0, on_a[-1] + 1)), on_a
        assert on_b[0] in (on_a[-1], on_a[-1] + 1), (on_a[-1], on_b[:3])
        print(f"{name}: batches 0..{on_a[-1]} on A, from {on_b[0]} on B")
    assert_no_double_run_apps(w, names)

    # A comes back (empty: its drivers died with it) for the next test; these jobs stop
    w.clusters["A"].start()
    w.wait(lambda: a_master_state(w), 60, "A's master UI answering")
    w.a_failed_at_kill = w.checker.failures.get("A", 0)  # polls of A failed while it was dead
    w.checker.masters["A"] = w.clusters["A"].ui_url
    w.wait(lambda: w.get("/v1/clusters/A/health")["state"] == "NORMAL", 120, "A NORMAL again")
    stop(w, names)


def assert_no_double_run_apps(w: World, names: list[str]) -> None:
    overlaps = [o for o in w.checker.overlaps if o.name in {w.app(n) for n in names}]
    assert overlaps == [], f"two live applications of one job: {overlaps[:5]}"


# --------------------------------------------------------------------------- 2. cut both ways


@pytest.mark.timeout(900)
def test_a_cluster_cut_off_both_ways_moves_after_the_leases_lapse(world: World) -> None:
    w = world
    names = start_jobs(w, ["cut1", "cut2", "cut3"])
    runs_on_a = {n: w.job(n)["current_run"] for n in names}
    a = w.clusters["A"]
    tokens = {d.fencing_token for d in a.drivers()}
    assert len({d.run_id for d in a.drivers()}) == len(names), a.drivers()

    def from_a(head: bytes) -> bool:
        live = tokens | {d.fencing_token for d in a.drivers()}
        return any(t.encode() in head for t in live)

    cut_at = time.monotonic()
    for key in ("A-rest", "A-ui"):
        w.proxies[key].cut()  # Drover cannot reach A
    for proxy in w.fence_proxies:
        proxy.cut_if(from_a)  # A's drivers cannot reach Drover (B's can)
    try:
        _moved_after_the_leases_lapse(w, names, runs_on_a, cut_at)
    finally:  # the next tests need A reachable, whatever failed here
        healed_at = time.monotonic()
        for proxy in [w.proxies["A-rest"], w.proxies["A-ui"], *w.fence_proxies]:
            proxy.mend()

    # the cut heals: nothing of these jobs runs on A, on B each runs once
    w.wait(lambda: w.get("/v1/clusters/A/health")["state"] == "NORMAL", 120, "A NORMAL again")
    state = a_master_state(w)
    assert [x for x in state["activeapps"] if x["name"] in {w.app(n) for n in names}] == []
    assert state["activedrivers"] == [] and a.drivers() == []
    for name in names:
        assert running_on(w, name, "B")
        assert [r["cluster"] for r in w.runs(name)].count("B") == 1
    print(f"healed: A NORMAL {time.monotonic() - healed_at:.1f} s later, nothing of ours on A")
    assert_no_double_run(w, names)


def _moved_after_the_leases_lapse(
    w: World, names: list[str], runs_on_a: dict[str, Any], cut_at: float
) -> None:
    """Test 2 from the cut to the failover's end: the drivers on A stop by themselves when their
    leases lapse, the automatic failover starts the jobs on B, no batch committed twice."""
    op = automatic_failover(w, "A", cut_at, w.seen_ops)
    (plan,) = {i["action"] for i in op["items"]} or {None}
    assert plan == "fence", op["items"]

    # the drivers stop committing when their leases lapse, and exit (A is alive: its master says)
    def gone_from_a() -> dict[str, float] | None:
        out = {}
        for name in names:
            if w.checker.live_now(w.app(name), "A", within=1.5):
                return None
            apps = w.checker.apps(w.app(name), "A")
            out[name] = apps[-1][1] - cut_at if apps else 0.0
        return out

    left = w.wait(gone_from_a, LEASE_S + 60, "A's drivers gone from A by themselves")
    last_commit = {
        n: max(t for b, r, t in read_commit_log(w.commit_log(n)) if r == str(runs_on_a[n]["id"]))
        for n in names
    }
    wall_cut = time.time() - (time.monotonic() - cut_at)
    print(
        "after the cut: last commit on A "
        + ", ".join(f"{n}: {last_commit[n] - wall_cut:+.1f} s" for n in names)
        + "; application gone from A "
        + ", ".join(f"{n}: {s:.1f} s" for n, s in left.items())
    )
    for name in names:
        assert last_commit[name] - wall_cut <= LEASE_S + 2, "committed after its lease lapsed"
    subs = {runs_on_a[n]["submission_id"] for n in names}

    def ended_on_a() -> dict[str, str] | None:
        """A's drivers of these runs as A's master lists them once each has ended."""
        done = {d["id"]: d["state"] for d in a_master_state(w)["completeddrivers"]}
        return done if subs <= done.keys() else None

    ours = w.wait(ended_on_a, 60, "A's master listing the drivers as ended")
    for name in names:
        sub = runs_on_a[name]["submission_id"]
        assert ours.get(sub) == "FAILED", (name, sub, ours)  # it exited (75) by itself
        assert "drover-runtime: lease lapsed:" in driver_output(w, "A", sub), name

    seen = wait_all_running(w, names, "B", cut_at, START_TIMEOUT_S)
    print("cut -> RUNNING on B: " + ", ".join(f"{n}: {s:.1f} s" for n, s in sorted(seen.items())))
    done = w.wait(
        lambda: (f := w.failover(op["id"]))["state"] in ("SUCCEEDED", "FAILED") and f,
        90,
        "the automatic failover to end",
    )
    assert done["state"] == "SUCCEEDED", done
    for name in names:
        b_first = w.checker.apps(w.app(name), "B")
        a_last = w.checker.apps(w.app(name), "A")
        assert b_first and a_last and b_first[0][0] > a_last[-1][1], (name, a_last, b_first)
        b_run = str(w.job(name)["current_run"]["id"])
        w.wait(lambda name=name, b_run=b_run: b_run in commits_by_run(w.commit_log(name)),
               START_TIMEOUT_S, f"{name} committing on B")  # fmt: skip
    assert_no_double_run(w, names)


def a_master_state(w: World) -> dict[str, Any]:
    from harness.overlap import master_state

    return master_state(w.clusters["A"].ui_url)


def driver_output(w: World, letter: str, driver_id: str) -> str:
    """What a driver printed (PythonRunner puts Python's stderr in its stdout)."""
    folder = w.clusters[letter].work_dir / "worker" / driver_id
    out = []
    for kind in ("stdout", "stderr"):
        try:
            out.append((folder / kind).read_text(errors="replace"))
        except OSError:
            pass
    return "\n".join(out)


# --------------------------------------------------------------------------- 3, 4. the executor


def hold(w: World, node: str, step: str, job: str, *, on: bool = True) -> None:
    path = w.holds(node) / f"failover-{step}@{job}"
    if on:
        path.touch()
    else:
        path.unlink(missing_ok=True)


def failover_with_items_held(
    w: World, source: str, names: list[str]
) -> tuple[dict[str, Any], dict[str, str]]:
    """An operator's failover of ``names`` off ``source`` (cut off from Drover, marked abnormal
    by hand), its three items held in DRAINING, FENCING and CHECKPOINT on whichever node
    executes it. Returns the failover as it is then, and job -> step."""
    steps = dict(zip(names, ("draining", "fencing", "checkpoint"), strict=True))
    target = "B" if source == "A" else "A"

    def target_quiet() -> bool:
        """The target is NORMAL with no failed probe left in its window: a cut in an earlier
        test leaves failures there that would turn it abnormal again after its clearing."""
        health = w.get(f"/v1/clusters/{target}/health")
        return health["state"] == "NORMAL" and health["assessment"]["recent_failures"] == 0

    w.wait(target_quiet, START_TIMEOUT_S, f"{target} NORMAL with no recent failed probe")
    for name in names:  # each run has checked in (self-fencing) and committed on the source
        run = str(w.job(name)["current_run"]["id"])
        w.wait(lambda name=name, run=run: run in commits_by_run(w.commit_log(name)),
               START_TIMEOUT_S, f"{name} committing on {source}")  # fmt: skip
    w.post(f"/v1/clusters/{source}/mark-abnormal", {"reason": f"{source} cut off, a drill"})
    for key in (f"{source}-rest", f"{source}-ui"):
        w.proxies[key].cut()
    for node in w.nodes:
        for name, step in steps.items():
            hold(w, node, step, name)
    dry = w.post("/v1/failovers", {"source": source, "selector": {"jobs": names}, "dry_run": True})
    assert [i["action"] for i in dry["items"]] == ["fence"] * 3, dry["items"]
    op = w.post(
        "/v1/failovers",
        {
            "source": source,
            "selector": {"jobs": names},
            "parallelism": 3,
            "reason": "executor drill",
            "expected_plan": dry["plan_digest"],
        },
    )
    want = {name: step.upper() for name, step in steps.items()}

    def in_place() -> dict[str, Any] | None:
        now = w.failover(op["id"])
        at = {i["job"]: i["step"] for i in now["items"]}
        return now if at == want else None

    now = w.wait(in_place, START_TIMEOUT_S, f"items held in {want}")
    return now, steps


def release_holds(w: World, names: list[str], nodes: list[str]) -> None:
    for node in nodes:
        for name in names:
            for step in ("draining", "fencing", "checkpoint"):
                hold(w, node, step, name, on=False)


def finish_and_check(
    w: World, op_id: int, names: list[str], target: str, since: float, old: str, old_epoch: int
) -> dict[str, Any]:
    done = w.wait(
        lambda: (f := w.failover(op_id))["state"] in ("SUCCEEDED", "FAILED") and f,
        START_TIMEOUT_S,
        "the failover to end",
    )
    print(f"failover {op_id} {done['state']} {time.monotonic() - since:.1f} s after the fault, "
          f"executed by {done['executor']} (was {old})")  # fmt: skip
    assert done["state"] == "SUCCEEDED", done
    assert done["executor"] != old and done["executor_epoch"] > old_epoch
    for item in done["items"]:
        assert steps_of(item)[-4:] == ["CHECKPOINT", "SWITCHING", "STARTING", "DONE"], item
    for name in names:
        assert running_on(w, name, target)
        on_target = [r for r in w.runs(name) if r["cluster"] == target and not r["ended_at"]]
        assert len(on_target) == 1, w.runs(name)  # submitted there once
    assert_no_double_run(w, names)
    return done


def mend(w: World, source: str) -> None:
    for key in (f"{source}-rest", f"{source}-ui"):
        w.proxies[key].mend()
    w.post(f"/v1/clusters/{source}/clear", {"reason": "drill over"})


@pytest.mark.timeout(900)
def test_an_executor_killed_in_draining_fencing_and_checkpoint_is_replaced(world: World) -> None:
    w = world
    names = sorted(n for n in w.jobs if "-cut" in n)
    assert all(running_on(w, n, "B") for n in names)
    now, _ = failover_with_items_held(w, "B", names)
    executor, epoch = now["executor"], now["executor_epoch"]
    killed_at = time.monotonic()
    w.nodes[executor].kill9()
    print(f"kill -9 of the executor {executor} with items {[i['step'] for i in now['items']]}")
    release_holds(w, names, [n for n in w.nodes if n != executor])
    finish_and_check(w, now["id"], names, "A", killed_at, executor, epoch)
    release_holds(w, names, [executor])
    mend(w, "B")
    w.nodes[executor].start()
    w.nodes[executor].wait_ready()


@pytest.mark.timeout(900)
def test_an_executor_frozen_past_its_session_is_replaced_and_changes_nothing(
    world: World,
) -> None:
    w = world
    names = sorted(n for n in w.jobs if "-cut" in n)
    assert all(running_on(w, n, "A") for n in names)
    now, _ = failover_with_items_held(w, "A", names)
    executor, epoch = now["executor"], now["executor_epoch"]
    frozen = w.nodes[executor]
    frozen_at = time.monotonic()
    frozen.freeze()
    print(f"SIGSTOP of the executor {executor} with items {[i['step'] for i in now['items']]}")
    try:
        w.wait(
            lambda: w.failover(now["id"])["executor"] != executor,
            SESSION_S + 60,
            "another node executing the failover",
        )
        print(f"taken over {time.monotonic() - frozen_at:.1f} s after the freeze")
        release_holds(w, names, [n for n in w.nodes if n != executor])
        done = finish_and_check(w, now["id"], names, "B", frozen_at, executor, epoch)
        runs = {n: w.runs(n) for n in names}
    finally:
        frozen.thaw()
    thawed_at = time.time()
    release_holds(w, names, [executor])  # its held items are free to go on: they must not

    def rounds_since_thaw() -> bool:
        """The thawed node is a member again and its executor made a round with a claim since."""
        last = frozen.get("/v1/nodes")["actors"]["operations"].get("last_round", {})
        return bool(last.get("at", 0) > thawed_at + 2 and GROUP in last.get("groups", []))

    w.wait(rounds_since_thaw, SESSION_S + 60, "the thawed node's executor at work again")
    after = w.failover(now["id"])
    assert after == done, "the thawed node changed the failover"
    for name in names:
        assert w.runs(name) == runs[name] or _same_runs(w.runs(name), runs[name]), name
        assert running_on(w, name, "B")
        stale = [
            e for e in w.get(f"/v1/jobs/{name}/events", limit=100)["data"]
            if e["node"] == executor and _after(e["at"], thawed_at)
            and f"failover {now['id']}" in e["message"]
        ]  # fmt: skip
        assert stale == [], stale
    assert_no_double_run(w, names)
    mend(w, "A")


def _after(at: str, wall: float) -> bool:
    from datetime import datetime

    return datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp() > wall


def _same_runs(now: list[dict[str, Any]], before: list[dict[str, Any]]) -> bool:
    """The same runs (ids, clusters, submissions); their observed fields may move on."""
    keys = ("id", "cluster", "submission_id", "attempt")
    return [{k: r[k] for k in keys} for r in now] == [{k: r[k] for k in keys} for r in before]
