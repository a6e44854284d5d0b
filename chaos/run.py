"""One bounded chaos run: faults at random against a whole deployment, then the checker.

    python -m chaos.run --duration 120 [--seed 7] [--jobs 24] [--nodes 3] [--bound 90] \\
        [--history var/chaos/history.jsonl] [--workdir DIR]
    python -m chaos.run --spark --duration 600 [--jobs 3] [--lease 15] ...   # real Spark

What it runs (all on loopback, all private to the run, all stopped at the end): a ZooKeeper
server and a MariaDB server of its own (so it may restart and wipe them), two simulated Spark
standalone clusters ``sim-a`` and ``sim-b`` (groups ``ga`` and ``gb``, each the other's failover
cluster), each registered through a TCP proxy that can block its ports for Drover, ``--nodes``
Drover nodes in both groups, and ``--jobs`` jobs desired RUNNING, created through the API.

For ``--duration`` seconds it injects one fault at a time, picked at random from
``chaos.faults.KINDS`` (every kind at least once when the run is long enough: the first ones
go round all kinds in a shuffled order), a few seconds apart, while the operator stops, starts,
restarts and upgrades random jobs and fails a few over between the clusters through the API.
Then every fault has healed (``Quiet``); it waits up
to ``--bound`` seconds for every job the store wants RUNNING to be RUNNING, reads the store's
final word and hands the history to ``chaos.checker``. It prints the summary and exits 1 when
there is a violation (2 when the run itself could not be set up). The history stays in
``--history`` (JSON lines) to be replayed: ``python -m chaos.replay <file>``.

The nodes run with a short session timeout and restart policy made for faults that come
often (``NODE_SETTINGS``); the convergence bound is checked against those.

``--spark`` runs it on real Spark instead (``chaos/realspark.py``): two private standalone
clusters, ``--jobs`` (default 3) self-fencing streams of the sample pipeline, fence leases of
``--lease`` seconds. Faults come in two lanes at once: whole-cluster faults and the others
(``chaos.faults.SPARK_KINDS``: node and service faults, a one-way cut, a driver killed, the node
executing a failover frozen). The whole-cluster faults come in rounds, one a minute: an
``az_loss`` and a ``two_way_cut`` in a shuffled order, 30 s apart, both on one cluster, the
rounds on the clusters in turn; the lane goes on past ``--duration`` (up to 2 minutes) until
there were as many of each as the run has begun minutes, so the rates hold whatever the seed.
Both groups fail over automatically (2 s after their cluster went abnormal), and the operator
moves every ~8 s, 80 % of its moves a failover of jobs from where they run (or a fail-back): a
real job takes 20-60 s to start, and a job restarted more often than that would never commit a
batch. The nodes bound each failover step (``chaos.realspark.node_settings``); the checker
holds every failover to the sum of those bounds plus a margin (``--failover-bound`` overrides
it), and also sees the driver processes on the machine and the jobs' commit logs. The summary
ends with the rates per minute: whole-cluster losses, two-way cuts, failovers and failovers
that moved a job.

Every choice comes from a generator of its own seeded from ``--seed`` (``chaos.faults.seeded``):
the faults' schedule, each fault's parameters and each operator move, so a seed reproduces them.
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

from chaos import deploy, realspark
from chaos.checker import Report, check
from chaos.faults import (
    CLUSTER_KINDS,
    KINDS,
    SPARK_KINDS,
    Operator,
    Stack,
    describe,
    seeded,
    wait_restarted,
)
from chaos.history import Fault, History, Quiet
from chaos.recorder import Recorder
from harness.nodes import poll
from harness.simcluster import sim_process
from harness.tcpproxy import TcpProxy
from scheduler.decisions.operations.auto import CREATED_BY as AUTOMATIC

ROOT = Path(__file__).resolve().parents[1]
ENTRYPOINT = ROOT / "pipelines" / "rate_counter.py"  # never run: the clusters are simulated
CLUSTERS = {"sim-a": ("ga", "sim-b", "az-a"), "sim-b": ("gb", "sim-a", "az-b")}
SESSION_TIMEOUT = 3.0
DEFAULT_JOBS = 24
DEFAULT_BOUND = 90.0
#: seconds a failover may take on simulated clusters (their jobs start at once)
SIM_FAILOVER_BOUND = 180.0
#: how many times a node not ready after the faults is started again before the run gives up
NODE_BOOTS = 3
#: how long the cluster lane of a real-Spark run may go on past the end to meet its quota
CLUSTER_OVERRUN_S = 120.0
NODE_SETTINGS = {
    "DROVER_ZK_SESSION_TIMEOUT": str(SESSION_TIMEOUT),
    "DROVER_RECONCILE_INTERVAL": "1",
    "DROVER_RESTART_MAX_ATTEMPTS": "1000",
    "DROVER_RESTART_BACKOFF_INITIAL": "0.5",
    "DROVER_RESTART_BACKOFF_MAX": "4",
    "DROVER_HEALTH_PROBE_INTERVAL": "2",
    "DROVER_HEALTH_PROBE_TIMEOUT": "1.5",
    "DROVER_HEALTH_QUIET_PERIOD": "6",
}


@contextmanager
def deployment(workdir: Path, nodes: int, jobs: int) -> Iterator[Stack]:
    with ExitStack() as stack:
        zk, db, database_url = deploy.services(stack, workdir)
        sims = {name: stack.enter_context(sim_process(0.5)) for name in CLUSTERS}
        # the nodes reach each cluster through a proxy (REST and UI are one port on a simulator)
        proxies = {
            name: [stack.enter_context(TcpProxy(httpx.URL(sim.url).port or 80))]
            for name, sim in sims.items()
        }
        env = deploy.node_env(workdir, database_url, zk.hosts, NODE_SETTINGS)
        procs = deploy.node_processes(workdir, nodes)
        deploy.start_registered(
            stack,
            workdir,
            procs,
            env,
            {
                name: (sim.master_url, proxies[name][0].url, proxies[name][0].url)
                for name, sim in sims.items()
            },
            CLUSTERS,
        )
        yield Stack(
            workdir=workdir,
            zk=zk,
            db=db,
            database_url=database_url,
            clusters=dict(sims),
            proxies=proxies,
            nodes=procs,
            jobs=[f"chaos-{i:03d}" for i in range(jobs)],
            session_timeout=SESSION_TIMEOUT,
        )


def create_jobs(stack: Stack, recorder: Recorder) -> None:
    first = stack.nodes[0]
    if stack.spark:
        bodies = realspark.job_bodies(stack)
    else:
        groups = [g for g, _, _ in CLUSTERS.values()]
        bodies = [
            {
                "name": name,
                "group": groups[i % len(groups)],
                "entrypoint": str(ENTRYPOINT),
                "priority": ("high", "normal", "low")[i % 3],
                "desired_state": "RUNNING",
            }
            for i, name in enumerate(stack.jobs)
        ]
    for body in bodies:
        first.post("/v1/jobs", body)
        recorder.acked(str(body["name"]), "create", "RUNNING")


def schedule(rng: random.Random, count: int, kinds: list[str] | None = None) -> list[str]:
    """``count`` fault kinds (of ``kinds``, default ``KINDS``): rounds of every kind in a
    shuffled order."""
    names = sorted(kinds or KINDS)
    picked: list[str] = []
    while len(picked) < count:
        round_ = list(names)
        rng.shuffle(round_)
        picked += round_
    return picked[:count]


class Lane(threading.Thread):
    """Faults of ``kinds`` one at a time, a calm moment of ``gap`` seconds before each, until
    ``end`` (monotonic). The schedule and each fault's parameters come from generators seeded
    from ``seed`` and the lane's name. A fault that raises ends the lane (``error``).

    With a ``pace`` the n-th fault starts no earlier than ``n * pace`` seconds after the lane's
    first one (and a calm moment after the one before); with a ``quota`` the lane goes on past
    ``end`` until each kind was injected ``quota`` times (for at most ``overrun`` seconds more):
    the rates a run promises hold whatever the seed and however long the faults took. The
    lane's faults span from ``first`` to ``last`` (wall clock)."""

    def __init__(
        self,
        name: str,
        stack: Stack,
        kinds: dict[str, Callable[[Stack, random.Random], str]],
        seed: int,
        recorder: Recorder,
        end: float,
        started: float,
        gap: tuple[float, float],
        *,
        pace: float = 0.0,
        quota: int = 0,
        overrun: float = 0.0,
    ) -> None:
        super().__init__(name=f"chaos-{name}", daemon=True)
        self.pace = pace
        self.quota = quota
        self.overrun = overrun
        self.first: float | None = None
        self.last: float | None = None
        self.lane = name
        self.stack = stack
        self.kinds = kinds
        self.seed = seed
        self.recorder = recorder
        self.end = end
        self.started = started
        self.gap = gap
        self.injected: Counter[str] = Counter()
        self.error: BaseException | None = None
        self.halt = threading.Event()

    def run(self) -> None:
        calm = seeded(self.seed, f"{self.lane}/schedule")
        kinds = schedule(calm, 1000, list(self.kinds))
        origin: float | None = None
        try:
            for n, kind in enumerate(kinds):
                # a calm moment between two faults, and the pace (the waits are the schedule,
                # not synchronisation)
                pause = calm.uniform(*self.gap)
                if origin is not None and self.pace:
                    pause = max(pause, origin + n * self.pace - time.monotonic())
                if self.halt.wait(pause) or self.done():
                    return
                origin = time.monotonic() if origin is None else origin
                t0 = time.time()
                self.first = t0 if self.first is None else self.first
                target = self.kinds[kind](self.stack, seeded(self.seed, f"{self.lane}/{n}"))
                self.last = time.time()
                self.recorder.add([Fault(t0, kind, target, self.last)])
                self.injected[kind] += 1
                print(
                    f"  {time.monotonic() - self.started:6.1f} s  {kind:<15} {target}",
                    flush=True,
                )
        except BaseException as exc:  # noqa: BLE001 - the run reports it and stops
            self.error = exc

    def done(self) -> bool:
        """Past the end, and every kind injected its quota (or past the overrun too)."""
        now = time.monotonic()
        if now < self.end:
            return False
        met = all(self.injected[kind] >= self.quota for kind in self.kinds)
        return met or now >= self.end + self.overrun


