"""Failover of 1,000 jobs between two simulated Spark clusters: time in total and per job.

Starts everything it needs and removes it at the end (also on Ctrl-C or an error): two simulated
standalone clusters A and B (``harness/simcluster.py``, each its own process) registered as
normal ``standalone`` clusters (group ``default``: primary A, failover B), a fresh MariaDB
database on the server of ``DROVER_TEST_MYSQL_URL``, a ZooKeeper namespace on
``DROVER_TEST_ZK_HOSTS``, N ``drover node run`` processes (default 2).

M jobs (desired RUNNING, seeded in bulk) are left to the nodes until all are RUNNING on A, with
a checkpoint each under A's storage root (a small directory of offsets and commits). Then the
failover of every job from A to B goes through the API: the dry run (timed: the plan of M
jobs), the execution with ``--parallelism`` items under way at once, followed until it ends.

Figures (wall clock):

- the plan: dry-run answer time;
- total: from the POST to SUCCEEDED, and per job (jobs/s);
- per item: from its start (DRAINING) to DONE -- p50, p95, max -- and the time items spent in
  each step (the drain is the owner's kill and its confirmation, the checkpoint the copy, the
  start the owner's submission and the application's start on B);
- safety: creates on B (one per job), live applications per job across A and B at the end
  (never two; a poller samples both simulators during the failover too), runs on B per job.

First, a smaller step counts the executor's **store trips per failover item** on the happy path
(:func:`measure_trips`): ``--trips-jobs`` jobs (kill, checkpoint, switch, start) failed over by
an executor and a reconciler running in this process, on their own simulators and database,
the executor's transactions and statements counted on its own engine (its checkpoint I/O's
included); a round every ``DROVER_FAILOVER_INTERVAL`` like the nodes'. ``--trips-jobs 0``
skips it.

    set -a; . var/services/env; set +a
    .venv/bin/python -m bench.failover [--jobs 1000] [--nodes 2] [--parallelism 200]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from bench.takeover import (
    bench_nodes,
    bench_workdir,
    create_jobs,
    fresh_database,
    fresh_services,
    job_names,
    migrate,
    node_env,
    parse_with_services,
    placeholder_pipeline,
    seed_jobs,
    simulator,
    start_nodes,
)
from harness.nodes import NodeProcess, poll
from harness.pipelines import batch_files
from harness.pollers import Poller
from harness.procs import terminate_like_interrupt
from harness.spark import kill_drover_apps
from scheduler.backends.registry import BackendRegistry
from scheduler.config import Settings
from scheduler.core.backend import app_name_for
from scheduler.core.ownership import Claim, Fence
from scheduler.core.states import JobState
from scheduler.decisions import storage
from scheduler.decisions.catalog import ClusterSpec
from scheduler.decisions.operations import failover as fo
from scheduler.decisions.planning import RestartPolicy
from scheduler.loops.operations import Executor
from scheduler.loops.reconciler import Reconciler
from scheduler.loops.replication import ReplicaCheckpoints
from scheduler.store import catalog as catalog_store
from scheduler.store import jobs as jobs_store
from scheduler.store import operations as ops_store
from scheduler.store.db import Store
from scheduler.store.ledger import SqlLedger
from scheduler.store.models import Job, Run
from scheduler.store.operations_ledger import SqlOperationsLedger

GROUP = "default"


def register(store: Store, sims: dict[str, Any], workdir: Path) -> None:
    with store.transaction() as session:
        for name, sim in sims.items():
            spec = ClusterSpec(
                kind="standalone",
                storage_root=storage.normalise_root(str(workdir / "checkpoints" / name)),
                master_url=sim.master_url,
                rest_url=sim.url,
                ui_url=sim.url,
                az=f"az-{name.lower()}",
                cloud="local",
            )
            catalog_store.create_cluster(session, name, spec)
        catalog_store.ensure_group(session, GROUP, primary_cluster="A", failover_cluster="B")
        group = catalog_store.load_group(session, GROUP)
        group.primary_cluster, group.failover_cluster = "A", "B"


def checkpoints(workdir: Path, names: list[str]) -> None:
    """A small checkpoint per job under A's root (what a failover copies)."""
    for name in names:
        root = workdir / "checkpoints" / "A" / name / "checkpoint"
        for sub in ("offsets", "commits"):
            (root / sub).mkdir(parents=True, exist_ok=True)
            for n in range(3):
                (root / sub / str(n)).write_text(f"{sub} {n}\n")
        (root / "metadata").write_text('{"id": "bench"}\n')


