"""Memory of an idle Drover node: every process of its session, RSS, PSS and USS, and ready time.

For each group count asked for (default 1 and 50) the bench starts one real ``drover node run``
(``harness/nodes.py``) on a fresh store (SQLite file by default, a fresh MariaDB database with
``--mysql-url``) and, when ``--zk-hosts`` is given (``DROVER_TEST_ZK_HOSTS`` of
``var/services/env``), a unique ZooKeeper namespace. The node manages that many groups
(``DROVER_GROUPS``; the groups exist in the store, on the ``local`` cluster). Measured:

- *ready*: seconds from the process start to the first ``200`` of ``/readyz``;
- after ``--settle`` seconds idle (Ray kills surplus idle workers after a while): every live
  process of the node's session (the node is started in a session of its own; Ray's GCS, raylet,
  agents and workers stay in it), with its RSS (``VmRSS``), PSS (shared pages divided among the
  processes mapping them: the fair share, and what adds up) and USS (private pages only), from
  psutil's ``memory_full_info`` (``/proc/<pid>/status`` and ``smaps_rollup``).

RSS counts every shared page (Python's libraries, Ray's ``_raylet.so``) in every process, so the
RSS total overstates the node's real cost; the PSS total is what the node adds to the machine.

    set -a; . var/services/env; set +a
    flock /tmp/drover-heavy.lock .venv/bin/python -m bench.node_rss [--groups 1,50]
        [--mysql-url URL] [--zk-hosts HOSTS|--no-zk] [--settle 15] [--keep-logs]
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

from bench.takeover import bench_workdir, fresh_database, migrate, zk_namespace
from harness.nodes import NodeProcess
from harness.procs import command_line, session_pids
from scheduler.config import Settings
from scheduler.store import catalog as catalog_store
from scheduler.store.bootstrap import LOCAL_CLUSTER, ensure_defaults
from scheduler.store.db import Store

MIB = 1024 * 1024


@dataclass(frozen=True)
class ProcMemory:
    pid: int
    name: str
    rss: int
    pss: int
    uss: int


@dataclass(frozen=True)
class Sample:
    groups: int
    ready: float
    procs: list[ProcMemory]

    @property
    def rss(self) -> int:
        return sum(p.rss for p in self.procs)

    @property
    def pss(self) -> int:
        return sum(p.pss for p in self.procs)

    @property
    def uss(self) -> int:
        return sum(p.uss for p in self.procs)


def process_name(pid: int) -> str:
    """What the process is: ``ray::Actor``, ``raylet``, ``gcs_server`` or the Python script."""
    argv = command_line(pid)
    if not argv:
        return "?"
    if argv[0].startswith("ray::"):
        return argv[0].split()[0].split(".")[0]  # ray::Actor.method: the actor
    first = Path(argv[0]).name
    if first.startswith("python"):
        script = next((a for a in argv[1:] if not a.startswith("-")), "")
        if script.endswith("runtime_env/agent/main.py"):
            return "runtime_env_agent"
        if script.endswith("dashboard/agent.py"):
            return "dashboard_agent"
        if Path(script).name == "drover":
            return "drover node run (API, driver)"
        return Path(script).name or first
    return first


def memory_of(pid: int) -> ProcMemory | None:
    try:
        full = psutil.Process(pid).memory_full_info()  # RSS, PSS and USS (smaps_rollup)
    except (psutil.Error, OSError):
        return None  # gone, or not ours to read
    if not full.rss:
        return None  # a kernel thread
    return ProcMemory(pid, process_name(pid), full.rss, getattr(full, "pss", 0), full.uss)


def measure_session(sid: int) -> list[ProcMemory]:
    found = (memory_of(pid) for pid in session_pids(sid))
    return sorted((m for m in found if m is not None), key=lambda m: -m.rss)


@contextmanager
def store_url(mysql_url: str, workdir: Path) -> Iterator[str]:
    if mysql_url:
        with fresh_database(mysql_url) as url:
            yield url
    else:
        yield f"sqlite:///{workdir / 'drover.db'}"


def group_names(count: int) -> list[str]:
    """``default`` (the node's own default group) and ``g002`` ... up to ``count`` groups."""
    return ["default"] + [f"g{i:03d}" for i in range(2, count + 1)]


def seed_groups(database_url: str, data_dir: Path, names: list[str]) -> None:
    store = Store(database_url)
    try:
        ensure_defaults(store, Settings(database_url=database_url, data_dir=data_dir))
        with store.transaction() as session:
            for name in names:
                if name != "default":
                    catalog_store.create_group(session, name, primary_cluster=LOCAL_CLUSTER)
    finally:
        store.dispose()


def run_one(groups: int, args: argparse.Namespace, workdir: Path) -> Sample:
    rundir = workdir / f"groups-{groups}"
    rundir.mkdir()
    with ExitStack() as stack:
        database_url = stack.enter_context(store_url(args.mysql_url, rundir))
        migrate(database_url)
        names = group_names(groups)
        seed_groups(database_url, rundir / "node", names)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("DROVER_")},
            "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
            "DROVER_DATABASE_URL": database_url,
            "DROVER_DATA_DIR": str(rundir / "node"),
            "DROVER_GROUPS": ",".join(f"{g}:active" for g in names),
        }
        if args.zk_hosts:
            env["DROVER_ZK_HOSTS"] = args.zk_hosts
            env["DROVER_ZK_NAMESPACE"] = stack.enter_context(zk_namespace(args.zk_hosts))
        node = NodeProcess(f"rss-{groups}", env, rundir / "node.log")
        started = time.monotonic()
        node.start()
        try:
            node.wait_ready()
            ready = time.monotonic() - started
            time.sleep(args.settle)  # not synchronisation: the idle period being measured
            assert node.proc is not None
            procs = measure_session(node.proc.pid)
        finally:
            if node.proc is not None:
                node.stop()
        return Sample(groups, ready, procs)