def wait_failovers_ended(stack: Stack, bound: float) -> None:
    """Until no failover is PENDING or RUNNING (or the bound: the checker says which)."""
    import sqlalchemy as sa

    engine = sa.create_engine(stack.database_url, poolclass=sa.NullPool)
    query = sa.text(
        "SELECT COUNT(*) FROM operations WHERE kind = 'failover' "
        "AND state NOT IN ('SUCCEEDED', 'FAILED', 'CANCELLED')"
    )

    def ended() -> bool:
        with engine.connect() as conn:
            return int(conn.execute(query).scalar_one()) == 0

    try:
        poll(ended, timeout=bound, interval=1.0, what="every failover ended")
    except TimeoutError:
        pass  # the checker says which
    finally:
        engine.dispose()


def wait_converged(stack: Stack, recorder: Recorder, since: float, bound: float) -> None:
    """Until every job the store wants RUNNING was seen RUNNING after ``since`` (or the bound)."""
    import sqlalchemy as sa

    engine = sa.create_engine(stack.database_url, poolclass=sa.NullPool)
    query = sa.text("SELECT name FROM jobs WHERE desired_state = 'RUNNING'")

    def converged() -> bool:
        with engine.connect() as conn:
            wanted = list(conn.execute(query).scalars())
        return all(recorder.seen_running(n, since) for n in wanted)

    try:
        poll(converged, timeout=bound, interval=0.5, what="every job RUNNING again")
    except TimeoutError:
        pass  # the checker says which jobs and how late
    finally:
        engine.dispose()