def running_on(store: Store, cluster: str) -> int:
    with store.session() as session:
        return int(
            session.scalar(
                sa.select(sa.func.count())
                .select_from(Job)
                .where(Job.state == JobState.RUNNING.value, Job.cluster_name == cluster)
            )
            or 0
        )


def runs_per_job_on(store: Store, cluster: str) -> Counter[int]:
    with store.session() as session:
        rows = session.execute(
            sa.select(Run.job_id, sa.func.count())
            .where(Run.cluster_name == cluster)
            .group_by(Run.job_id)
        )
        return Counter({int(job): int(n) for job, n in rows})


class DoubleRunPoller(Poller):
    """Samples the live applications of every cluster every ``interval`` seconds: the jobs seen
    with two at once (never expected). ``live``: the job of each live application, across the
    clusters (a job twice: two live applications); by default those of the simulators
    ``sims``."""

    stop_timeout = 30.0  # a look at a simulator of 1,000 applications may take seconds

    def __init__(
        self,
        sims: dict[str, Any],
        live: Callable[[], list[str]] | None = None,
        interval: float = 0.5,
    ) -> None:
        super().__init__(interval)
        self.sims = sims
        self.live = live or self._sim_jobs
        self.doubles: set[str] = set()

    @property
    def samples(self) -> int:
        """The looks that answered."""
        return self.polls

    def _sim_jobs(self) -> list[str]:
        apps = [n for sim in self.sims.values() for n in sim.live_apps().values()]
        return [n.split(":")[1] for n in apps if n.startswith("drover:")]

    def poll(self) -> None:
        jobs = Counter(self.live())
        self.doubles.update(j for j, n in jobs.items() if n > 1)


def _seconds(a: str | None, b: str | None) -> float | None:
    if a is None or b is None:
        return None
    return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()


def step_times(item: dict[str, Any]) -> dict[str, float]:
    """Seconds the item spent in each step (from entering it to entering the next)."""
    out: dict[str, float] = {}
    history = [h for i, h in enumerate(item["history"])
               if i == 0 or h["step"] != item["history"][i - 1]["step"]]  # fmt: skip
    for here, after in zip(history, history[1:], strict=False):
        spent = _seconds(here["at"], after["at"])
        if spent is not None:
            out[here["step"]] = out.get(here["step"], 0.0) + spent
    return out


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=200)
    parser.add_argument("--session-timeout", type=float, default=4.0)
    parser.add_argument("--reconcile-interval", type=float, default=1.0)
    parser.add_argument("--app-start-delay", type=float, default=0.5)
    parser.add_argument("--timeout", type=float, default=0.0, help="per phase (0: by size)")
    parser.add_argument("--keep-logs", action="store_true")
    parser.add_argument(
        "--trips-jobs", type=int, default=50, help="jobs of the store-trip count (0: skip it)"
    )
    args: argparse.Namespace = parse_with_services(parser, argv)
    return args


