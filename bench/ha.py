"""High-availability scenarios of a real Drover deployment, returning figures (``bench.suite``).

One :func:`deployment` is N ``drover node run`` processes (all ``default:active``), the simulated
standalone cluster (``harness/simcluster.py``), a fresh MariaDB database and a ZooKeeper namespace
(the helpers of ``bench.takeover``; everything is removed at the end). On it:

- :func:`converge`: seed M jobs (desired RUNNING) and wait until all run, balanced and settled;
- :func:`kill9` / :func:`freeze`: kill -9, or SIGSTOP past the session timeout, of one node, timed
  from the signal by ``bench.takeover.measure_departure`` (detected, owned, balanced,
  reconciled); the node is then restarted (or thawed) and waits to own its share again;
- :func:`rolling_restart`: every node in turn stopped (SIGTERM) and started again: the longest
  hand-over and the Spark applications restarted meanwhile (must be 0);
- :func:`fence_cost`: the fencing check a pipeline runs before each micro-batch (``HttpFence``
  of ``pipelines/drover_runtime.py`` with a progress report), against the nodes, N times.

Every function returns a flat dict of figures (seconds unless the name says otherwise).
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from bench import takeover as tk
from harness.nodes import NodeProcess, poll
from pipelines.drover_runtime import HttpFence, Verdict, progress_report
from scheduler.core.backend import app_name_for
from scheduler.core.states import JobState
from scheduler.store.db import Store
from scheduler.store.models import Job, Run


@dataclass
class Deployment:
    sim: tk.Simulator
    store: Store
    nodes: list[NodeProcess]
    workdir: Path
    session_timeout: float
    names: list[str] = field(default_factory=list)

    @property
    def members(self) -> list[tuple[str, str]]:
        return [(n.node_id, "active") for n in self.nodes]

    def alive(self) -> list[NodeProcess]:
        return [n for n in self.nodes if n.alive]


@contextmanager
def deployment(
    mysql_url: str,
    zk_hosts: str,
    *,
    nodes: int = 3,
    session_timeout: float = 2.0,
    reconcile_interval: float = 2.0,
    app_start_delay: float = 0.5,
    keep_logs: bool = False,
) -> Iterator[Deployment]:
    """N ready nodes that all see each other; everything stopped and removed at the end."""
    workdir = Path(tempfile.mkdtemp(prefix="drover-bench-ha-"))
    started: list[NodeProcess] = []
    ok = False
    try:
        with (
            tk.simulator(app_start_delay) as sim,
            tk.fresh_database(mysql_url) as database_url,
            tk.zk_namespace(zk_hosts) as namespace,
        ):
            tk.migrate(database_url)
            store = Store(database_url)
            try:
                tk.register(store, sim, workdir)
                (workdir / "pipeline.py").write_text(tk.PIPELINE)
                env = {
                    **{k: v for k, v in os.environ.items() if not k.startswith("DROVER_")},
                    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
                    "DROVER_DATABASE_URL": database_url,
                    "DROVER_ZK_HOSTS": zk_hosts,
                    "DROVER_ZK_NAMESPACE": namespace,
                    "DROVER_ZK_SESSION_TIMEOUT": str(session_timeout),
                    "DROVER_RECONCILE_INTERVAL": str(reconcile_interval),
                    "DROVER_GROUPS": f"{tk.GROUP}:active",
                }
                for i in range(1, nodes + 1):
                    node_env = {
                        **env,
                        "DROVER_DATA_DIR": str(workdir / f"node-{i}"),
                        "DROVER_AZ": f"az-{i}",
                    }
                    started.append(NodeProcess(f"node-{i}", node_env, workdir / f"node-{i}.log"))
                for node in started:
                    node.start()
                for node in started:
                    node.wait_ready()
                wait_members(started, len(started))
                yield Deployment(sim, store, started, workdir, session_timeout)
                ok = True
            finally:
                store.dispose()
                for node in started:
                    if node.proc is not None and node.alive:
                        try:
                            node.thaw()  # a frozen node cannot stop
                            node.stop(timeout=60)
                        except Exception as exc:  # noqa: BLE001 - cleanup reports, never masks
                            print(f"warning: {node.node_id} did not stop cleanly: {exc}")
    finally:
        for node in started:
            if node.proc is not None and node.alive:
                node.kill9()
        if keep_logs or not ok:
            print(f"  node logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def wait_members(nodes: list[NodeProcess], count: int, timeout: float = 90.0) -> None:
    poll(
        lambda: all(len(tk.group_view(n).get("members") or []) == count for n in nodes),
        timeout=timeout,
        interval=0.2,
        what=f"every node to see {count} members",
    )


def phase_timeout(jobs: int) -> float:
    return 90.0 + jobs * 0.01


class NotConverged(TimeoutError):
    """Not every job RUNNING by the deadline: how far it got."""

    def __init__(self, jobs: int, deadline: float, running: int, submitted: int) -> None:
        super().__init__(
            f"{running} of {jobs} jobs RUNNING ({submitted} submitted) after {deadline:.0f} s"
        )
        self.jobs, self.deadline, self.running, self.submitted = jobs, deadline, running, submitted


def converge(dep: Deployment, jobs: int, deadline: float | None = None) -> dict[str, float]:
    """Seed ``jobs`` jobs (desired RUNNING, unowned) and wait until every one is RUNNING on the
    simulator, owned by its crc32 owner, and every node finished a fresh tick. Raises
    :class:`NotConverged` when not every job runs after ``deadline`` seconds."""
    dep.names = tk.job_names(jobs)
    started = time.monotonic()
    tk.seed_jobs(dep.store, dep.names, str(dep.workdir / "pipeline.py"))
    seeded = time.monotonic() - started
    deadline = deadline or 120.0 + jobs * 0.03
    base = dep.sim.stats()["creates"]
    try:
        marks = tk.wait_converged(dep.store, dep.sim, jobs, timeout=deadline)
    except TimeoutError as exc:
        running = tk.count_in_state(dep.store, JobState.RUNNING)
        submitted = dep.sim.stats()["creates"] - base
        raise NotConverged(jobs, deadline, running, submitted) from exc
    tk.wait_balanced(dep.store, dep.names, dep.members, phase_timeout(jobs))
    ticks = tk.wait_settled(dep.nodes, phase_timeout(jobs))
    return {
        "seed_s": seeded,
        "all_submitted_s": marks["submitted"],
        "all_running_s": marks["running"],
        "steady_tick_max_s": max(float(t["seconds"]) for t in ticks.values()),
    }


def departure_figures(d: tk.Departure, session_timeout: float) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for what in ("detected", "owned", "balanced", "reconciled"):
        value = getattr(d, what)
        out[f"{what}_s"] = value
        out[f"{what}_x_session"] = None if value is None else value / session_timeout
    if d.ticks:
        out["reconcile_tick_max_s"] = max(seconds for seconds, _, _ in d.ticks.values())
    return out


def _restarts(before: tk.Snapshot, after: tk.Snapshot) -> dict[str, int]:
    return {
        "app_creates": after.creates - before.creates,
        "app_kills": after.kills - before.kills,
        "app_ids_changed": len(set(before.apps) ^ set(after.apps)),
        "new_runs": after.runs - before.runs,
        "double_runs": tk.double_runs(after.apps),
    }


def _rejoin(dep: Deployment, node: NodeProcess, jobs: int) -> float:
    started = time.monotonic()
    wait_members(dep.nodes, len(dep.nodes), phase_timeout(jobs))
    tk.wait_balanced(dep.store, dep.names, dep.members, phase_timeout(jobs))
    rejoined = time.monotonic() - started
    tk.wait_settled(dep.nodes, phase_timeout(jobs))
    return rejoined


def kill9(dep: Deployment, victim: int = 1, poll_s: float = 0.05) -> dict[str, Any]:
    """kill -9 of node ``victim`` (index), timed; then it is started again and rejoins."""
    node = dep.nodes[victim]
    survivors = [n for n in dep.nodes if n is not node]
    after = [m for m in dep.members if m[0] != node.node_id]
    jobs = len(dep.names)
    before = tk.snapshot(dep.store, dep.sim)
    d = tk.measure_departure(
        "kill -9",
        node,
        survivors,
        after,
        dep.names,
        dep.store,
        node.kill9,
        timeout=phase_timeout(jobs),
        interval=poll_s,
    )
    tk.print_departure(d, dep.session_timeout)
    started = time.monotonic()
    node.start()
    node.wait_ready()
    ready = time.monotonic() - started
    rejoined = _rejoin(dep, node, jobs)
    out: dict[str, Any] = departure_figures(d, dep.session_timeout)
    out["orphans"] = d.jobs_before
    out["restart_ready_s"] = ready
    out["restart_rebalanced_s"] = ready + rejoined
    out.update(_restarts(before, tk.snapshot(dep.store, dep.sim)))
    return out


def freeze(dep: Deployment, victim: int = 2, poll_s: float = 0.05) -> dict[str, Any]:
    """SIGSTOP of node ``victim`` until the others took its jobs over (past its session
    timeout), timed; then SIGCONT: it must find its session lost, act on nothing it no longer
    owns, and rejoin."""
    node = dep.nodes[victim]
    survivors = [n for n in dep.nodes if n is not node]
    after = [m for m in dep.members if m[0] != node.node_id]
    jobs = len(dep.names)
    before = tk.snapshot(dep.store, dep.sim)
    try:
        d = tk.measure_departure(
            "SIGSTOP",
            node,
            survivors,
            after,
            dep.names,
            dep.store,
            node.freeze,
            timeout=phase_timeout(jobs),
            interval=poll_s,
        )
    finally:
        node.thaw()
    tk.print_departure(d, dep.session_timeout)
    started = time.monotonic()
    rejoined = _rejoin(dep, node, jobs)
    out: dict[str, Any] = departure_figures(d, dep.session_timeout)
    out["orphans"] = d.jobs_before
    out["thaw_rebalanced_s"] = rejoined
    out["thaw_settled_s"] = time.monotonic() - started
    out.update(_restarts(before, tk.snapshot(dep.store, dep.sim)))
    return out


def rolling_restart(dep: Deployment, poll_s: float = 0.05) -> dict[str, Any]:
    """Every node in turn: SIGTERM, exit, start again, own its share again. The hand-over of a
    node is the time from its SIGTERM until no job has it as owner any more."""
    jobs = len(dep.names)
    before = tk.snapshot(dep.store, dep.sim)
    started = time.monotonic()
    handovers: list[float] = []
    reconciled: list[float] = []
    for node in dep.nodes:
        rest = [n for n in dep.nodes if n is not node]
        after = [m for m in dep.members if m[0] != node.node_id]
        d = tk.measure_departure(
            "rolling restart (SIGTERM)",
            node,
            rest,
            after,
            dep.names,
            dep.store,
            node.terminate,
            timeout=phase_timeout(jobs),
            interval=poll_s,
            watch_exit=True,
        )
        node.wait_exit()
        tk.print_departure(d, dep.session_timeout)
        handovers.append(float("inf") if d.owned is None else d.owned)
        reconciled.append(float("inf") if d.reconciled is None else d.reconciled)
        node.start()
        node.wait_ready()
        _rejoin(dep, node, jobs)
    restarts = _restarts(before, tk.snapshot(dep.store, dep.sim))
    return {
        "total_s": time.monotonic() - started,
        "longest_handover_s": max(handovers),
        "longest_reconciled_s": max(reconciled),
        # an application restarted = a new submission on the cluster or a kill of a live one
        "app_restarts": restarts["app_creates"] + restarts["app_kills"],
        **restarts,
        "jobs_not_running": jobs - tk.count_in_state(dep.store, JobState.RUNNING),
    }


def fence_cost(dep: Deployment, checks: int = 300) -> dict[str, float]:
    """The check a pipeline runs before each micro-batch: ``HttpFence.ask`` with its run's token
    and a progress report, over the nodes' URLs (the first answers), ``checks`` times in a row."""
    with dep.store.session() as session:
        job, run_id = session.execute(
            sa.select(Job.name, Run.id)
            .join(Run, Run.id == Job.current_run_id)
            .where(Job.state == JobState.RUNNING.value)
            .limit(1)
        ).one()
    # the token its driver holds: the store keeps only its digest
    token = dep.sim.fencing_token(app_name_for(job, run_id))
    assert token is not None, f"run {run_id} of {job} was never submitted to the simulator"
    fence = HttpFence([n.url for n in dep.nodes if n.alive])
    last = {
        "batchId": 0,
        "numInputRows": 40,
        "inputRowsPerSecond": 20.0,
        "processedRowsPerSecond": 35.5,
        "durationMs": {"triggerExecution": 1130},
        "timestamp": "2026-11-25T01:00:00.000Z",
    }
    timings = []
    for batch in range(1, checks + 1):
        report = progress_report(batch, {**last, "batchId": batch - 1}, 2000)
        began = time.perf_counter()
        verdict, detail = fence.ask(job, token, report)
        timings.append(time.perf_counter() - began)
        if verdict is not Verdict.CURRENT:
            raise RuntimeError(f"fence check of {job} answered {verdict.name}: {detail}")
    timings.sort()
    return {
        "checks": float(checks),
        "p50_ms": statistics.median(timings) * 1000,
        "p99_ms": timings[min(len(timings) - 1, int(0.99 * len(timings)))] * 1000,
        "max_ms": timings[-1] * 1000,
    }


def full_pass(dep: Deployment, poll_s: float = 0.1) -> dict[str, Any]:
    """A full reconcile pass: a graceful stop of the last node makes every survivor start a new
    epoch, whose first tick claims the orphans and then looks at every job it owns; its time is
    the survivors' longest such tick."""
    node = dep.nodes[-1]
    rest = dep.nodes[:-1]
    after = [m for m in dep.members if m[0] != node.node_id]
    jobs = len(dep.names)
    d = tk.measure_departure(
        "graceful stop (SIGTERM)",
        node,
        rest,
        after,
        dep.names,
        dep.store,
        node.terminate,
        timeout=phase_timeout(jobs),
        interval=poll_s,
        watch_exit=True,
    )
    node.wait_exit()
    tk.print_departure(d, dep.session_timeout)
    if not d.ticks:
        raise RuntimeError("no survivor reported its first tick under the new epoch")
    return {
        "full_pass_s": max(seconds for seconds, _, _ in d.ticks.values()),
        "full_pass_jobs": max(looked for _, looked, _ in d.ticks.values()),
        "handover_owned_s": d.owned,
        "handover_reconciled_s": d.reconciled,
    }