def run(args: argparse.Namespace) -> Report:
    spark = bool(getattr(args, "spark", False))
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="drover-chaos-")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    history_path = Path(args.history)
    history_path.parent.mkdir(parents=True, exist_ok=True)
    history_path.unlink(missing_ok=True)
    lease = float(getattr(args, "lease", realspark.LEASE_S))
    failover_bound = getattr(args, "failover_bound", None) or SIM_FAILOVER_BOUND
    derived = "--failover-bound" if getattr(args, "failover_bound", None) else "simulated"
    if spark and not getattr(args, "failover_bound", None):
        failover_bound, derived = realspark.failover_bound(realspark.node_settings(lease))
    print(
        f"chaos: seed {args.seed}, {args.duration:.0f} s of faults, {args.nodes} nodes, "
        f"{args.jobs} jobs"
        + (f" on real Spark, fence lease {lease:g} s" if spark else "")
        + f"; a failover ends within {failover_bound:g} s ({derived})"
        + f"; work dir {workdir}; history {history_path}",
        flush=True,
    )
    started = time.monotonic()
    deploy = (
        realspark.deployment(workdir, args.nodes, args.jobs, lease)
        if spark
        else deployment(workdir, args.nodes, args.jobs)
    )
    with deploy as stack:
        if spark:
            recorder = Recorder(
                history_path,
                {},
                stack.database_url,
                masters={name: c.ui_url for name, c in stack.spark.items()},
                jobs=stack.jobs,
                drivers=lambda: realspark.driver_processes(stack.spark),
                commit_logs=lambda job: realspark.commit_log(workdir, job),
            ).start()
        else:
            clusters = {name: sim.url for name, sim in stack.clusters.items()}
            recorder = Recorder(history_path, clusters, stack.database_url).start()
        try:
            create_jobs(stack, recorder)
            print(
                f"chaos: deployment up and {args.jobs} jobs created in "
                f"{time.monotonic() - started:.1f} s",
                flush=True,
            )
            operator = Operator(
                stack,
                seeded(args.seed, "operator"),
                recorder,
                seed=args.seed,
                **(
                    {"interval": 8.0, "failover_share": 0.8, "retry_for": 40.0, "move_wait": 20.0}
                    if spark
                    else {}
                ),
            ).start()
            end = time.monotonic() + args.duration
            if spark:
                # one whole-cluster fault of each kind a minute at least: a round of both kinds
                # on one cluster every minute (``Stack.next_lost``), until each came as often as
                # the run has (begun) minutes
                lanes = [
                    Lane(
                        "cluster",
                        stack,
                        CLUSTER_KINDS,
                        args.seed,
                        recorder,
                        end,
                        started,
                        (2, 4),
                        pace=60.0 / len(CLUSTER_KINDS),
                        quota=math.ceil(args.duration / 60),
                        overrun=CLUSTER_OVERRUN_S,
                    ),
                    Lane("faults", stack, SPARK_KINDS, args.seed, recorder, end, started, (3, 8)),
                ]
            else:
                lanes = [Lane("faults", stack, KINDS, args.seed, recorder, end, started, (1, 4))]

            def report_fault(kind: str, target: str, t0: float, t1: float) -> None:
                recorder.add([Fault(t0, kind, target, t1)])
                print(f"  {time.monotonic() - started:6.1f} s  {kind:<15} {target}", flush=True)

            stack.report = report_fault
            for lane in lanes:
                lane.start()
            try:
                while any(lane.is_alive() for lane in lanes):
                    for lane in lanes:
                        lane.join(timeout=1.0 / len(lanes))
                    if any(lane.error is not None for lane in lanes):
                        break
                    for node in stack.nodes:  # what a service manager does for a node that
                        with stack.lock:  # exited by itself (e.g. booting while MariaDB was down)
                            if (
                                node.proc is not None
                                and not node.alive
                                and node.node_id not in stack.held
                            ):
                                print(f"  chaos: node {node.node_id} had exited; restarted")
                                node.kill9()  # what it left behind (its ZooKeeper session)
                                node.start()
            finally:
                for lane in lanes:
                    lane.halt.set()
                for lane in lanes:
                    lane.join(timeout=120)
                operator.stop()
            wait_restarted(stack)  # a cluster lost last may still be starting
            errors = [lane.error for lane in lanes if lane.error is not None]
            errors += stack.restart_errors
            if errors:
                raise RuntimeError(f"a fault failed: {errors[0]!r}") from errors[0]
            injected: Counter[str] = sum((lane.injected for lane in lanes), Counter())
            for node in stack.nodes:  # a node killed last may still be booting
                for attempt in range(NODE_BOOTS):
                    if not node.alive:
                        node.kill9()
                        node.start()
                    try:
                        node.wait_ready()
                        break
                    except TimeoutError:
                        # it gave up booting (Ray not started on a loaded machine): again,
                        # as a service manager would
                        print(f"  chaos: node {node.node_id} not ready; started again")
                        node.kill9()
                        if attempt == NODE_BOOTS - 1:
                            raise
            quiet = time.time()
            recorder.add([Quiet(quiet)])
            print(
                f"chaos: faults over ({describe(dict(injected))}); operator "
                f"{describe(operator.done)} (refused: {describe(operator.refused)}), "
                f"{len(operator.doubtful)} in doubt; waiting up to "
                f"{args.bound:.0f} s for convergence",
                flush=True,
            )
            wait_converged(stack, recorder, quiet, args.bound)
            wait_failovers_ended(stack, failover_bound)
        finally:
            history = recorder.finish(stack.jobs)
    report = check(history, args.bound, failover_bound)
    for op in history.final_operations:
        if op.state != "SUCCEEDED":
            print(f"chaos: failover {op.operation} {op.state}: {op.detail}")
    print(report.summary())
    if spark:
        spans = [(lane.first, lane.last) for lane in lanes if lane.first and lane.last]
        span = max((b for _, b in spans), default=0.0) - min((a for a, _ in spans), default=0.0)
        print(rates(history, max(args.duration, span)))
    print(f"chaos: {time.monotonic() - started:.0f} s in all; history in {history_path}")
    if not args.workdir and report.ok:
        shutil.rmtree(workdir, ignore_errors=True)
    return report