def print_sample(sample: Sample) -> None:
    print(
        f"\nnode in {sample.groups} group(s): ready after {sample.ready:.1f} s, "
        f"{len(sample.procs)} processes"
    )
    print(f"  {'pid':>7}  {'process':<34} {'RSS MiB':>8} {'PSS MiB':>8} {'USS MiB':>8}")
    for p in sample.procs:
        print(
            f"  {p.pid:>7}  {p.name:<34} {p.rss / MIB:>8.1f} {p.pss / MIB:>8.1f} "
            f"{p.uss / MIB:>8.1f}"
        )
    print(
        f"  {'':>7}  {'total':<34} {sample.rss / MIB:>8.1f} {sample.pss / MIB:>8.1f} "
        f"{sample.uss / MIB:>8.1f}"
    )


def print_summary(samples: list[Sample]) -> None:
    heads = ("groups", "procs", "ready s", "RSS MiB", "PSS MiB", "USS MiB")
    print("\n" + " ".join(f"{h:>8}" for h in heads))
    for s in samples:
        print(
            f"{s.groups:>8} {len(s.procs):>8} {s.ready:>8.1f} {s.rss / MIB:>8.1f} "
            f"{s.pss / MIB:>8.1f} {s.uss / MIB:>8.1f}"
        )


def add_node_options(parser: argparse.ArgumentParser) -> None:
    """The options of a one-node bench: its store, its ZooKeeper, and keeping its logs."""
    parser.add_argument("--mysql-url", default="", help="MariaDB server (default: SQLite)")
    parser.add_argument("--zk-hosts", default=os.environ.get("DROVER_TEST_ZK_HOSTS", ""))
    parser.add_argument("--no-zk", action="store_true", help="standalone node, no ZooKeeper")
    parser.add_argument("--keep-logs", action="store_true", help="keep the work dir and logs")


def parse_counts(
    parser: argparse.ArgumentParser, argv: list[str] | None, option: str, low: int
) -> tuple[argparse.Namespace, list[int]]:
    """The arguments (``--no-zk`` applied) and the comma-separated counts of ``option``, each at
    least ``low``."""
    args = parser.parse_args(argv)
    if args.no_zk:
        args.zk_hosts = ""
    counts = [int(c) for c in getattr(args, option).split(",") if c.strip()]
    if not counts or min(counts) < low:
        parser.error(f"--{option} needs counts >= {low}")
    return args, counts


def services(args: argparse.Namespace) -> str:
    """The store and the ZooKeeper a bench node uses, in words."""
    store = "MariaDB" if args.mysql_url else "SQLite"
    return f"{store}, ZooKeeper {args.zk_hosts}" if args.zk_hosts else f"{store}, no ZooKeeper"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", default="1,50", help="comma-separated group counts")
    parser.add_argument("--settle", type=float, default=15.0, help="idle seconds before measuring")
    add_node_options(parser)
    args, counts = parse_counts(parser, argv, "groups", 1)
    with bench_workdir("drover-node-rss-", args.keep_logs) as workdir:
        print(
            f"node RSS bench: groups {counts}, {services(args)}, settle {args.settle} s; {workdir}"
        )
        samples: list[Sample] = []
        for count in counts:
            sample = run_one(count, args, workdir)
            print_sample(sample)
            samples.append(sample)
        print_summary(samples)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
