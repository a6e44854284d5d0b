"""Takeover times of a Drover deployment: N node processes, M jobs on a simulated Spark cluster.

Starts everything it needs and removes it at the end (also on Ctrl-C or an error):

- the simulated standalone cluster (``harness/simcluster.py``, own process) registered as a normal
  ``standalone`` cluster: nodes talk to it through the real REST backend;
- a fresh MariaDB database on the server of ``DROVER_TEST_MYSQL_URL`` (``drover db upgrade``),
  dropped at the end;
- a unique namespace on the ZooKeeper of ``DROVER_TEST_ZK_HOSTS``, deleted at the end;
- N ``drover node run`` processes (default 3, all ``default:active``).

Then M jobs (desired RUNNING, bulk-inserted in the store) are left to the nodes to submit, and
once every job is RUNNING:

(a) kill -9 one node (every process of its session). Measured from the kill: *detected* (every
    survivor's ``GET /v1/groups/default`` no longer lists it), *owned* (no job has it as owner
    in the store), *balanced* (every job is owned by ``crc32(name) % len(pool)`` of the new
    pool), *reconciled* (every survivor finished a complete reconcile tick under the new epoch:
    ``epoch_reconciled`` of its ``/v1/nodes`` actors; that tick claimed the orphans and then
    looked at every job it owns);
(b) restart that node: ready, then balanced again; then SIGTERM one node: the same figures from
    the signal (the issue wants hand-over within 1 s);
(c) Spark applications restarted during all of it: new creates and kills on the simulator, live
    application ids that changed, and new rows in the runs table (all must be 0).

Times are wall-clock seconds, also as multiples of the ZooKeeper session timeout; the pollers
run every ``--poll`` seconds (their resolution).

    set -a; . var/services/env; set +a
    .venv/bin/python -m bench.takeover [--nodes 3] [--jobs 1000] [--session-timeout 2]
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url

from harness.nodes import DROVER, NodeProcess, poll
from harness.procs import terminate_like_interrupt
from harness.simcluster import SimProcess, sim_process
from scheduler.core.clock import utcnow
from scheduler.core.errors import StoreError
from scheduler.core.ownership import Member, owner_of, pool_of
from scheduler.core.states import DesiredState, JobState
from scheduler.decisions import storage
from scheduler.decisions.catalog import ClusterSpec
from scheduler.store import catalog as catalog_store
from scheduler.store import inspection, ledger
from scheduler.store import jobs as jobs_store
from scheduler.store.db import Store
from scheduler.store.models import Job

GROUP = "default"
CLUSTER = "sim"
SEED_CHUNK = 1000
PIPELINE = "# never runs: the simulated cluster only pretends to\n"


# -- services -----------------------------------------------------------------------------------


def _server_engine(url: str) -> sa.Engine:
    return sa.create_engine(
        make_url(url), isolation_level="AUTOCOMMIT", poolclass=sa.NullPool, pool_pre_ping=True
    )


@contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new utf8mb4 database on the server of ``server_url``, dropped at the end."""
    server = _server_engine(server_url)
    name = f"drover_takeover_{secrets.token_hex(4)}"
    with server.connect() as conn:
        conn.execute(sa.text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4"))
    url: URL = server.url.set(database=name, query={"charset": "utf8mb4"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with server.connect() as conn:
            ids = conn.execute(
                sa.text(
                    "SELECT id FROM information_schema.processlist"
                    " WHERE db = :db AND id <> CONNECTION_ID()"
                ),
                {"db": name},
            ).scalars()
            for conn_id in list(ids):
                conn.execute(sa.text(f"KILL CONNECTION {int(conn_id)}"))
            conn.execute(sa.text("SET SESSION lock_wait_timeout = 30"))
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{name}`"))
        server.dispose()


@contextmanager
def zk_namespace(hosts: str) -> Iterator[str]:
    """A unique ZooKeeper namespace, deleted (recursively) at the end."""
    from kazoo.client import KazooClient

    namespace = f"/drover-takeover-{secrets.token_hex(4)}"
    try:
        yield namespace
    finally:
        client = KazooClient(hosts=hosts, timeout=5.0)
        try:
            client.start(timeout=10)
            client.delete(namespace, recursive=True)
        except Exception as exc:  # noqa: BLE001 - cleanup reports, never masks the result
            print(f"warning: could not delete ZooKeeper namespace {namespace}: {exc}")
        finally:
            client.stop()
            client.close()


@contextmanager
def bench_workdir(prefix: str, keep: bool) -> Iterator[Path]:
    """A fresh work directory (node logs, checkpoints), removed at the end unless ``keep``;
    SIGTERM stops the bench like Ctrl-C meanwhile."""
    terminate_like_interrupt()
    workdir = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield workdir
    finally:
        if keep:
            print(f"logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def fresh_services(mysql_url: str, zk_hosts: str) -> Iterator[tuple[str, str]]:
    """A fresh database on the server of ``mysql_url``, migrated, and a ZooKeeper namespace on
    ``zk_hosts``: (database URL, namespace), both removed at the end."""
    with fresh_database(mysql_url) as database_url, zk_namespace(zk_hosts) as namespace:
        migrate(database_url)
        yield database_url, namespace


Simulator = SimProcess  # the name the benches use
simulator = sim_process


# -- store --------------------------------------------------------------------------------------


def migrate(database_url: str) -> None:
    env = {**os.environ, "DROVER_DATABASE_URL": database_url}
    subprocess.run([DROVER, "db", "upgrade"], env=env, check=True, capture_output=True)


def placeholder_pipeline(workdir: Path) -> Path:
    """``workdir/pipeline.py``: the bench jobs' entry point, which a simulated cluster never
    runs."""
    entry = workdir / "pipeline.py"
    entry.write_text(PIPELINE)
    return entry


def register(store: Store, sim: Simulator, workdir: Path) -> None:
    """The simulator as standalone cluster ``sim``, primary cluster of group ``default``."""
    root = storage.normalise_root(str(workdir / "checkpoints" / CLUSTER))
    spec = ClusterSpec(
        kind="standalone",
        storage_root=root,
        master_url=sim.master_url,
        rest_url=sim.url,
        ui_url=sim.url,
        az="az-sim",
        cloud="local",
    )
    with store.transaction() as session:
        catalog_store.create_cluster(session, CLUSTER, spec)
        catalog_store.create_group(session, GROUP, primary_cluster=CLUSTER)


def node_env(
    database_url: str,
    zk_hosts: str,
    namespace: str,
    session_timeout: float | str,
    reconcile_interval: float | str,
    **settings: str,
) -> dict[str, str]:
    """The environment a bench node starts with: this process's without its ``DROVER_``
    settings, the store, the ZooKeeper namespace and timing given, and ``settings`` (by their
    ``DROVER_`` names)."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("DROVER_")},
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "DROVER_DATABASE_URL": database_url,
        "DROVER_ZK_HOSTS": zk_hosts,
        "DROVER_ZK_NAMESPACE": namespace,
        "DROVER_ZK_SESSION_TIMEOUT": str(session_timeout),
        "DROVER_RECONCILE_INTERVAL": str(reconcile_interval),
        **settings,
    }


def bench_nodes(workdir: Path, env: dict[str, str], groups: list[str]) -> list[NodeProcess]:
    """``node-1``, ``node-2``, ...: one per entry of ``groups`` (its ``DROVER_GROUPS``), each in
    AZ ``az-<i>`` with its data directory and log under ``workdir``; not started."""
    return [
        NodeProcess(
            f"node-{i}",
            {
                **env,
                "DROVER_GROUPS": node_groups,
                "DROVER_DATA_DIR": str(workdir / f"node-{i}"),
                "DROVER_AZ": f"az-{i}",
            },
            workdir / f"node-{i}.log",
        )
        for i, node_groups in enumerate(groups, start=1)
    ]


def start_nodes(nodes: list[NodeProcess]) -> None:
    """Start every node, then wait until each is ready (they boot in parallel)."""
    for node in nodes:
        node.start()
    for node in nodes:
        node.wait_ready()


def parse_with_services(parser: argparse.ArgumentParser, argv: list[str] | None) -> Any:
    """``argv`` parsed by ``parser`` with ``--mysql-url`` and ``--zk-hosts`` (the shared test
    services by default); an error unless both are known."""
    parser.add_argument("--mysql-url", default=os.environ.get("DROVER_TEST_MYSQL_URL", ""))
    parser.add_argument("--zk-hosts", default=os.environ.get("DROVER_TEST_ZK_HOSTS", ""))
    args = parser.parse_args(argv)
    if not args.mysql_url or not args.zk_hosts:
        parser.error("needs DROVER_TEST_MYSQL_URL and DROVER_TEST_ZK_HOSTS (var/services/env)")
    return args


def job_names(count: int) -> list[str]:
    return [f"bench-{i:05d}" for i in range(count)]


def create_jobs(
    api: NodeProcess,
    names: list[str],
    group: str,
    entrypoint: str,
    args_of: Callable[[str], list[str]],
    **fields: Any,
) -> None:
    """Create each job of ``names`` through ``api``'s API, desired RUNNING in ``group``: the
    pipeline ``entrypoint`` with the arguments ``args_of(name)``, and ``fields`` (priority...)."""
    for name in names:
        api.post(
            "/v1/jobs",
            {
                "name": name,
                "group": group,
                "entrypoint": entrypoint,
                "args": args_of(name),
                "desired_state": "RUNNING",
                **fields,
            },
        )


def job_row(name: str, entrypoint: str, **fields: Any) -> dict[str, Any]:
    """A ``jobs`` row for a bench job in group ``GROUP`` (team and business ``bench``, desired
    RUNNING, generation 0), with ``fields`` (state, owner, times, ...) over it."""
    return {
        "name": name,
        "group_name": GROUP,
        "team": "bench",
        "business": "bench",
        "priority": "normal",
        "entrypoint": entrypoint,
        "args": [],
        "conf": {},
        "checkpoint_location": "",
        "desired_state": DesiredState.RUNNING.value,
        "generation": 0,
        **fields,
    }


def seed_jobs(store: Store, names: list[str], entrypoint: str) -> None:
    """Insert the jobs (desired RUNNING, QUEUED, no owner) in bulk, 1,000 rows a statement.

    Benchmark set-up only: the API's create path validates and audits one job at a time.
    """
    now = utcnow()
    rows = [
        job_row(
            name,
            entrypoint,
            state=JobState.QUEUED.value,
            state_reason="seeded by bench.takeover",
            attempts_reset_at=now - timedelta(hours=1),
            owner_epoch=0,
            version=1,
            created_at=now,
            updated_at=now,
        )
        for name in names
    ]
    with store.transaction() as session:
        for start in range(0, len(rows), SEED_CHUNK):
            session.execute(sa.insert(Job), rows[start : start + SEED_CHUNK])


def count_in_state(store: Store, state: JobState) -> int:
    with store.session() as session:
        return jobs_store.list_jobs(session, state=state, group=GROUP, limit=1)[1]


def per_owner(store: Store) -> dict[str | None, int]:
    with store.session() as session:
        return ledger.jobs_per_owner(session, GROUP)


def run_count(store: Store) -> int:
    with store.session() as session:
        return inspection.table_counts(session)["runs"]


def expected_owners(names: list[str], members: list[tuple[str, str]]) -> dict[str | None, int]:
    pool = pool_of(Member(node_id, role) for node_id, role in members)
    return dict(Counter(owner_of(name, pool) for name in names))


# -- measurements -------------------------------------------------------------------------------


@dataclass
class Departure:
    """Times (s after the event) until a node's departure was handled by the others."""

    what: str
    node: str
    jobs_before: int
    detected: float | None = None
    epoch: int | None = None
    owned: float | None = None
    balanced: float | None = None
    reconciled: float | None = None
    #: per survivor: seconds of its first complete tick under the new epoch, jobs it looked at
    ticks: dict[str, tuple[float, int, int]] = field(default_factory=dict)
    exited: float | None = None


def group_view(node: NodeProcess) -> dict[str, Any]:
    view: dict[str, Any] = node.get(f"/v1/groups/{GROUP}", timeout=5)
    return view


def reconciler_status(node: NodeProcess) -> dict[str, Any]:
    body = node.get("/v1/nodes", timeout=5)
    status: dict[str, Any] = body["actors"]["reconcilers"].get(GROUP, {})
    return status


def measure_departure(
    what: str,
    leaving: NodeProcess,
    survivors: list[NodeProcess],
    members_after: list[tuple[str, str]],
    names: list[str],
    store: Store,
    act: Callable[[], None],
    *,
    timeout: float,
    interval: float,
    watch_exit: bool = False,
) -> Departure:
    """Run ``act`` (kill or stop ``leaving``) and time detection, ownership and reconciliation.

    One poller thread per signal and survivor, so that a slow answer of one does not delay the
    others' time stamps. The reconciled time is the node's own stamp (poll rate independent).
    """
    before = per_owner(store)
    result = Departure(what, leaving.node_id, before.get(leaving.node_id, 0))
    expected = expected_owners(names, members_after)
    detected: dict[str, tuple[float, int]] = {}
    reconciled: dict[str, float] = {}
    stop = threading.Event()
    t0 = time.time()

    def until_done(step: Callable[[], bool]) -> None:
        while not stop.is_set():
            try:
                if step():
                    return
            except (httpx.HTTPError, StoreError):
                pass  # not yet
            stop.wait(interval)

    def detect(node: NodeProcess) -> bool:
        view = group_view(node)
        if leaving.node_id in {m["node_id"] for m in view.get("members") or []}:
            return False
        detected[node.node_id] = (time.time() - t0, int(view["epoch"]))
        return True

    def owned() -> bool:
        stamp = time.time() - t0
        owners = per_owner(store)
        if result.owned is None and not owners.get(leaving.node_id):
            result.owned = stamp
        if result.balanced is None and owners == expected:
            result.balanced = stamp
        return result.owned is not None and result.balanced is not None

    def reconcile(node: NodeProcess) -> bool:
        if node.node_id not in detected:
            return False
        done = reconciler_status(node).get("epoch_reconciled") or {}
        if done.get("epoch") is None or done["epoch"] < detected[node.node_id][1]:
            return False
        reconciled[node.node_id] = float(done["at"]) - t0
        result.ticks[node.node_id] = (
            float(done["seconds"]),
            int(done["jobs"]),
            int(done["claimed"]),
        )
        return True

    def exited() -> bool:
        if leaving.proc is not None and leaving.proc.poll() is not None:
            result.exited = time.time() - t0
            return True
        return False

    steps: list[Callable[[], bool]] = [owned, exited] if watch_exit else [owned]
    for node in survivors:
        steps += [partial(detect, node), partial(reconcile, node)]
    threads = [threading.Thread(target=until_done, args=(step,), daemon=True) for step in steps]
    for thread in threads:
        thread.start()
    try:
        act()
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    if len(detected) == len(survivors):
        result.detected = max(t for t, _ in detected.values())
        result.epoch = max(e for _, e in detected.values())
    if len(reconciled) == len(survivors):
        result.reconciled = max(reconciled.values())
    return result


def wait_converged(store: Store, sim: Simulator, total: int, timeout: float) -> dict[str, float]:
    """Seconds until every job was submitted (simulator creates) and until every job RUNNING."""
    started = time.monotonic()
    marks: dict[str, float] = {}
    base = sim.stats()["creates"]

    def done() -> bool:
        if "submitted" not in marks and sim.stats()["creates"] - base >= total:
            marks["submitted"] = time.monotonic() - started
        running = count_in_state(store, JobState.RUNNING)
        if running >= total:
            marks["running"] = time.monotonic() - started
            return True
        return False

    poll(done, timeout=timeout, interval=0.5, what=f"{total} jobs RUNNING")
    return marks


def wait_balanced(
    store: Store, names: list[str], members: list[tuple[str, str]], timeout: float
) -> None:
    expected = expected_owners(names, members)
    poll(lambda: per_owner(store) == expected, timeout=timeout, interval=0.2, what="balance")


def wait_settled(nodes: list[NodeProcess], timeout: float) -> dict[str, dict[str, Any]]:
    """Every node finished a complete tick that started after now; returns those ticks."""
    since = time.time()
    ticks: dict[str, dict[str, Any]] = {}

    def all_ticked() -> bool:
        for node in nodes:
            if node.node_id in ticks:
                continue
            tick = reconciler_status(node).get("last_tick") or {}
            if tick.get("at", 0) - tick.get("seconds", 0) > since and not tick.get("paused"):
                ticks[node.node_id] = tick
        return len(ticks) == len(nodes)

    poll(all_ticked, timeout=timeout, interval=0.2, what="a fresh tick on every node")
    return ticks


@dataclass
class Snapshot:
    creates: int
    kills: int
    apps: dict[str, str]
    runs: int


def snapshot(store: Store, sim: Simulator) -> Snapshot:
    stats = sim.stats()
    return Snapshot(stats["creates"], stats["kills"], sim.live_apps(), run_count(store))


def double_runs(apps: dict[str, str]) -> int:
    """Jobs with more than one live application (app name ``drover:<job>:<run id>``)."""
    jobs = Counter(name.split(":")[1] for name in apps.values() if name.startswith("drover:"))
    return sum(1 for n in jobs.values() if n > 1)


# -- report -------------------------------------------------------------------------------------


def _fmt(seconds: float | None, timeout: float) -> str:
    if seconds is None:
        return f"{'timed out':>10}{'':>10}"
    return f"{seconds:>10.2f}{seconds / timeout:>9.2f}x"


def print_departure(d: Departure, timeout: float) -> None:
    print(f"\n{d.what}: {d.node} ({d.jobs_before} jobs), new epoch {d.epoch}")
    print(f"  {'measured from the event':<52}{'seconds':>10}{'x session':>10}")
    rows = [
        ("detected (every survivor's view dropped it)", d.detected),
        ("owned (no job left with it as owner)", d.owned),
        ("balanced (every job at its new crc32 owner)", d.balanced),
        ("reconciled (survivors' first full tick, new epoch)", d.reconciled),
    ]
    if d.exited is not None:
        rows.append(("process exited", d.exited))
    for label, value in rows:
        print(f"  {label:<52}{_fmt(value, timeout)}")
    for node_id, (seconds, jobs, claimed) in sorted(d.ticks.items()):
        print(f"    {node_id}: that tick took {seconds:.2f} s over {jobs} jobs, claimed {claimed}")


# -- main ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument(
        "--roles", default="", help="comma-separated role per node (default: all active)"
    )
    parser.add_argument("--session-timeout", type=float, default=2.0)
    parser.add_argument("--reconcile-interval", type=float, default=2.0)
    parser.add_argument("--app-start-delay", type=float, default=0.5)
    parser.add_argument("--victim", type=int, default=2, help="node number killed with -9")
    parser.add_argument("--stopped", type=int, default=0, help="node number stopped (0: last)")
    parser.add_argument("--poll", type=float, default=0.05, help="poll interval, seconds")
    parser.add_argument("--timeout", type=float, default=0.0, help="per phase (0: by size)")
    parser.add_argument("--keep-logs", action="store_true", help="keep the node logs")
    args = parse_with_services(parser, argv)
    roles = [r.strip() for r in args.roles.split(",") if r.strip()] or ["active"] * args.nodes
    if len(roles) != args.nodes or not set(roles) <= {"active", "backup"}:
        parser.error("--roles needs one of active|backup per node")
    if args.nodes < 2 or not 1 <= args.victim <= args.nodes:
        parser.error("needs at least 2 nodes and a victim among them")
    stopped_no = args.stopped or args.nodes
    phase_timeout = args.timeout or 60.0 + args.jobs * 0.03
    timeout_s = args.session_timeout

    with bench_workdir("drover-takeover-", args.keep_logs) as workdir:
        nodes: list[NodeProcess] = []
        print(
            f"takeover bench: {args.nodes} nodes {roles}, {args.jobs} jobs, session timeout "
            f"{timeout_s} s, reconcile interval {args.reconcile_interval} s; work dir {workdir}"
        )
        try:
            with (
                simulator(args.app_start_delay) as sim,
                fresh_services(args.mysql_url, args.zk_hosts) as (database_url, namespace),
            ):
                store = Store(database_url)
                try:
                    register(store, sim, workdir)
                    entry = placeholder_pipeline(workdir)
                    env = node_env(
                        database_url, args.zk_hosts, namespace, timeout_s, args.reconcile_interval
                    )
                    nodes.extend(bench_nodes(workdir, env, [f"{GROUP}:{role}" for role in roles]))
                    members = [(n.node_id, r) for n, r in zip(nodes, roles, strict=True)]
                    started = time.monotonic()
                    start_nodes(nodes)
                    print(f"{args.nodes} nodes ready in {time.monotonic() - started:.1f} s")
                    poll(
                        lambda: all(
                            len(group_view(n).get("members") or []) == len(nodes) for n in nodes
                        ),
                        timeout=60,
                        what="every node to see every member",
                    )

                    names = job_names(args.jobs)
                    t = time.monotonic()
                    seed_jobs(store, names, str(entry))
                    print(f"seeded {args.jobs} jobs in {time.monotonic() - t:.2f} s")
                    marks = wait_converged(store, sim, args.jobs, phase_timeout * 3)
                    print(
                        "initial convergence: every job submitted after "
                        f"{marks['submitted']:.1f} s, every job RUNNING after "
                        f"{marks['running']:.1f} s"
                    )
                    wait_balanced(store, names, members, phase_timeout)
                    steady = wait_settled(nodes, phase_timeout)
                    for node_id, tick in sorted(steady.items()):
                        print(
                            f"  steady tick on {node_id}: {tick['seconds']:.2f} s over "
                            f"{tick['jobs']} jobs"
                        )
                    base = snapshot(store, sim)
                    print(
                        f"baseline: {len(base.apps)} live apps, {base.creates} creates, "
                        f"{base.kills} kills, {base.runs} runs"
                    )

                    def departure(
                        what: str,
                        node: NodeProcess,
                        act: Callable[[], None],
                        watch_exit: bool = False,
                    ) -> Departure:
                        """``act`` (kill or stop ``node``) timed by :func:`measure_departure`, every
                        other node surviving."""
                        return measure_departure(
                            what,
                            node,
                            [n for n in nodes if n is not node],
                            [m for m in members if m[0] != node.node_id],
                            names,
                            store,
                            act,
                            timeout=phase_timeout,
                            interval=args.poll,
                            watch_exit=watch_exit,
                        )

                    # (a) kill -9
                    victim = nodes[args.victim - 1]
                    crash = departure("kill -9", victim, victim.kill9)
                    print_departure(crash, timeout_s)
                    mid = snapshot(store, sim)

                    # (b) restart the victim, then a graceful stop
                    t = time.monotonic()
                    victim.start()
                    victim.wait_ready()
                    ready = time.monotonic() - t
                    wait_balanced(store, names, members, phase_timeout)
                    rebalanced = time.monotonic() - t
                    print(
                        f"\nrestart of {victim.node_id}: ready after {ready:.1f} s, owns its share "
                        f"again after {rebalanced:.1f} s"
                    )
                    wait_settled(nodes, phase_timeout)
                    leaving = nodes[stopped_no - 1]
                    stop = departure(
                        "graceful stop (SIGTERM)", leaving, leaving.terminate, watch_exit=True
                    )
                    leaving.wait_exit()
                    print_departure(stop, timeout_s)

                    # (c) applications restarted
                    wait_settled([n for n in nodes if n is not leaving], phase_timeout)
                    end = snapshot(store, sim)
                    running = count_in_state(store, JobState.RUNNING)
                    changed = len(set(base.apps) ^ set(end.apps))
                    print("\nSpark applications during all of it (must all be 0)")
                    creates = end.creates - base.creates
                    print(f"  {'new submissions (simulator creates)':<52}{creates:>10}")
                    print(f"  {'kills (simulator)':<52}{end.kills - base.kills:>10}")
                    print(f"  {'live app ids that changed':<52}{changed:>10}")
                    print(f"  {'new runs in the store':<52}{end.runs - base.runs:>10}")
                    print(f"  {'jobs with two live apps':<52}{double_runs(end.apps):>10}")
                    print(f"  {'jobs not RUNNING at the end':<52}{args.jobs - running:>10}")
                    print(
                        f"  (after the kill alone: {mid.creates - base.creates} creates, "
                        f"{mid.runs - base.runs} new runs)"
                    )
                    met = print_summary(args, crash, stop, marks, timeout_s)
                    failed = (
                        end.creates != base.creates
                        or end.kills != base.kills
                        or changed
                        or end.runs != base.runs
                        or running != args.jobs
                        or double_runs(end.apps)
                        or not met
                    )
                    return 1 if failed else 0
                finally:
                    for node in nodes:
                        if node.proc is not None:
                            node.stop(timeout=30)
                    store.dispose()
        except KeyboardInterrupt:
            print("interrupted; everything it started is stopped")
            return 130
        finally:
            for node in nodes:
                if node.proc is not None and node.alive:
                    node.kill9()


def print_summary(
    args: argparse.Namespace,
    crash: Departure,
    stop: Departure,
    marks: dict[str, float],
    timeout_s: float,
) -> bool:
    """Print the summary table and the two bounds (kill -9: owned within the session timeout
    + 2 s; SIGTERM: handed over within 1 s); True when every figure is in."""

    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f} s ({value / timeout_s:.2f}x)"

    print(
        f"\nsummary: {args.nodes} nodes, {args.jobs} jobs, session timeout {timeout_s} s "
        f"(poll {args.poll} s); initial convergence {marks['running']:.1f} s"
    )
    print(f"  {'':<14}{'detected':>20}{'owned':>20}{'balanced':>20}{'reconciled':>20}")
    for label, d in (("kill -9", crash), ("SIGTERM", stop)):
        print(
            f"  {label:<14}{cell(d.detected):>20}{cell(d.owned):>20}{cell(d.balanced):>20}"
            f"{cell(d.reconciled):>20}"
        )
    figures = [getattr(d, f) for d in (crash, stop) for f in ("detected", "owned", "reconciled")]
    crash_ok = crash.owned is not None and crash.owned <= timeout_s + 2.0
    stop_ok = stop.owned is not None and stop.owned <= 1.0
    print(f"  kill -9: every orphan owned within session timeout + 2 s: {_yes(crash_ok)}")
    print(f"  SIGTERM: every job handed over within 1 s: {_yes(stop_ok)}")
    return crash_ok and stop_ok and None not in figures


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


if __name__ == "__main__":
    raise SystemExit(main())