def measure_sim(args: argparse.Namespace) -> dict[str, Any]:
    """The failover of ``args.jobs`` jobs between two simulated clusters; its figures."""
    phase_timeout = args.timeout or 120.0 + args.jobs * 0.5
    with bench_workdir("drover-failover-", args.keep_logs) as workdir:
        nodes: list[NodeProcess] = []
        print(
            f"failover bench: {args.nodes} nodes, {args.jobs} jobs, "
            f"parallelism {args.parallelism}, reconcile interval {args.reconcile_interval} s; "
            f"work dir {workdir}"
        )
        with (
            simulator(args.app_start_delay) as sim_a,
            simulator(args.app_start_delay) as sim_b,
            fresh_services(args.mysql_url, args.zk_hosts) as (database_url, namespace),
        ):
            sims = {"A": sim_a, "B": sim_b}
            store = Store(database_url)
            try:
                register(store, sims, workdir)
                entry = placeholder_pipeline(workdir)
                env = node_env(
                    database_url,
                    args.zk_hosts,
                    namespace,
                    args.session_timeout,
                    args.reconcile_interval,
                    DROVER_FAILOVER_INTERVAL="0.5",
                    DROVER_ARTIFACT_ROOTS=f"{workdir}/",
                )
                nodes.extend(bench_nodes(workdir, env, [f"{GROUP}:active"] * args.nodes))
                started = time.monotonic()
                start_nodes(nodes)
                print(f"{args.nodes} nodes ready in {time.monotonic() - started:.1f} s")

                names = job_names(args.jobs)
                seed_jobs(store, names, str(entry))
                with store.transaction() as session:  # seeded jobs name no cluster: A
                    session.execute(sa.update(Job).values(priority="high"))
                checkpoints(workdir, names)
                t = time.monotonic()
                poll(
                    lambda: running_on(store, "A") >= args.jobs,
                    timeout=phase_timeout,
                    interval=0.5,
                    what=f"{args.jobs} jobs RUNNING on A",
                )
                print(f"{args.jobs} jobs RUNNING on A after {time.monotonic() - t:.1f} s")
                api = nodes[0]
                body = {"source": "A", "selector": {"all": True}}

                t = time.monotonic()
                dry = api.post("/v1/failovers", {**body, "dry_run": True}, timeout=120)
                planned = time.monotonic() - t
                print(
                    f"dry run: {len(dry['items'])} items planned in {planned:.2f} s "
                    f"({dict(dry['counts'])}, source reachable {dry['source_reachable']})"
                )
                with DoubleRunPoller(sims) as poller:
                    began = time.monotonic()
                    op = api.post(
                        "/v1/failovers",
                        {
                            **body,
                            "parallelism": args.parallelism,
                            "expected_plan": dry["plan_digest"],
                            "reason": "bench",
                        },
                        timeout=120,
                    )
                    created = time.monotonic() - began
                    last: dict[str, Any] = {}

                    def ended() -> bool:
                        nonlocal last
                        last = api.get(f"/v1/failovers/{op['id']}", timeout=60)
                        return last["state"] in ("SUCCEEDED", "FAILED", "CANCELLED")

                    try:
                        poll(ended, timeout=phase_timeout, interval=1.0, what="the failover")
                    except TimeoutError:  # a bounded bench: how far it got is the figure
                        print(f"the failover did not end within {phase_timeout:.0f} s")
                    total = time.monotonic() - began
                print(
                    f"failover {op['id']} {last['state']} in {total:.1f} s "
                    f"(stored in {created:.2f} s): {last['counts']}"
                )
                print(
                    f"  {args.jobs / total:.1f} jobs/s; "
                    f"{1000 * total / args.jobs:.0f} ms per job of the whole "
                    f"(parallelism {args.parallelism})"
                )
                durations = [
                    s
                    for i in last["items"]
                    if (s := _seconds(i["started_at"], i["finished_at"])) is not None
                ]
                if durations:
                    print(
                        f"  per item, start to DONE: p50 {pct(durations, 0.5):.1f} s, "
                        f"p95 {pct(durations, 0.95):.1f} s, max {max(durations):.1f} s, "
                        f"mean {statistics.fmean(durations):.1f} s"
                    )
                per_step: dict[str, list[float]] = {}
                for item in last["items"]:
                    for step, spent in step_times(item).items():
                        per_step.setdefault(step, []).append(spent)
                for step in ("PENDING", "DRAINING", "CHECKPOINT", "SWITCHING", "STARTING"):
                    values = per_step.get(step, [])
                    if values:
                        print(
                            f"  in {step:<10} p50 {pct(values, 0.5):6.2f} s  "
                            f"p95 {pct(values, 0.95):6.2f} s  max {max(values):6.2f} s"
                        )
                on_b = runs_per_job_on(store, "B")
                creates_b = sim_b.stats()["creates"]
                with store.session() as session:
                    jobs_b = jobs_store.list_jobs(session, cluster="B", limit=1)[1]
                print(
                    f"safety: {creates_b} creates on B for {args.jobs} jobs, runs on B per job "
                    f"{dict(Counter(on_b.values()))}, {jobs_b} jobs on B, "
                    f"{len(poller.doubles)} jobs seen with two live apps in {poller.samples} "
                    f"samples of both clusters ({poller.errors} missed)"
                )
                ended_ok = last["state"] == "SUCCEEDED"
                return {
                    "jobs": args.jobs,
                    "succeeded": ended_ok,
                    "state": last["state"],
                    "items_done": sum(1 for i in last["items"] if i["step"] == "DONE"),
                    "plan_s": planned,
                    "total_s": total if ended_ok else None,
                    "waited_s": total,
                    "per_job_ms": 1000 * total / args.jobs if ended_ok else None,
                    "item_p50_s": pct(durations, 0.5),
                    "item_p95_s": pct(durations, 0.95),
                    "item_max_s": max(durations) if durations else None,
                    "creates_on_b": creates_b,
                    "double_runs": len(poller.doubles),
                }
            finally:
                # the nodes go before their database and ZooKeeper namespace do
                for node in nodes:
                    if node.proc is not None and node.alive:
                        node.stop()
                store.dispose()


