"""The control plane's cost: SQL per submission, the steady tick, and time to RUNNING at scale.

Three measurements, each on a fresh MariaDB database (``DROVER_TEST_MYSQL_URL``), dropped at the
end:

``statements``  one reconciler in this process submits N jobs (desired RUNNING, seeded unowned)
                to an in-memory cluster that runs every application at once, ticking until all
                are RUNNING. Every SQL statement is counted with SQLAlchemy engine events by kind
                (SELECT, INSERT, UPDATE, COMMIT, ROLLBACK -- including the pool's
                rollback-on-return, which is a round trip too) and divided by N: the cost of one
                submission from QUEUED to RUNNING, the per-tick reads amortised.
``steady``      N jobs already RUNNING (seeded with their runs, owned by the bench node, last
                changed an hour ago) and the same in-memory cluster: the first tick (a full read)
                and the median of the next ticks (seconds, statements, rows fetched), at each
                size of ``--steady`` (default 1,000 and 10,000).
``steady-standalone``  the same steady tick (not in the default set), against the real
                standalone backend and a simulated master in this process running every job's
                application: the tick with the master's ``/json/`` listing fetched each tick.
``steady-real`` the same steady tick against the real standalone backend and a real Spark
                standalone cluster (``harness/spark.py``, private) running every job's
                application (the sample pipeline, idle between 60 s triggers), beside the instant
                fake's at the same count (``--steady-real``, default 4: a real application costs
                ~0.9 GB and the machine's two cores are shared -- the figure is what a tick pays
                for a real master's listing and status answers, not a scale figure).
``running``     ``--nodes`` ``drover node run`` processes, the simulated standalone cluster
                (``harness/simcluster.py``) and ZooKeeper: seconds from seeding N jobs until every
                job was submitted and until every job is RUNNING, for each size of ``--running``.

Runs against older checkouts too (it only uses ``bench.takeover``'s helpers and the reconciler's
constructor), so the same file measures before and after a change:

    set -a; . var/services/env; set +a
    flock /tmp/drover-heavy.lock .venv/bin/python -m bench.controlplane \\
        [--only statements,steady,steady-standalone,steady-real,running] [--jobs 300] \\
        [--steady 1000,10000] [--steady-real 4] [--running 10000,50000] [--profile DIR] \\
        [--json out.json]

The running part also prints the CPU seconds every process spent meanwhile (each node's processes
by kind, the simulator, the database server, the bench), so the simulator's own cost is reported
apart from Drover's; ``--profile DIR`` records py-spy stacks of every node and the simulator
(``pip install py-spy``; collapsed stacks, one file per process tree), only of threads holding the
GIL: where the Python CPU goes, not where threads wait (a wall-clock profile of a reconciler is
mostly its submission threads waiting on sockets).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from bench import ha
from bench import takeover as tk
from harness.procs import CpuMeter, command_line
from scheduler.core.backend import (
    AppInfo,
    AppState,
    AppStatus,
    ProbeResult,
    Submission,
    SubmitRequest,
    app_name_for,
)
from scheduler.core.clock import utcnow
from scheduler.core.ownership import Claim, Fence
from scheduler.core.records import ClusterRecord
from scheduler.core.states import JobState, RunState
from scheduler.decisions.planning import RestartPolicy
from scheduler.store.db import Store
from scheduler.store.models import Job, Run

try:  # clusters' change feeds (a steady tick follows them instead of polling every run)
    from scheduler.backends.changes import ChangeLog
except ImportError:  # pragma: no cover - older checkouts
    ChangeLog = None  # type: ignore[assignment,misc]

from harness.procs import session_pids

try:  # the layout after the control-plane house
    from harness.nodes import poll
except ImportError:  # pragma: no cover - older checkouts
    from bench.nodes import poll  # type: ignore[no-redef]

NODE = Fence("bench-node", 1)
KINDS = ("SELECT", "INSERT", "UPDATE", "DELETE", "COMMIT", "ROLLBACK")


# -- counting -----------------------------------------------------------------------------------


@dataclass
class Counts:
    statements: Counter[str]
    rows: int = 0

    @property
    def total(self) -> int:
        return sum(self.statements.values())


class StatementCounter:
    """SQL statements by kind and rows fetched, from the engine's events (thread-safe)."""

    def __init__(self, engine: sa.Engine) -> None:
        self._lock = threading.Lock()
        self._counts = Counts(Counter())
        self.enabled = False
        event.listen(engine, "before_cursor_execute", self._execute)
        event.listen(engine, "after_cursor_execute", self._fetched)
        event.listen(engine, "commit", lambda conn: self._add("COMMIT"))
        event.listen(engine, "rollback", lambda conn: self._add("ROLLBACK"))
        # the pool's reset on return is a ROLLBACK round trip the Connection events do not see:
        # count it when it happens (default reset: unless the Connection already ended the
        # transaction inline; Drover's own reset: when the connection is marked open)
        pool = engine.pool
        self._default_reset = "rollback" in str(getattr(pool, "_reset_on_return", ""))
        event.listen(pool, "reset", self._reset, insert=True)

    def _add(self, kind: str, rows: int = 0) -> None:
        if self.enabled:
            with self._lock:
                self._counts.statements[kind] += 1
                self._counts.rows += rows

    def _execute(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        self._add(statement.lstrip().split(None, 1)[0].upper())

    def _fetched(self, conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT") and self.enabled:
            with self._lock:
                self._counts.rows += max(0, cursor.rowcount or 0)

    def _reset(self, dbapi_connection: Any, record: Any, state: Any) -> None:
        if state.terminate_only:
            return
        if self._default_reset:
            if not state.transaction_was_reset:
                self._add("ROLLBACK")
        elif record is not None and record.info.get("drover_open_transaction", True):
            if not state.transaction_was_reset:
                self._add("ROLLBACK")

    @contextmanager
    def counting(self) -> Iterator[Counts]:
        with self._lock:
            self._counts = Counts(Counter())
        self.enabled = True
        try:
            yield self._counts
        finally:
            self.enabled = False


# -- an in-memory cluster: every application runs at once ---------------------------------------


class InstantCluster:
    """A cluster backend that starts every application at once and never loses one: its change
    feed (where this checkout has one) names only new submissions."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._apps: dict[str, str] = {}
        self.submissions = 0
        self.statuses = 0
        self._changes = ChangeLog() if ChangeLog is not None else None

    def submit(self, request: SubmitRequest) -> Submission:
        with self._lock:
            self.submissions += 1
            sid = f"driver-{self.submissions}"
            self._apps[sid] = request.app_name
        if self._changes is not None:
            self._changes.touch([sid])
        return Submission(sid, f"app-{sid}")

    def status(self, submission_id: str, *args: Any) -> AppStatus:
        with self._lock:
            self.statuses += 1
        return AppStatus(AppState.RUNNING, f"app-{submission_id}")

    def changes(self, since: Any) -> Any:
        if self._changes is None:
            raise AttributeError("changes")
        return self._changes.changes(since)

    def kill(self, submission_id: str) -> None:
        pass

    def list_applications(self) -> list[AppInfo]:
        return []

    def find(self, app_name: str) -> Submission | None:
        return None

    def probe(self) -> ProbeResult:
        return ProbeResult(True, "instant", 0.0)


class Backends:
    def __init__(self, backend: InstantCluster) -> None:
        self.backend = backend

    def for_cluster(self, cluster: ClusterRecord) -> InstantCluster:
        return self.backend


def make_reconciler(store: Store, backend: InstantCluster) -> Any:
    """This checkout's reconciler on ``store`` (a ledger over it, where there is one)."""
    from scheduler.loops.reconciler import Reconciler

    claim = Claim(tk.GROUP, NODE, 0, 1)
    target: Any = store
    try:
        from scheduler.store.ledger import SqlLedger  # type: ignore[attr-defined]

        target = SqlLedger(store, node_id=NODE.node_id, app_name_for=app_name_for)
    except ImportError:
        pass
    return Reconciler(
        target,
        Backends(backend),  # type: ignore[arg-type]
        node_id=NODE.node_id,
        group=tk.GROUP,
        claim=lambda: claim,
        policy=RestartPolicy(),
    )


@contextmanager
def bench_store(mysql_url: str) -> Iterator[tuple[Store, Path]]:
    """A fresh, migrated MariaDB database with the cluster ``sim`` and group ``default``."""
    workdir = Path(tempfile.mkdtemp(prefix="drover-controlplane-"))
    with tk.fresh_database(mysql_url) as url:
        tk.migrate(url)
        store = Store(url)
        fake = type("Sim", (), {"url": "http://127.0.0.1:9", "master_url": "spark://127.0.0.1:9"})
        tk.register(store, fake, workdir)  # type: ignore[arg-type]
        try:
            yield store, workdir
        finally:
            store.dispose()
            shutil.rmtree(workdir, ignore_errors=True)


# -- statements per submission ------------------------------------------------------------------


def measure_statements(mysql_url: str, jobs: int) -> dict[str, Any]:
    with bench_store(mysql_url) as (store, workdir):
        tk.seed_jobs(store, tk.job_names(jobs), str(workdir / "pipeline.py"))
        checker = Store(store.url)
        counter = StatementCounter(store.engine)
        backend = InstantCluster()
        reconciler = make_reconciler(store, backend)
        started = time.perf_counter()
        ticks = 0
        with counter.counting() as counts:
            while True:
                reconciler.tick()
                ticks += 1
                if tk.count_in_state(checker, JobState.RUNNING) >= jobs or ticks > 50:
                    break
        seconds = time.perf_counter() - started
        checker.dispose()
        close = getattr(reconciler, "close", None)
        if close is not None:
            close()
    per_job = {k: counts.statements[k] / jobs for k in KINDS if counts.statements[k]}
    return {
        "jobs": jobs,
        "ticks": ticks,
        "submissions": backend.submissions,
        "per_submission": per_job,
        "total_per_submission": counts.total / jobs,
        "ms_per_submission": seconds * 1000 / jobs,
    }


# -- the steady tick ----------------------------------------------------------------------------


def seed_running(
    store: Store,
    count: int,
    entrypoint: str,
    handles: dict[int, tuple[str, str]] | None = None,
) -> None:
    """``count`` jobs RUNNING on cluster ``sim`` with a RUNNING run each, owned by the bench
    node, last changed an hour ago (``handles``: run id -> the submission id and app id of its
    application on a simulated cluster; else made up)."""
    then = utcnow() - timedelta(hours=1)
    jobs, runs = [], []
    for i, name in enumerate(tk.job_names(count), start=1):
        submission_id, app_id = (handles or {}).get(i, (f"driver-{i}", f"app-driver-{i}"))
        jobs.append(
            tk.job_row(
                name,
                entrypoint,
                id=i,
                state=JobState.RUNNING.value,
                state_reason="seeded running",
                cluster_name=tk.CLUSTER,
                current_run_id=i,
                attempts_reset_at=then,
                owner=NODE.node_id,
                owner_epoch=NODE.epoch,
                version=5,
                created_at=then,
                updated_at=then,
            )
        )
        runs.append(
            {
                "id": i,
                "job_id": i,
                "attempt": 1,
                "generation": 0,
                "cluster_name": tk.CLUSTER,
                "node_id": NODE.node_id,
                "owner_epoch": NODE.epoch,
                "fencing_token": f"token-{i}",
                "app_name": app_name_for(name, i),
                "checkpoint_location": f"/ck/{name}",
                "submission_id": submission_id,
                "app_id": app_id,
                "state": RunState.RUNNING.value,
                "reason": "",
                "created_at": then,
                "submitted_at": then,
                "started_at": then,
            }
        )
    with store.transaction() as session:
        for start in range(0, count, tk.SEED_CHUNK):
            session.execute(sa.insert(Job), jobs[start : start + tk.SEED_CHUNK])
            session.execute(sa.insert(Run), runs[start : start + tk.SEED_CHUNK])


def measure_steady(mysql_url: str, jobs: int, ticks: int = 5) -> dict[str, Any]:
    with bench_store(mysql_url) as (store, workdir):
        seed_running(store, jobs, str(workdir / "pipeline.py"))
        counter = StatementCounter(store.engine)
        backend = InstantCluster()
        reconciler = make_reconciler(store, backend)
        samples = []
        for _ in range(ticks + 1):
            asked = backend.statuses
            with counter.counting() as counts:
                started = time.perf_counter()
                stats = reconciler.tick()
                seconds = time.perf_counter() - started
            assert stats.actions == 0 and stats.errors == 0, stats
            looked = getattr(stats, "looked_at", stats.jobs)
            samples.append(
                (seconds, counts.total, counts.rows, stats.jobs, backend.statuses - asked, looked)
            )
    first, rest = samples[0], samples[1:]
    return {
        "jobs": jobs,
        "first_tick_s": first[0],
        "first_tick_statements": first[1],
        "first_tick_rows": first[2],
        "first_tick_statuses": first[4],
        "tick_s": statistics.median(s[0] for s in rest),
        "tick_statements": statistics.median(s[1] for s in rest),
        "tick_rows": statistics.median(s[2] for s in rest),
        "tick_statuses": statistics.median(s[4] for s in rest),
        "tick_looked_at": statistics.median(s[5] for s in rest),
        "jobs_kept": rest[-1][3],
    }


def _listing_ticks(reconciler: Any, backend: Any, ticks: int) -> list[tuple[float, int, int]]:
    """``ticks + 1`` ticks one second apart (each fetches the master's listing): seconds,
    listing fetches and jobs looked at, per tick; none may act or fail."""
    samples = []
    for n in range(ticks + 1):
        if n:
            time.sleep(1.0)  # not synchronisation: the interval between two ticks
        fetches = backend.listing_fetches
        started = time.perf_counter()
        stats = reconciler.tick()
        seconds = time.perf_counter() - started
        assert stats.actions == 0 and stats.errors == 0, stats
        looked = getattr(stats, "looked_at", stats.jobs)
        samples.append((seconds, backend.listing_fetches - fetches, looked))
    return samples


def measure_steady_standalone(mysql_url: str, jobs: int, ticks: int = 5) -> dict[str, Any]:
    """The steady tick against the real standalone backend and a simulated master in this
    process that runs every job's application: what a tick costs with the master's ``/json/``
    listing fetched and parsed each tick (one per cluster, not per job; the simulator's own
    encoding of it is in the figure too). Ticks one second apart, so each fetches a listing."""
    from harness.simcluster import SimCluster
    from scheduler.backends.standalone import StandaloneRestBackend

    sim = SimCluster(app_start_delay=0.0).start()
    backend = StandaloneRestBackend(sim.rest_url, sim.master_url, sim.ui_url, listing_ttl_s=0.0)
    try:
        handles: dict[int, tuple[str, str]] = {}
        for i, name in enumerate(tk.job_names(jobs), start=1):
            _, answer = sim._create(
                {
                    "action": "CreateSubmissionRequest",
                    "appResource": "file:/bench/pipeline.py",
                    "mainClass": "org.apache.spark.deploy.PythonRunner",
                    "sparkProperties": {"spark.app.name": app_name_for(name, i)},
                }
            )
            sid = str(answer["submissionId"])
            handles[i] = (sid, sim.driver_app(sid) or "")
        with bench_store(mysql_url) as (store, workdir):
            seed_running(store, jobs, str(workdir / "pipeline.py"), handles)
            reconciler = make_reconciler(store, backend)  # type: ignore[arg-type]
            samples = _listing_ticks(reconciler, backend, ticks)
    finally:
        backend.close()
        sim.stop()
    first, rest = samples[0], samples[1:]
    return {
        "jobs": jobs,
        "first_tick_s": first[0],
        "tick_s": statistics.median(x[0] for x in rest),
        "tick_listings": statistics.median(x[1] for x in rest),
        "tick_looked_at": statistics.median(x[2] for x in rest),
    }


REAL_PIPELINE = Path(__file__).resolve().parents[1] / "pipelines" / "rate_counter.py"


def measure_steady_real(mysql_url: str, jobs: int, ticks: int = 5) -> dict[str, Any]:
    """The steady tick against the real standalone backend and a private real Spark standalone
    cluster running every job's application (the sample pipeline with a 60 s trigger), started
    through the same backend and seeded RUNNING with their runs; ticks one second apart, so
    each fetches the master's listing. Then the instant fake's tick at the same count, for the
    comparison (``fake_tick_s``)."""
    from harness.spark import PrivateSparkCluster
    from scheduler.backends.standalone import StandaloneRestBackend

    workdir = Path(tempfile.mkdtemp(prefix="drover-steady-real-"))
    cluster = PrivateSparkCluster(workdir / "spark", cores=2 * jobs + 1, memory=f"{jobs + 1}g")
    backend = StandaloneRestBackend(
        cluster.rest_url, cluster.master_url, cluster.ui_url, listing_ttl_s=0.0
    )
    names = tk.job_names(jobs)
    try:
        cluster.start(timeout=180)
        handles: dict[int, tuple[str, str]] = {}
        for i, name in enumerate(names, start=1):
            submission = backend.submit(
                SubmitRequest(
                    job_name=name,
                    run_id=i,
                    fencing_token=f"token-{i}",
                    entrypoint=str(REAL_PIPELINE),
                    args=["--output", str(workdir / "out" / name), "--trigger-seconds", "60"],
                    checkpoint_location=(workdir / "ck" / name).as_uri(),
                    py_files=[str(REAL_PIPELINE.with_name("drover_runtime.py"))],
                )
            )
            handles[i] = (submission.submission_id, submission.app_id or "")

        def running() -> bool:
            for i, name in enumerate(names, start=1):
                status = backend.status(handles[i][0], app_name_for(name, i))
                if status.state != AppState.RUNNING or not status.app_id:
                    return False
                handles[i] = (handles[i][0], status.app_id)
            return True

        poll(running, timeout=300, interval=1.0, what=f"{jobs} real applications RUNNING")
        with bench_store(mysql_url) as (store, _):
            seed_running(store, jobs, str(REAL_PIPELINE), handles)
            reconciler = make_reconciler(store, backend)  # type: ignore[arg-type]
            samples = _listing_ticks(reconciler, backend, ticks)
    finally:
        backend.close()
        cluster.kill()
        shutil.rmtree(workdir, ignore_errors=True)
    fake = measure_steady(mysql_url, jobs, ticks)
    first, rest = samples[0], samples[1:]
    return {
        "jobs": jobs,
        "first_tick_s": first[0],
        "tick_s": statistics.median(x[0] for x in rest),
        "tick_max_s": max(x[0] for x in rest),
        "tick_listings": statistics.median(x[1] for x in rest),
        "tick_looked_at": statistics.median(x[2] for x in rest),
        "fake_tick_s": fake["tick_s"],
    }


# -- where the CPU went ---------------------------------------------------------------------------


def _label(pid: int) -> str:
    argv = command_line(pid)
    if not argv:
        return "?"
    if argv[0].startswith("ray::"):
        return argv[0].split()[0]
    text = " ".join(argv)
    for needle, name in (
        ("drover node run", "drover node run (API, Ray driver)"),
        ("dashboard/agent.py", "ray dashboard agent"),
        ("runtime_env/agent", "ray runtime env agent"),
        ("log_monitor.py", "ray log monitor"),
        ("default_worker.py", "ray idle worker"),
        ("raylet", "ray raylet"),
        ("gcs_server", "ray gcs"),
    ):
        if needle in text:
            return name
    return Path(argv[0]).name


def _by_kind(spent: dict[str, dict[int, float]]) -> dict[str, dict[str, float]]:
    """A :class:`CpuMeter`'s figures per group by process kind (:func:`_label`) instead of pid.
    Groups: each node's session (API/driver, each actor, Ray's own), the simulator, the
    database server, this bench."""
    kinds: dict[str, dict[str, float]] = {}
    for group, used in spent.items():
        of_group = kinds.setdefault(group, {})
        for pid, seconds in used.items():
            label = _label(pid)
            of_group[label] = of_group.get(label, 0.0) + seconds
    return kinds


def _database_pids() -> list[int]:
    from harness.procs import pids_with_cmdline

    return pids_with_cmdline(b"mariadbd") or pids_with_cmdline(b"mysqld")


def _print_cpu(spent: dict[str, dict[str, float]], wall: float) -> None:
    total = sum(sum(k.values()) for k in spent.values())
    print(f"  CPU over {wall:.1f} s wall: {total:.1f} s ({total / wall:.2f} cores on average)")
    for group, kinds in spent.items():
        print(f"    {group:<12}{sum(kinds.values()):>8.1f} s")
        for label, used in sorted(kinds.items(), key=lambda kv: -kv[1]):
            if used >= 0.05:
                print(f"      {label:<40}{used:>8.1f} s")


def _profilers(targets: dict[str, int], out: Path, seconds: float) -> list[subprocess.Popen[bytes]]:
    """py-spy (if installed) recording each target process and its children, collapsed stacks."""
    spy = Path(sys.executable).with_name("py-spy")
    if not spy.exists():
        print("  (no py-spy in this environment: pip install py-spy)")
        return []
    out.mkdir(parents=True, exist_ok=True)
    procs = []
    for name, pid in targets.items():
        procs.append(
            subprocess.Popen(
                [
                    str(spy),
                    "record",
                    "--pid",
                    str(pid),
                    "--subprocesses",
                    "--nonblocking",
                    "--gil",
                    "--rate",
                    "50",
                    "--format",
                    "raw",
                    "--duration",
                    str(int(seconds)),
                    "--output",
                    str(out / f"{name}.txt"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    return procs


def summarize_profile(path: Path, top: int = 12) -> list[tuple[str, float]]:
    """The functions with the most samples on top of the stack (self time), as shares of all
    samples, from py-spy's collapsed stacks (``frame;frame;... count`` per line)."""
    counts: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frame = stack.rsplit(";", 1)[-1]
        name, _, where = frame.partition(" (")
        module = where.split(":", 1)[0].rsplit("/", 2)[-2:]
        counts[f"{name} ({'/'.join(module)})"] += int(count)
        total += int(count)
    return [(name, n / total) for name, n in counts.most_common(top)] if total else []


# -- time to RUNNING over node processes --------------------------------------------------------


def measure_running(
    mysql_url: str,
    zk_hosts: str,
    jobs: int,
    nodes: int,
    app_start_delay: float,
    profile: Path | None = None,
    keep_logs: bool = False,
) -> dict[str, Any]:
    with ha.deployment(
        mysql_url,
        zk_hosts,
        nodes=nodes,
        session_timeout=4,
        reconcile_interval=2,
        app_start_delay=app_start_delay,
        keep_logs=keep_logs,
    ) as dep:
        sim, store = dep.sim, dep.store
        meter = CpuMeter()
        for node in dep.nodes:
            assert node.proc is not None
            meter.add(node.node_id, partial(session_pids, node.proc.pid))
        meter.add("simulator", lambda: [sim.proc.pid])
        meter.add("database", _database_pids)
        meter.add("bench", lambda: [os.getpid()])
        profilers = []
        if profile is not None:
            targets = {n.node_id: n.proc.pid for n in dep.nodes if n.proc is not None}
            targets["simulator"] = sim.proc.pid
            profilers = _profilers(targets, profile / f"{jobs}", 600 + jobs / 100)
        tk.seed_jobs(store, tk.job_names(jobs), str(dep.workdir / "pipeline.py"))
        meter.start()
        marks = tk.wait_converged(store, sim, jobs, timeout=120.0 + jobs * 0.05)
        cpu = _by_kind(meter.stop())
        for spy in profilers:  # py-spy writes what it has on SIGINT
            spy.send_signal(signal.SIGINT)
        for spy in profilers:
            spy.wait(timeout=60)
        if profile is not None:
            for stacks in sorted((profile / f"{jobs}").glob("*.txt")):
                print(f"  py-spy, {stacks.stem} (self time, share of samples):")
                for name, share in summarize_profile(stacks):
                    print(f"    {share:6.1%}  {name}")
        creates = sim.stats()["creates"]
        _print_cpu(cpu, meter.wall)
        print(
            f"  {jobs} jobs: submitted after {marks['submitted']:.1f} s, RUNNING after "
            f"{marks['running']:.1f} s, {creates} creates",
            flush=True,
        )
    return {
        "jobs": jobs,
        "nodes": nodes,
        "submitted_s": marks["submitted"],
        "running_s": marks["running"],
        "creates": creates,
        "cpu_s": cpu,
        "cpu_wall_s": meter.wall,
    }


# -- main ---------------------------------------------------------------------------------------


def _sizes(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="statements,steady,running")
    parser.add_argument("--jobs", type=int, default=300, help="jobs of the statements run")
    parser.add_argument("--steady", default="1000,10000", help="owned jobs of the steady ticks")
    parser.add_argument("--steady-ticks", type=int, default=9, help="ticks after the first")
    parser.add_argument(
        "--steady-real", type=int, default=4, help="jobs of the real standalone steady tick"
    )
    parser.add_argument("--running", default="10000", help="jobs of the time-to-RUNNING runs")
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument("--app-start-delay", type=float, default=0.5)
    parser.add_argument("--json", default="", help="also write the figures to this file")
    parser.add_argument(
        "--profile", default="", help="running: py-spy stacks of every process into this dir"
    )
    parser.add_argument("--keep-logs", action="store_true", help="running: keep the node logs")
    parser.add_argument("--mysql-url", default=os.environ.get("DROVER_TEST_MYSQL_URL", ""))
    parser.add_argument("--zk-hosts", default=os.environ.get("DROVER_TEST_ZK_HOSTS", ""))
    args = parser.parse_args(argv)
    if not args.mysql_url:
        parser.error("needs DROVER_TEST_MYSQL_URL (var/services/env)")
    parts = {p.strip() for p in args.only.split(",") if p.strip()}
    figures: dict[str, Any] = {}
    sink: Callable[[], None] = lambda: None  # noqa: E731
    if args.json:

        def sink() -> None:
            Path(args.json).write_text(json.dumps(figures, indent=2))

    def per_size(
        key: str,
        sizes: str,
        measure_one: Callable[[int], dict[str, Any]],
        line: Callable[[int, dict[str, Any]], str],
    ) -> list[dict[str, Any]]:
        """``measure_one`` at each size of ``sizes`` in turn: each result kept in
        ``figures[key]``, printed (``line``) and written out before the next size."""
        results: list[dict[str, Any]] = []
        figures[key] = results
        for size in _sizes(sizes):
            result = measure_one(size)
            results.append(result)
            print(line(size, result))
            sink()
        return results

    if "statements" in parts:
        result = measure_statements(args.mysql_url, args.jobs)
        figures["statements"] = result
        kinds = ", ".join(f"{v:.2f} {k}" for k, v in result["per_submission"].items())
        print(
            f"statements per submission (QUEUED -> RUNNING, {result['jobs']} jobs, "
            f"{result['ticks']} ticks): {result['total_per_submission']:.2f} ({kinds}); "
            f"{result['ms_per_submission']:.2f} ms each"
        )
        sink()
    if "steady" in parts:
        steady = per_size(
            "steady",
            args.steady,
            lambda size: measure_steady(args.mysql_url, size, args.steady_ticks),
            lambda size, result: (
                f"steady tick at {size} owned jobs: {result['tick_s'] * 1000:.1f} ms, "
                f"{result['tick_statements']:.0f} statements, {result['tick_rows']:.0f} rows, "
                f"{result['tick_statuses']:.0f} status calls, {result['tick_looked_at']:.0f} "
                f"jobs looked at (first tick: {result['first_tick_s'] * 1000:.0f} ms, "
                f"{result['first_tick_statements']} statements, {result['first_tick_rows']} rows, "
                f"{result['first_tick_statuses']} status calls)"
            ),
        )
        if len(steady) > 1:
            low, high = steady[0], steady[-1]
            ratio = high["tick_s"] / low["tick_s"]
            figures["steady_ratio"] = ratio
            print(
                f"steady tick at {high['jobs']} / at {low['jobs']} owned jobs (this run): "
                f"{ratio:.2f}x"
            )
            sink()
    if "steady-standalone" in parts:
        per_size(
            "steady_standalone",
            args.steady,
            lambda size: measure_steady_standalone(args.mysql_url, size, args.steady_ticks),
            lambda size, result: (
                f"steady tick at {size} owned jobs, standalone backend over a simulated master: "
                f"{result['tick_s'] * 1000:.1f} ms ({result['tick_listings']:.0f} listing "
                f"fetches, {result['tick_looked_at']:.0f} jobs looked at; first tick "
                f"{result['first_tick_s'] * 1000:.0f} ms)"
            ),
        )
    if "steady-real" in parts:
        result = measure_steady_real(args.mysql_url, args.steady_real, args.steady_ticks)
        figures["steady_real"] = result
        print(
            f"steady tick at {result['jobs']} owned jobs: real standalone cluster "
            f"{result['tick_s'] * 1000:.1f} ms (max {result['tick_max_s'] * 1000:.1f} ms, "
            f"{result['tick_listings']:.0f} listing fetches, {result['tick_looked_at']:.0f} jobs "
            f"looked at; first tick {result['first_tick_s'] * 1000:.0f} ms), instant fake "
            f"{result['fake_tick_s'] * 1000:.1f} ms"
        )
        sink()
    if "running" in parts:
        if not args.zk_hosts:
            parser.error("the running part needs DROVER_TEST_ZK_HOSTS (var/services/env)")
        per_size(
            "running",
            args.running,
            lambda size: measure_running(
                args.mysql_url,
                args.zk_hosts,
                size,
                args.nodes,
                args.app_start_delay,
                Path(args.profile) if args.profile else None,
                args.keep_logs,
            ),
            lambda size, result: (
                f"{size} jobs over {args.nodes} nodes: all submitted after "
                f"{result['submitted_s']:.1f} s, all RUNNING after {result['running_s']:.1f} s "
                f"({result['creates']} creates on the simulator)"
            ),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