def rates(history: History, seconds: float) -> str:
    """Whole-cluster losses, two-way cuts, failovers (the operator's and automatic ones) and
    failovers that moved a job (an item DONE: RUNNING on the target, or switched there stopped)
    per minute of ``seconds`` (the run's duration, or the span of its faults when longer); and
    whether each is at least one a minute."""
    minutes = seconds / 60
    faults = Counter(f.kind for f in history.faults)
    failovers = [f for f in history.final_operations if f.exists and f.kind == "failover"]
    automatic = [f for f in failovers if f.created_by == AUTOMATIC]
    moved = [f for f in failovers if " -> DONE" in f.detail]
    figures = {
        "az_loss": faults["az_loss"] / minutes,
        "two_way_cut": faults["two_way_cut"] / minutes,
        "failovers": len(failovers) / minutes,
        "failovers that moved a job": len(moved) / minutes,
    }
    short = [name for name, rate in figures.items() if rate < 1.0]
    return (
        f"per minute of {seconds:.0f} s of faults: az_loss {figures['az_loss']:.2f}, "
        f"two_way_cut {figures['two_way_cut']:.2f}, failovers {figures['failovers']:.2f} "
        f"({len(failovers)}: {len(failovers) - len(automatic)} by the operator, "
        f"{len(automatic)} automatic), failovers that moved a job "
        f"{figures['failovers that moved a job']:.2f} ({len(moved)}); "
        + ("each at least 1" if not short else "below 1: " + ", ".join(short))
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--duration", type=float, default=120.0, help="seconds of faults")
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--jobs", type=int, default=DEFAULT_JOBS, help="(real Spark: 3)")
    p.add_argument(
        "--bound", type=float, default=DEFAULT_BOUND, help="convergence bound, s (real Spark: 240)"
    )
    p.add_argument("--history", default="var/chaos/history.jsonl")
    p.add_argument("--workdir", default="", help="keep node logs here (default: a temp dir)")
    p.add_argument("--spark", action="store_true", help="on real Spark standalone clusters")
    p.add_argument("--lease", type=float, default=realspark.LEASE_S, help="fence lease, s")
    p.add_argument(
        "--failover-bound",
        type=float,
        default=0.0,
        help="seconds a failover may take (default: 180; on real Spark the sum of the nodes' "
        "failover step timeouts plus a margin: chaos.realspark.failover_bound)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.spark and args.jobs == DEFAULT_JOBS:
        args.jobs = realspark.DEFAULT_JOBS
    if args.spark and args.bound == DEFAULT_BOUND:
        args.bound = realspark.DEFAULT_BOUND
    if args.duration <= 0 or args.nodes < 2 or args.jobs < 1:
        print("chaos: needs --duration > 0, --nodes >= 2, --jobs >= 1", file=sys.stderr)
        return 2
    try:
        report = run(args)
    except (
        RuntimeError,
        TimeoutError,
        httpx.HTTPError,
        subprocess.CalledProcessError,
        AssertionError,
    ) as exc:
        print(f"chaos: the run could not be carried out: {exc}", file=sys.stderr)
        return 2
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