# -- store trips per failover item ------------------------------------------------------------

#: the nodes' executor interval in this bench (``DROVER_FAILOVER_INTERVAL``)
FAILOVER_INTERVAL = 0.5


class TripCounter:
    """Transactions (BEGIN ... COMMIT/ROLLBACK: one trip to the store and back, whatever it
    holds) and statements on one engine, from when it is attached."""

    def __init__(self, engine: sa.Engine) -> None:
        self.transactions = 0
        self.statements = 0
        self._lock = threading.Lock()
        sa.event.listen(engine, "begin", self._begin)
        sa.event.listen(engine, "before_cursor_execute", self._statement)

    def _begin(self, *_args: object) -> None:
        with self._lock:
            self.transactions += 1

    def _statement(self, *_args: object) -> None:
        with self._lock:
            self.statements += 1

    def read(self) -> tuple[int, int]:
        with self._lock:
            return self.transactions, self.statements


def _trips_executor(store: Store, settings: Settings, parallelism: int) -> Executor:
    return Executor(
        SqlOperationsLedger(store, node_id=settings.node_id),
        node_id=settings.node_id,
        timing=settings.failover_timing,
        checkpoints=ReplicaCheckpoints(store),
        parallelism=parallelism,
    )


def measure_trips(args: argparse.Namespace) -> dict[str, Any]:
    """The executor's store trips per failover item on the happy path: ``args.trips_jobs`` jobs
    RUNNING on simulated cluster A (a checkpoint each) failed over to B at once (kill, confirm,
    checkpoint, switch, start), an executor round every :data:`FAILOVER_INTERVAL` seconds and a
    reconcile tick after each, both in this process on their own stores: only the executor's
    engine is counted (its checkpoint I/O's trips included, the failover's creation not)."""
    jobs = args.trips_jobs
    workdir = Path(tempfile.mkdtemp(prefix="drover-failover-trips-"))
    try:
        with (
            simulator(args.app_start_delay) as sim_a,
            simulator(args.app_start_delay) as sim_b,
            fresh_database(args.mysql_url) as database_url,
        ):
            migrate(database_url)
            stores = [Store(database_url) for _ in range(3)]
            setup, owner_store, executor_store = stores
            settings = Settings(
                node_id="trips",
                data_dir=workdir / "node",
                database_url=database_url,
                artifact_roots=f"{workdir}/",
            )
            backends = BackendRegistry(settings)
            claim = Claim(GROUP, Fence(settings.node_id, 1), 0, 1)
            reconciler = Reconciler(
                SqlLedger(owner_store, node_id=settings.node_id, app_name_for=app_name_for),
                backends,
                node_id=settings.node_id,
                group=GROUP,
                claim=lambda: claim,
                policy=RestartPolicy(),
            )
            executor = _trips_executor(executor_store, settings, jobs)
            try:
                register(setup, {"A": sim_a, "B": sim_b}, workdir)
                entry = placeholder_pipeline(workdir)
                names = job_names(jobs)
                seed_jobs(setup, names, str(entry))
                with setup.transaction() as session:
                    session.execute(sa.update(Job).values(priority="high"))
                checkpoints(workdir, names)

                def running() -> bool:
                    reconciler.tick()
                    return running_on(setup, "A") >= jobs

                poll(running, timeout=120, interval=0.2, what=f"{jobs} jobs RUNNING on A")
                op = executor.create_failover(
                    fo.Request("A", None, fo.Selector(all=True)),
                    created_by="bench",
                    reason="store trips",
                    source_reachable=True,
                    parallelism=jobs,
                )
                counter = TripCounter(executor_store.engine)
                per_round: list[int] = []
                deadline = time.monotonic() + 120 + jobs
                while True:
                    began = time.monotonic()
                    before = counter.read()[0]
                    executor.round({GROUP: claim})
                    per_round.append(counter.read()[0] - before)
                    reconciler.tick()
                    with setup.session() as session:
                        final = ops_store.get_operation(session, op.id)
                    if final.state.is_final or time.monotonic() > deadline:
                        break
                    time.sleep(max(0.0, FAILOVER_INTERVAL - (time.monotonic() - began)))
                transactions, statements = counter.read()
            finally:
                executor.close()
                reconciler.close()
                backends.close()
                for store in stores:
                    store.dispose()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    done = sum(1 for i in final.items if i.step == "DONE")
    print(
        f"store trips per failover item: {transactions / jobs:.1f} transactions "
        f"({statements / jobs:.1f} statements): the executor's {transactions} transactions and "
        f"{statements} statements for the failover of {jobs} jobs ({final.state}, {done} DONE) "
        f"in {len(per_round)} rounds"
    )
    return {
        "trips_jobs": jobs,
        "trips_state": final.state.value,
        "trips_per_item": transactions / jobs,
        "statements_per_item": statements / jobs,
        "trips_rounds": len(per_round),
    }


