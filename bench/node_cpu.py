"""CPU of a quiet Drover node: CPU seconds per minute of every process of its session, by name.

For each job count asked for (default 0 and 5) the bench starts one real ``drover node run``
(``harness/nodes.py``) on a fresh store (SQLite file by default, a fresh MariaDB database with
``--mysql-url``), a unique namespace on the ZooKeeper of ``--zk-hosts`` (``DROVER_TEST_ZK_HOSTS``
of ``var/services/env``; ``--no-zk`` for a standalone node) and a simulated standalone cluster
(``harness/simcluster.py``, its own process, not measured) as the primary cluster of group
``default``. With jobs, they are seeded desired RUNNING and the bench waits until every one is
RUNNING. Then, after ``--settle`` seconds, it reads the user + system CPU of every live process
of the node's session (the node runs in a session of its own: Ray's GCS, raylet, agents and
workers stay in it) at the start and the end of a ``--window`` of seconds, and prints the
difference in CPU seconds per minute (60 = one core busy), per process and by name.

The node's settings are those the e2e tests give their nodes (reconcile interval 1 s, ZooKeeper
session 4 s by default); everything else is the node's default.

    set -a; . var/services/env; set +a
    flock /tmp/drover-heavy.lock .venv/bin/python -m bench.node_cpu [--jobs 0,5]
        [--window 60] [--settle 15] [--mysql-url URL] [--zk-hosts HOSTS|--no-zk] [--keep-logs]
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from bench.node_rss import (
    add_node_options,
    parse_counts,
    process_name,
    services,
    store_url,
)
from bench.takeover import (
    GROUP,
    bench_workdir,
    count_in_state,
    job_names,
    migrate,
    node_env,
    placeholder_pipeline,
    register,
    seed_jobs,
    simulator,
    zk_namespace,
)
from harness.nodes import NodeProcess, poll
from harness.procs import cpu_seconds, session_pids
from scheduler.core.states import JobState
from scheduler.store.db import Store


@dataclass(frozen=True)
class ProcCpu:
    pid: int
    name: str
    #: CPU seconds per minute of the window (user + system)
    per_minute: float


@dataclass(frozen=True)
class Sample:
    jobs: int
    window: float
    procs: list[ProcCpu]

    @property
    def total(self) -> float:
        return sum(p.per_minute for p in self.procs)

    def by_name(self) -> dict[str, float]:
        named: dict[str, float] = defaultdict(float)
        for p in self.procs:
            named[p.name] += p.per_minute
        return dict(sorted(named.items(), key=lambda item: -item[1]))


def measure_cpu(sid: int, window: float) -> list[ProcCpu]:
    """CPU per minute over ``window`` seconds of each process of session ``sid`` (those that
    started during the window count from 0; those that ended count not at all)."""
    before = {pid: cpu_seconds(pid) for pid in session_pids(sid)}
    started = time.monotonic()
    time.sleep(window)  # not synchronisation: the period being measured
    after = {pid: cpu_seconds(pid) for pid in session_pids(sid)}
    elapsed = time.monotonic() - started
    names = {pid: process_name(pid) for pid in after}
    procs = [
        ProcCpu(pid, names[pid], (spent - before.get(pid, 0.0)) * 60.0 / elapsed)
        for pid, spent in after.items()
    ]
    return sorted(procs, key=lambda p: -p.per_minute)


def run_one(jobs: int, args: argparse.Namespace, workdir: Path) -> Sample:
    rundir = workdir / f"jobs-{jobs}"
    rundir.mkdir()
    with ExitStack() as stack:
        sim = stack.enter_context(simulator(args.app_start_delay))
        database_url = stack.enter_context(store_url(args.mysql_url, rundir))
        migrate(database_url)
        store = Store(database_url)
        stack.callback(store.dispose)
        register(store, sim, rundir)
        namespace = stack.enter_context(zk_namespace(args.zk_hosts)) if args.zk_hosts else ""
        env = node_env(
            database_url, args.zk_hosts, namespace, args.session_timeout, args.reconcile_interval
        )
        if not args.zk_hosts:
            env = {k: v for k, v in env.items() if not k.startswith("DROVER_ZK_")}
        env["DROVER_GROUPS"] = f"{GROUP}:active"
        env["DROVER_DATA_DIR"] = str(rundir / "node")
        node = NodeProcess(f"cpu-{jobs}", env, rundir / "node.log")
        node.start()
        try:
            node.wait_ready()
            if jobs:
                entry = placeholder_pipeline(rundir)
                seed_jobs(store, job_names(jobs), str(entry))
                poll(
                    lambda: count_in_state(store, JobState.RUNNING) >= jobs,
                    timeout=120,
                    interval=0.5,
                    what=f"{jobs} jobs RUNNING",
                )
            time.sleep(args.settle)  # not synchronisation: start-up work dies down
            assert node.proc is not None
            procs = measure_cpu(node.proc.pid, args.window)
        finally:
            if node.proc is not None:
                node.stop()
        return Sample(jobs, args.window, procs)


def print_sample(sample: Sample, verbose: bool) -> None:
    print(
        f"\nnode with {sample.jobs} RUNNING job(s): {sample.total:.2f} CPU s/min over "
        f"{sample.window:.0f} s, {len(sample.procs)} processes"
    )
    if verbose:
        for p in sample.procs:
            print(f"  {p.pid:>7}  {p.name:<34} {p.per_minute:>7.2f}")
    print(f"  {'process (by name)':<43} {'CPU s/min':>9}")
    for name, per_minute in sample.by_name().items():
        print(f"  {name:<43} {per_minute:>9.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", default="0,5", help="comma-separated RUNNING job counts")
    parser.add_argument("--window", type=float, default=60.0, help="measured seconds")
    parser.add_argument("--settle", type=float, default=15.0, help="quiet seconds before")
    parser.add_argument("--reconcile-interval", type=float, default=1.0)
    parser.add_argument("--session-timeout", type=float, default=4.0)
    parser.add_argument("--app-start-delay", type=float, default=0.5)
    parser.add_argument("--verbose", action="store_true", help="every process, not only names")
    add_node_options(parser)
    args, counts = parse_counts(parser, argv, "jobs", 0)
    with bench_workdir("drover-node-cpu-", args.keep_logs) as workdir:
        print(
            f"node CPU bench: jobs {counts}, {services(args)}, reconcile interval "
            f"{args.reconcile_interval} s, settle {args.settle} s, window {args.window} s; "
            f"load average {os.getloadavg()[0]:.1f}; {workdir}"
        )
        samples: list[Sample] = []
        for count in counts:
            sample = run_one(count, args, workdir)
            print_sample(sample, args.verbose)
            samples.append(sample)
        print(f"\n{'jobs':>6} {'CPU s/min':>10}   (load average {os.getloadavg()[0]:.1f})")
        for s in samples:
            print(f"{s.jobs:>6} {s.total:>10.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
