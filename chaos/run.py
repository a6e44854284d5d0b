"""One bounded chaos run: faults at random against a whole deployment, then the checker.

    python -m chaos.run --duration 120 [--seed 7] [--jobs 24] [--nodes 3] [--bound 90] \\
        [--history var/chaos/history.jsonl] [--workdir DIR]

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
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

from chaos.checker import Report, check
from chaos.faults import KINDS, Operator, Stack, describe
from chaos.history import Fault, Quiet
from chaos.recorder import Recorder
from harness.mariadb import MariaDbServer
from harness.nodes import DROVER, NodeProcess, free_port, poll
from harness.simcluster import sim_process
from harness.tcpproxy import TcpProxy
from harness.zkserver import ZkServer

ROOT = Path(__file__).resolve().parents[1]
ENTRYPOINT = ROOT / "pipelines" / "rate_counter.py"  # never run: the clusters are simulated
CLUSTERS = {"sim-a": ("ga", "sim-b", "az-a"), "sim-b": ("gb", "sim-a", "az-b")}
SESSION_TIMEOUT = 3.0
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
        zk = ZkServer(free_port(), workdir / "zk")
        stack.callback(zk.close)
        zk.start()
        db = MariaDbServer(free_port(), workdir / "mariadb")
        stack.callback(db.close)
        db.start()
        database_url = db.database("drover")
        sims = {name: stack.enter_context(sim_process(0.5)) for name in CLUSTERS}
        # the nodes reach each cluster through a proxy (REST and UI are one port on a simulator)
        proxies = {
            name: stack.enter_context(TcpProxy(httpx.URL(sim.url).port or 80))
            for name, sim in sims.items()
        }
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(workdir),
            "LC_ALL": "C",
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
            "DROVER_DATABASE_URL": database_url,
            "DROVER_ZK_HOSTS": zk.hosts,
            "DROVER_ZK_NAMESPACE": "/chaos",
            "DROVER_ARTIFACT_ROOTS": f"{ROOT / 'pipelines'}/",
            **NODE_SETTINGS,
        }
        subprocess.run(
            [DROVER, "db", "upgrade"], env=env, check=True, capture_output=True, timeout=120
        )
        groups = ",".join(f"{g}:active" for g, _, _ in CLUSTERS.values())
        procs = [
            NodeProcess(
                f"c{i}",
                {
                    **env,
                    "DROVER_GROUPS": groups,
                    "DROVER_AZ": f"az-{i}",
                    "DROVER_DATA_DIR": str(workdir / f"c{i}"),
                },
                workdir / f"c{i}.log",
            )
            for i in range(1, nodes + 1)
        ]

        def stop_nodes() -> None:
            for node in procs:
                if node.proc is not None and node.alive:
                    node.thaw()
                    node.stop(timeout=30)

        stack.callback(stop_nodes)
        for node in procs:
            node.start()
        for node in procs:
            node.wait_ready()
        first = procs[0]
        for name, sim in sims.items():
            first.post(
                "/v1/clusters",
                {
                    "name": name,
                    "kind": "standalone",
                    "master_url": sim.master_url,
                    "rest_url": proxies[name].url,
                    "ui_url": proxies[name].url,
                    "az": CLUSTERS[name][2],
                    "storage_root": f"file://{workdir / 'storage' / name}",
                },
            )
        for name, (group, failover, _) in CLUSTERS.items():
            first.post(
                "/v1/groups",
                {"name": group, "primary_cluster": name, "failover_cluster": failover},
            )
        names = [f"chaos-{i:03d}" for i in range(jobs)]
        yield Stack(
            workdir=workdir,
            zk=zk,
            db=db,
            database_url=database_url,
            clusters=dict(sims),
            proxies=proxies,
            nodes=procs,
            jobs=names,
            session_timeout=SESSION_TIMEOUT,
        )


def create_jobs(stack: Stack, recorder: Recorder) -> None:
    first = stack.nodes[0]
    groups = [g for g, _, _ in CLUSTERS.values()]
    for i, name in enumerate(stack.jobs):
        first.post(
            "/v1/jobs",
            {
                "name": name,
                "group": groups[i % len(groups)],
                "entrypoint": str(ENTRYPOINT),
                "priority": ("high", "normal", "low")[i % 3],
                "desired_state": "RUNNING",
            },
        )
        recorder.acked(name, "create", "RUNNING")


def schedule(rng: random.Random, count: int) -> list[str]:
    """``count`` fault kinds: rounds of every kind in a shuffled order."""
    kinds: list[str] = []
    while len(kinds) < count:
        round_ = sorted(KINDS)
        rng.shuffle(round_)
        kinds += round_
    return kinds[:count]


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
    rng = random.Random(args.seed)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="drover-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    history_path = Path(args.history)
    history_path.parent.mkdir(parents=True, exist_ok=True)
    history_path.unlink(missing_ok=True)
    print(
        f"chaos: seed {args.seed}, {args.duration:.0f} s of faults, {args.nodes} nodes, "
        f"{args.jobs} jobs; work dir {workdir}; history {history_path}",
        flush=True,
    )
    started = time.monotonic()
    with deployment(workdir, args.nodes, args.jobs) as stack:
        clusters = {name: sim.url for name, sim in stack.clusters.items()}
        recorder = Recorder(history_path, clusters, stack.database_url).start()
        try:
            create_jobs(stack, recorder)
            print(
                f"chaos: deployment up and {args.jobs} jobs created in "
                f"{time.monotonic() - started:.1f} s",
                flush=True,
            )
            operator = Operator(stack, rng, recorder).start()
            end = time.monotonic() + args.duration
            kinds = schedule(rng, 1000)
            injected: Counter[str] = Counter()
            try:
                while time.monotonic() < end:
                    time.sleep(rng.uniform(1, 4))  # a calm moment between two faults
                    for node in stack.nodes:  # what a service manager does for a node that
                        with stack.lock:  # exited by itself (e.g. booting while MariaDB was down)
                            if node.proc is not None and not node.alive:
                                print(f"  chaos: node {node.node_id} had exited; restarted")
                                node.start()
                    kind = kinds[sum(injected.values())]
                    t0 = time.time()
                    target = KINDS[kind](stack, rng)
                    recorder.add([Fault(t0, kind, target, time.time())])
                    injected[kind] += 1
                    print(f"  {time.monotonic() - started:6.1f} s  {kind:<15} {target}", flush=True)
            finally:
                operator.stop()
            for node in stack.nodes:  # a node killed last may still be booting
                if not node.alive:
                    node.start()
                node.wait_ready()
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
        finally:
            history = recorder.finish(stack.jobs)
    report = check(history, args.bound)
    for op in history.final_operations:
        if op.state != "SUCCEEDED":
            print(f"chaos: failover {op.operation} {op.state}: {op.detail}")
    print(report.summary())
    print(f"chaos: {time.monotonic() - started:.0f} s in all; history in {history_path}")
    if not args.workdir and report.ok:
        shutil.rmtree(workdir, ignore_errors=True)
    return report


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--duration", type=float, default=120.0, help="seconds of faults")
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--jobs", type=int, default=24)
    p.add_argument("--bound", type=float, default=90.0, help="convergence bound, seconds")
    p.add_argument("--history", default="var/chaos/history.jsonl")
    p.add_argument("--workdir", default="", help="keep node logs here (default: a temp dir)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.duration <= 0 or args.nodes < 2 or args.jobs < 1:
        print("chaos: needs --duration > 0, --nodes >= 2, --jobs >= 1", file=sys.stderr)
        return 2
    try:
        report = run(args)
    except (RuntimeError, httpx.HTTPError, subprocess.CalledProcessError, AssertionError) as exc:
        print(f"chaos: the run could not be carried out: {exc}", file=sys.stderr)
        return 2
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