# -- real Spark: a few jobs between two standalone clusters ---------------------------------------

REAL_PIPELINE = Path(__file__).resolve().parents[1] / "tests" / "e2e" / "pipelines" / "batch_ids.py"
#: not ``default``: a node creates that group itself at start (on its local cluster)
REAL_GROUP = "bench-fo"


def request_failover(
    api: NodeProcess, source: str, parallelism: int
) -> tuple[dict[str, Any], float]:
    """The failover of every job on ``source`` through ``api``: its plan asked for (a dry run),
    then that plan carried out; the operation created and ``time.monotonic()`` of its request."""
    body = {"source": source, "selector": {"all": True}}
    dry = api.post("/v1/failovers", {**body, "dry_run": True}, timeout=60)
    began = time.monotonic()
    op = api.post(
        "/v1/failovers",
        {
            **body,
            "parallelism": parallelism,
            "expected_plan": dry["plan_digest"],
            "reason": "bench",
        },
        timeout=60,
    )
    return op, began


def stop_jobs(api: NodeProcess, names: list[str], timeout: float) -> None:
    """Ask Drover to stop ``names`` and wait until each has ended; what cannot be stopped is
    reported (the caller kills what is left on the clusters)."""
    try:
        for name in names:
            try:
                api.post(f"/v1/jobs/{name}/stop")
            except (AssertionError, httpx.HTTPError):
                pass
        poll(
            lambda: all(
                api.get(f"/v1/jobs/{n}")["state"] in ("STOPPED", "FAILED", "FINISHED")
                for n in names
            ),
            timeout=timeout,
            interval=0.5,
            what="the bench's jobs stopped",
        )
    except Exception as exc:  # noqa: BLE001 - leftovers are killed by the caller
        print(f"could not stop the jobs through Drover: {exc}")


def measure_real(
    mysql_url: str,
    zk_hosts: str,
    clusters: dict[str, dict[str, str]],
    jobs: int = 3,
    start_timeout: float = 240.0,
) -> dict[str, Any]:
    """``jobs`` real self-fencing streams (``tests/e2e/pipelines/batch_ids.py``) RUNNING on
    standalone cluster A with 2 batches committed each, then the failover of all of them to B
    through the API (all items at once): the whole, per item (DRAINING to DONE), and per job until
    its first batch committed on B (resumed from its checkpoint). ``clusters``: ``A`` and ``B``,
    each ``{"master", "rest", "ui"}``."""
    workdir = Path(tempfile.mkdtemp(prefix="drover-failover-real-"))
    prefix = f"bf{os.urandom(4).hex()}"
    names = [f"{prefix}-{i}" for i in range(1, jobs + 1)]
    nodes: list[NodeProcess] = []
    ok = False
    try:
        with fresh_services(mysql_url, zk_hosts) as (database_url, namespace):
            env = node_env(
                database_url,
                zk_hosts,
                namespace,
                "2",
                "1",
                DROVER_FAILOVER_INTERVAL="0.5",
                DROVER_ARTIFACT_ROOTS=f"{REAL_PIPELINE.parent}/",
            )
            nodes.extend(bench_nodes(workdir, env, [f"{REAL_GROUP}:active"] * 2))
            start_nodes(nodes)
            api = nodes[0]
            try:
                for letter in ("A", "B"):
                    c = clusters[letter]
                    api.post(
                        "/v1/clusters",
                        {
                            "name": letter,
                            "kind": "standalone",
                            "master_url": c["master"],
                            "rest_url": c["rest"],
                            "ui_url": c["ui"],
                            "az": f"az-{letter.lower()}",
                            "storage_root": (workdir / "storage" / letter).as_uri(),
                        },
                    )
                api.post(
                    "/v1/groups",
                    {"name": REAL_GROUP, "primary_cluster": "A", "failover_cluster": "B"},
                )
                began = time.monotonic()
                create_jobs(
                    api,
                    names,
                    REAL_GROUP,
                    f"file://{REAL_PIPELINE}",
                    lambda name: [
                        "--output",
                        str(workdir / "out" / name),
                        "--app-name",
                        f"{name}-app",
                    ],
                    priority="high",
                )
                poll(
                    lambda: all(
                        api.get(f"/v1/jobs/{n}")["state"] == "RUNNING"
                        and len(batch_files(workdir / "out" / n)) >= 2
                        for n in names
                    ),
                    timeout=start_timeout,
                    interval=0.5,
                    what=f"{jobs} real jobs RUNNING on A with 2 batches each",
                )
                on_a = time.monotonic() - began
                print(f"{jobs} real jobs RUNNING on A with 2 batches each after {on_a:.1f} s")
                op, began = request_failover(api, "A", jobs)
                resumed: dict[str, float] = {}
                last: dict[str, Any] = {}

                def done() -> bool:
                    nonlocal last
                    last = api.get(f"/v1/failovers/{op['id']}", timeout=30)
                    for item in last["items"]:
                        target = item.get("target_run_id")
                        if item["job"] in resumed or target is None:
                            continue
                        if target in batch_files(workdir / "out" / item["job"]).values():
                            resumed[item["job"]] = time.monotonic() - began
                    ended = last["state"] in ("SUCCEEDED", "FAILED", "CANCELLED")
                    return ended and (last["state"] != "SUCCEEDED" or len(resumed) == jobs)

                poll(done, timeout=start_timeout + 120, interval=0.5, what="the real failover")
                total = time.monotonic() - began
                items = [
                    s
                    for i in last["items"]
                    if (s := _seconds(i["started_at"], i["finished_at"])) is not None
                ]
                print(
                    f"real failover {last['state']} in {total:.1f} s; items {items}; "
                    f"first batch on B after {resumed}"
                )
                ok = last["state"] == "SUCCEEDED"
                return {
                    "jobs": jobs,
                    "succeeded": ok,
                    "start_on_a_s": on_a,
                    "total_s": total,
                    "per_job_s": total / jobs,
                    "item_p50_s": pct(items, 0.5),
                    "item_max_s": max(items) if items else float("nan"),
                    "resumed_on_b_max_s": max(resumed.values()) if resumed else float("nan"),
                }
            finally:
                stop_jobs(api, names, timeout=90)
                for node in nodes:
                    if node.alive:
                        node.stop()
                left = [
                    f"{c['master']} {name}"
                    for c in clusters.values()
                    for name in kill_drover_apps(c["rest"], c["master"], c["ui"], prefix)
                ]
                if left:
                    print(f"killed applications left behind: {left}")
    finally:
        for node in nodes:
            if node.proc is not None and node.alive:
                node.kill9()
        if not ok:
            print(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    terminate_like_interrupt()
    try:
        trips = measure_trips(args) if args.trips_jobs > 0 else {}
        figures = measure_sim(args)
    except KeyboardInterrupt:
        print("interrupted")
        return 130
    trips_ok = trips.get("trips_state", "SUCCEEDED") == "SUCCEEDED"
    return 0 if figures["succeeded"] and not figures["double_runs"] and trips_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
