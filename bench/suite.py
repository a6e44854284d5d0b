"""The benchmark suite (``make bench``): every figure of Drover's promises and costs, one run.

Runs the steps below one after the other (each starts what it needs and removes it again: fresh
MariaDB databases, ZooKeeper namespaces, simulated clusters, ``drover node run`` processes) and
writes ``bench/results/latest.json`` (one flat object: named figures, units in the names) and
``bench/results/latest.md`` (the same as a Markdown table, with the targets next to the figures
that have one). Both files are rewritten after every step, so an interrupted run keeps what it
measured. Every ratio compares two figures measured side by side in the same step.

Steps (``--only`` picks some; ``BENCH_QUICK=1`` / ``--quick`` runs a ~5 minute subset):

``controlplane``  SQL statements per submission; the steady tick at 1,000 and 10,000 owned jobs
                  (time, statements, rows) and their ratio (``bench.controlplane``)
``steady_real``   the steady tick with the real standalone backend on a private real Spark
                  cluster running 4 real applications, beside the instant fake's at 4 jobs
                  (4: each real application costs ~0.9 GB on 2 shared cores)
``node_rss``      an idle node's processes, RSS/PSS and ready time, in 1 and in 50 groups
                  (``bench.node_rss``)
``takeover_1k``   3 nodes, 1,000 jobs on the simulated cluster: time to RUNNING, the fence check
                  per micro-batch, kill -9 and SIGSTOP of a node past its session timeout
                  (detected, owned, reconciled), a rolling restart of every node (``bench.ha``)
``takeover_10k``  the same with 10,000 jobs (no rolling restart)
``scale_50k``     50,000 jobs over 3 nodes: time to RUNNING from empty, a full reconcile pass
``submit``        the REST backend against ``spark-submit`` on the real standalone cluster A
``failover``      1,000 jobs between two simulated clusters, after the executor's store trips
                  per failover item on 50 (``bench.failover``)
``failover_real`` 3 real streaming jobs from standalone cluster A to B
``az_loss``       4 real streaming jobs on a private cluster A, every process of A killed at
                  once: until every job is RUNNING on a private B, per job and in total
                  (``bench.azloss``; target: the fence lease + 60 s)
``api``           ``bench/api.py``'s ``run(quick)`` when it exists (API throughput and latency
                  next to a bare FastAPI endpoint)
``yarn``          on the YARN test clusters (``bench.yarn``): submit -> RUNNING through Drover's
                  backend against ``spark-submit`` run by hand the same way (median, p95), kill
                  requested -> confirmed, memory and start time of the two clusters
``yarn_failover`` the failover of 10 real streaming jobs from YARN cluster A to B through the
                  API: request -> every job RUNNING on B (per job median, p95, the total), the
                  failover's end, every job resumed on B; never one job RUNNING on both
                  (``bench.yarn``)
``cli``           ``drover --help`` and ``drover jobs get NAME`` against a real node, each the
                  median of 10 runs (``bench.cli_startup``)

Services come from the environment (``var/services/env``: ``DROVER_TEST_MYSQL_URL``,
``DROVER_TEST_ZK_HOSTS``, ``DROVER_TEST_SPARK_{A,B}_*``); ``scripts/bench.sh`` (``make bench``)
starts them when they are not given. ``--lock PATH`` (or ``BENCH_LOCK``) takes an exclusive
``flock`` on PATH around the steps (released between two steps once held ``--lock-hold``
seconds), so the suite shares a machine with other heavy work.

    set -a; . var/services/env; set +a
    .venv/bin/python -m bench.suite [--quick] [--only takeover_1k,submit] [--merge]
    .venv/bin/python -m bench.suite --combine run1/latest.json run2/latest.json --out DIR
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from bench.targets import TARGETS, Figures
from harness.procs import terminate_like_interrupt

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


@dataclass(frozen=True)
class Env:
    mysql_url: str
    zk_hosts: str
    spark: dict[str, dict[str, str]]  # "A"/"B" -> master, rest, ui
    quick: bool


@dataclass(frozen=True)
class Step:
    name: str
    run: Callable[[Env], Figures]
    quick: bool  # part of the quick subset
    what: str


def _flatten(prefix: str, values: dict[str, Any]) -> Figures:
    return {f"{prefix}_{key}": value for key, value in values.items()}


def _size(jobs: int) -> str:
    return f"{jobs // 1000}k" if jobs % 1000 == 0 else str(jobs)


# -- steps --------------------------------------------------------------------------------------


def step_controlplane(env: Env) -> Figures:
    from bench import controlplane as cp

    out: Figures = {}
    statements = cp.measure_statements(env.mysql_url, 300)
    out["submission_statements"] = statements["total_per_submission"]
    for kind, value in statements["per_submission"].items():
        out[f"submission_statements_{kind.lower()}"] = value
    out.setdefault("submission_statements_rollback", 0.0)
    out["submission_ms"] = statements["ms_per_submission"]
    ticks = 5 if env.quick else 9
    steady = {size: cp.measure_steady(env.mysql_url, size, ticks) for size in (1000, 10000)}
    for size, s in steady.items():
        label = _size(size)
        out[f"steady_tick_{label}_ms"] = s["tick_s"] * 1000
        out[f"steady_tick_{label}_statements"] = s["tick_statements"]
        out[f"steady_tick_{label}_rows"] = s["tick_rows"]
        out[f"steady_tick_{label}_jobs_looked_at"] = s["tick_looked_at"]
        out[f"first_tick_{label}_ms"] = s["first_tick_s"] * 1000
    out["steady_tick_ratio_10k_to_1k"] = steady[10000]["tick_s"] / steady[1000]["tick_s"]
    out["steady_tick_statements_ratio_10k_to_1k"] = steady[10000]["tick_statements"] / max(
        1.0, steady[1000]["tick_statements"]
    )
    return out


#: jobs of the real-cluster steady tick: a real application costs ~0.9 GB (RUNTIME-NOTES)
STEADY_REAL_JOBS = 4


def step_steady_real(env: Env) -> Figures:
    from bench import controlplane as cp

    s = cp.measure_steady_real(env.mysql_url, STEADY_REAL_JOBS, 5 if env.quick else 9)
    label = f"steady_tick_real_{STEADY_REAL_JOBS}"
    print(
        f"steady tick at {STEADY_REAL_JOBS} jobs: real standalone {s['tick_s'] * 1000:.1f} ms, "
        f"instant fake {s['fake_tick_s'] * 1000:.1f} ms"
    )
    return {
        f"{label}_ms": s["tick_s"] * 1000,
        f"{label}_max_ms": s["tick_max_s"] * 1000,
        f"{label}_listings": s["tick_listings"],
        f"{label}_fake_ms": s["fake_tick_s"] * 1000,
        f"first_tick_real_{STEADY_REAL_JOBS}_ms": s["first_tick_s"] * 1000,
    }


def step_node_rss(env: Env) -> Figures:
    from bench import node_rss

    args = argparse.Namespace(mysql_url=env.mysql_url, zk_hosts=env.zk_hosts, settle=15.0)
    out: Figures = {}
    workdir = Path(tempfile.mkdtemp(prefix="drover-bench-rss-"))
    try:
        for groups in (1,) if env.quick else (1, 50):
            sample = node_rss.run_one(groups, args, workdir)
            node_rss.print_sample(sample)
            suffix = "" if groups == 1 else f"_{groups}_groups"
            out[f"node_rss_mib{suffix}"] = sample.rss / node_rss.MIB
            out[f"node_pss_mib{suffix}"] = sample.pss / node_rss.MIB
            out[f"node_processes{suffix}"] = len(sample.procs)
            out[f"node_ready_s{suffix}"] = sample.ready
    finally:
        subprocess.run(["rm", "-rf", str(workdir)], check=False)
    return out


def _takeover(env: Env, jobs: int, *, rolling: bool, fence: bool) -> Figures:
    from bench import ha

    label = _size(jobs)
    out: Figures = {}
    with ha.deployment(env.mysql_url, env.zk_hosts, nodes=3) as dep:
        out["session_timeout_s"] = dep.session_timeout
        converged = ha.converge(dep, jobs)
        print(f"{jobs} jobs RUNNING over 3 nodes after {converged['all_running_s']:.1f} s")
        out[f"scale_{label}_all_running_s"] = converged["all_running_s"]
        out[f"scale_{label}_all_submitted_s"] = converged["all_submitted_s"]
        if fence:
            out.update(_flatten("fence_check", ha.fence_cost(dep)))
        for kind, act in (("kill9", ha.kill9), ("sigstop", ha.freeze)):
            figures = act(dep)
            prefix = f"takeover_{kind}_{label}"
            out.update(_flatten(prefix, figures))
            # the whole takeover: until every survivor finished its first tick of the new epoch
            out[f"{prefix}_s"] = figures["reconciled_s"]
            out[f"{prefix}_x_session"] = figures["reconciled_x_session"]
        if rolling:
            out.update(_flatten("rolling_restart", ha.rolling_restart(dep)))
    return out


def step_takeover_1k(env: Env) -> Figures:
    return _takeover(env, 1000, rolling=True, fence=True)


def step_takeover_10k(env: Env) -> Figures:
    return _takeover(env, 10000, rolling=False, fence=False)


#: how long the 50k step waits for every job to run (3x its 120 s target): the lock it holds is
#: shared, and a control plane that misses the target by more is measured by how far it got
SCALE_50K_DEADLINE_S = 360.0


def step_scale_50k(env: Env) -> Figures:
    from bench import ha

    # session timeout 4 s like bench.controlplane's time-to-RUNNING runs: at 50k jobs a 2 s
    # session expires under CPU starvation on a loaded 2-core machine (claims lost mid-tick)
    with ha.deployment(env.mysql_url, env.zk_hosts, nodes=3, session_timeout=4.0) as dep:
        try:
            converged = ha.converge(dep, 50000, deadline=SCALE_50K_DEADLINE_S)
        except ha.NotConverged as exc:
            # a bounded bench: how far it got is the figure (the target is 120 s)
            print(f"50000 jobs over 3 nodes: {exc}")
            return {
                "scale_50k_all_running_s": None,
                "scale_50k_deadline_s": exc.deadline,
                "scale_50k_running_at_deadline": exc.running,
                "scale_50k_submitted_at_deadline": exc.submitted,
            }
        print(f"50000 jobs RUNNING over 3 nodes after {converged['all_running_s']:.1f} s")
        passed = ha.full_pass(dep)
    return {
        "scale_50k_all_running_s": converged["all_running_s"],
        "scale_50k_all_submitted_s": converged["all_submitted_s"],
        "scale_50k_steady_tick_max_s": converged["steady_tick_max_s"],
        "scale_50k_full_pass_s": passed["full_pass_s"],
        "scale_50k_full_pass_jobs": passed["full_pass_jobs"],
        "scale_50k_handover_owned_s": passed["handover_owned_s"],
        "scale_50k_handover_reconciled_s": passed["handover_reconciled_s"],
    }


def step_submit(env: Env) -> Figures:
    from bench import submit

    a = env.spark["A"]
    figures = submit.measure(1 if env.quick else 3, a["master"], a["rest"], a["ui"])
    return {
        "submit_ratio_rest_vs_cli": figures["ratio_rest_vs_cli"],
        "submit_rest_median_s": figures["rest_median_s"],
        "submit_cli_median_s": figures["cli_median_s"],
        "submit_rest_create_answer_ms": figures["rest_create_answer_ms"],
        "submit_rounds": figures["rounds"],
    }


FAILOVER_DEADLINE_S = 420.0


def step_failover(env: Env) -> Figures:
    from bench import failover

    jobs = 200 if env.quick else 1000
    args = failover.parse(
        ["--jobs", str(jobs), "--mysql-url", env.mysql_url, "--zk-hosts", env.zk_hosts]
        # bounded (the lock is shared): a failover still under way then is measured by how far
        # it got (failover_<n>_items_done, _waited_s); its total is then null
        + ["--timeout", str(FAILOVER_DEADLINE_S)]
    )
    trips = failover.measure_trips(args)
    figures = failover.measure_sim(args)
    label = _size(jobs)
    out = _flatten(f"failover_{label}", figures)
    out[f"failover_{label}_s"] = figures["total_s"]
    out["failover_trips_per_item"] = trips["trips_per_item"]
    out["failover_statements_per_item"] = trips["statements_per_item"]
    return out


def step_failover_real(env: Env) -> Figures:
    from bench import failover

    figures = failover.measure_real(env.mysql_url, env.zk_hosts, env.spark, jobs=3)
    return _flatten("failover_real", figures)


def step_az_loss(env: Env) -> Figures:
    from bench import azloss

    return _flatten("az_loss", azloss.measure(env.mysql_url, env.zk_hosts, jobs=4))


def step_yarn(env: Env) -> Figures:
    from bench import yarn

    if not os.environ.get("DROVER_TEST_YARN_A_RM"):
        return {"yarn_missing": "no YARN test clusters (HADOOP_CLUSTERS=2 scripts/services.sh up)"}
    figures = {**yarn.measure_clusters(), **yarn.measure_submit(2 if env.quick else 4)}
    return _flatten("yarn", figures)


#: jobs of the YARN failover step (each ~0.9 GB of real memory, 1.5 GB of a NodeManager)
YARN_FAILOVER_JOBS = 10


def step_yarn_failover(env: Env) -> Figures:
    from bench import yarn

    if not os.environ.get("DROVER_TEST_YARN_A_RM"):
        return {"yarn_missing": "no YARN test clusters (HADOOP_CLUSTERS=2 scripts/services.sh up)"}
    jobs = 4 if env.quick else YARN_FAILOVER_JOBS
    figures = yarn.measure_failover(env.mysql_url, env.zk_hosts, jobs)
    return _flatten(f"yarn_failover_{jobs}", figures)


def step_cli(env: Env) -> Figures:
    from bench import cli_startup

    return cli_startup.run()


def step_api(env: Env) -> Figures:
    try:
        from bench import api  # type: ignore[attr-defined]
    except ImportError:
        return {"api_missing": "bench/api.py is not in this checkout"}
    run = getattr(api, "run", None)
    if run is None:
        return {"api_missing": "bench/api.py has no run(quick)"}
    figures = run(env.quick)
    if not isinstance(figures, dict):
        raise TypeError(f"bench.api.run returned {type(figures).__name__}, not a dict")
    return {k if k.startswith("api_") else f"api_{k}": v for k, v in figures.items()}


STEPS = [
    Step("controlplane", step_controlplane, True, "statements per submission, steady tick"),
    Step("steady_real", step_steady_real, False, "steady tick on a real standalone cluster"),
    Step("node_rss", step_node_rss, True, "idle node memory"),
    Step("takeover_1k", step_takeover_1k, True, "1,000 jobs: takeovers, rolling restart, fence"),
    Step("takeover_10k", step_takeover_10k, False, "10,000 jobs: takeovers"),
    Step("scale_50k", step_scale_50k, False, "50,000 jobs: to RUNNING, a full pass"),
    Step("submit", step_submit, True, "REST backend vs spark-submit"),
    Step("failover", step_failover, True, "failover on simulated clusters"),
    Step("failover_real", step_failover_real, False, "failover of 3 real jobs"),
    Step("az_loss", step_az_loss, False, "a real cluster lost: every job RUNNING on the other"),
    Step("api", step_api, True, "API throughput and latency"),
    Step("yarn", step_yarn, False, "YARN: submit->RUNNING vs spark-submit, kill, test clusters"),
    Step("yarn_failover", step_yarn_failover, False, "YARN: failover of 10 real jobs A -> B"),
    Step("cli", step_cli, True, "drover --help and jobs get start-up (median of 10)"),
]


# -- results ------------------------------------------------------------------------------------


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if not math.isfinite(value) else round(value, 4)
    return value


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def write_results(figures: Figures, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    clean = {k: _clean(v) for k, v in figures.items()}
    tmp = out_dir / "latest.json.tmp"
    tmp.write_text(json.dumps(clean, indent=2, sort_keys=True) + "\n")
    tmp.replace(out_dir / "latest.json")
    tmp = out_dir / "latest.md.tmp"
    tmp.write_text(markdown(clean))
    tmp.replace(out_dir / "latest.md")


META = ("bench_", "step_")


def markdown(figures: Figures) -> str:
    lines = [
        "# Drover benchmark results",
        "",
        f"Mode **{figures.get('bench_mode', '?')}**, commit `{figures.get('bench_commit', '?')}`,"
        f" started {figures.get('bench_started_at', '?')} on {figures.get('bench_machine', '?')}."
        " Written by `make bench` (`bench/suite.py`); seconds unless a name says otherwise;"
        " `x_session` figures are multiples of `session_timeout_s`. The machine may be shared:"
        " each step's 1-minute load average at its start is in the steps table.",
        "",
        "## Targets",
        "",
        "| figure | value | target | met | source |",
        "|---|---:|---|---|---|",
    ]
    for t in TARGETS:
        met = t.met(figures)
        verdict = {True: "yes", False: "**NO**", None: "not measured"}[met]
        lines.append(
            f"| `{t.figure}` | {_fmt(figures.get(t.figure))} | {t.text()} | {verdict} |"
            f" {t.source} |"
        )
    lines += [
        "",
        "## Steps",
        "",
        "| step | measured at | commit | load at start | seconds | error |",
        "|---|---|---|---:|---:|---|",
    ]
    for step in STEPS:
        at = figures.get(f"step_{step.name}_at")
        if at is None:
            continue
        error = str(figures.get(f"step_{step.name}_error") or "").replace("|", "/")[:160]
        commit = figures.get(f"step_{step.name}_commit", "?")
        seconds = _fmt(figures.get(f"step_{step.name}_s"))
        load = _fmt(figures.get(f"step_{step.name}_load1"))
        lines.append(f"| {step.name} | {at} | `{commit}` | {load} | {seconds} | {error} |")
    lines += ["", "## All figures", "", "| figure | value |", "|---|---:|"]
    for key in sorted(figures):
        if key.startswith(META):
            continue
        lines.append(f"| `{key}` | {_fmt(figures[key])} |")
    return "\n".join(lines) + "\n"


# -- main ---------------------------------------------------------------------------------------


def combine(paths: list[Path]) -> Figures:
    """The results of several runs in one (later files win, a step's figures as a whole)."""
    combined: Figures = {}
    for path in paths:
        loaded = json.loads(path.read_text())
        for s in STEPS:
            if f"step_{s.name}_at" not in loaded:
                continue
            # a later run of a step replaces what an earlier one said about it (its error)
            for key in [k for k in combined if k.startswith(f"step_{s.name}_")]:
                del combined[key]
            # results of older versions name the commit once, per run
            loaded.setdefault(f"step_{s.name}_commit", loaded.get("bench_commit", "?"))
        combined.update(loaded)
    combined["bench_total_s"] = sum(float(combined.get(f"step_{s.name}_s") or 0.0) for s in STEPS)
    return combined


def select_steps(only: str, quick: bool) -> list[Step]:
    """The steps named in ``only`` (comma-separated), else all (the quick subset if ``quick``),
    in the suite's order."""
    names = [s.strip() for s in only.split(",") if s.strip()]
    unknown = set(names) - {s.name for s in STEPS}
    if unknown:
        raise ValueError(f"unknown steps {sorted(unknown)}; steps: {[s.name for s in STEPS]}")
    if names:
        return [s for s in STEPS if s.name in names]
    return [s for s in STEPS if s.quick or not quick]


class HeavyLock:
    """An exclusive ``flock`` on ``path`` (none when empty) held around steps. Consecutive steps
    keep it while it has been held for less than ``hold_s``; then it is released before the next
    step, so that other heavy work sharing the machine gets its turn (and no hold is much longer
    than ``hold_s`` plus one step)."""

    def __init__(self, path: str, hold_s: float) -> None:
        self.path = path
        self.hold_s = hold_s
        self._handle: IO[str] | None = None
        self._since = 0.0

    def before_step(self) -> None:
        if not self.path:
            return
        if self._handle is not None and time.monotonic() - self._since < self.hold_s:
            return
        if self._handle is not None:
            self.release()
            # flock is not a queue: taken again at once, the lock would go straight back to us
            # (measured: held 25 min in a row). Step back until a waiter has it, or none wants it
            self._yield_to_waiters()
        self._handle = open(self.path, "a")  # noqa: SIM115 - held across steps, closed in release
        waited = time.monotonic()
        fcntl.flock(self._handle, fcntl.LOCK_EX)
        self._since = time.monotonic()
        if self._since - waited > 1:
            print(f"(waited {self._since - waited:.0f} s for the lock {self.path})", flush=True)

    def _yield_to_waiters(self, within_s: float = 10.0) -> None:
        """Until another process holds the lock (then our blocking flock queues behind it), or
        ``within_s`` passed without anybody taking it."""
        deadline = time.monotonic() + within_s
        with open(self.path, "a") as probe:
            while time.monotonic() < deadline:
                try:
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return  # somebody else has it now
                fcntl.flock(probe, fcntl.LOCK_UN)
                time.sleep(0.2)  # not synchronisation: the interval between two looks

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", default=os.environ.get("BENCH_QUICK") == "1"
    )
    parser.add_argument("--only", default="", help="comma-separated steps (default: all)")
    parser.add_argument("--merge", action="store_true", help="update the existing latest.json")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--lock", default=os.environ.get("BENCH_LOCK", ""))
    parser.add_argument(
        "--lock-hold",
        type=float,
        default=300.0,
        help="seconds after which the lock is released (and taken again) between steps",
    )
    parser.add_argument(
        "--combine",
        nargs="+",
        default=[],
        metavar="JSON",
        help="run nothing: merge these results files (later ones win) into --out",
    )
    args = parser.parse_args(argv)
    if args.combine:
        write_results(combine([Path(p) for p in args.combine]), Path(args.out))
        print((Path(args.out) / "latest.md").read_text())
        return 0
    try:
        steps = select_steps(args.only, args.quick)
    except ValueError as exc:
        parser.error(str(exc))
    spark = {
        letter: {
            "master": os.environ.get(f"DROVER_TEST_SPARK_{letter}_MASTER", ""),
            "rest": os.environ.get(f"DROVER_TEST_SPARK_{letter}_REST", "").rstrip("/"),
            "ui": os.environ.get(f"DROVER_TEST_SPARK_{letter}_UI", "").rstrip("/"),
        }
        for letter in ("A", "B")
    }
    env = Env(
        os.environ.get("DROVER_TEST_MYSQL_URL", ""),
        os.environ.get("DROVER_TEST_ZK_HOSTS", ""),
        spark,
        args.quick,
    )
    if not env.mysql_url or not env.zk_hosts:
        parser.error("needs DROVER_TEST_MYSQL_URL and DROVER_TEST_ZK_HOSTS (var/services/env)")
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    terminate_like_interrupt()

    out_dir = Path(args.out)
    figures: Figures = {}
    if args.merge and (out_dir / "latest.json").exists():
        figures = json.loads((out_dir / "latest.json").read_text())
    started = datetime.now(UTC).isoformat(timespec="seconds")
    if not args.merge or not figures:
        figures["bench_started_at"] = started
    figures["bench_mode"] = "quick" if args.quick else "full"
    figures["bench_commit"] = _commit()
    figures["bench_machine"] = f"{os.cpu_count()} cores, {platform.system()} {platform.release()}"
    print(f"bench suite ({figures['bench_mode']}): {[s.name for s in steps]}", flush=True)
    failed: list[str] = []
    lock = HeavyLock(args.lock, args.lock_hold)
    t0 = time.monotonic()
    for step in steps:
        for key in [k for k in figures if k.startswith(f"step_{step.name}_")]:
            del figures[key]
        print(f"\n==> {step.name}: {step.what}", flush=True)
        began = time.monotonic()
        try:
            lock.before_step()
            began = time.monotonic()  # the step's own time, not the wait for the lock
            figures[f"step_{step.name}_at"] = datetime.now(UTC).isoformat(timespec="seconds")
            figures[f"step_{step.name}_commit"] = figures["bench_commit"]
            figures[f"step_{step.name}_load1"] = os.getloadavg()[0]
            result = step.run(env)
            figures.update(result)
        except KeyboardInterrupt:
            lock.release()
            figures[f"step_{step.name}_error"] = "interrupted"
            write_results(figures, out_dir)
            print("interrupted; what was measured is in the results")
            return 130
        except Exception as exc:  # noqa: BLE001 - one failed step never loses the others
            traceback.print_exc()
            figures[f"step_{step.name}_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
            failed.append(step.name)
        figures[f"step_{step.name}_s"] = time.monotonic() - began
        write_results(figures, out_dir)
        print(f"<== {step.name}: {time.monotonic() - began:.0f} s", flush=True)
    lock.release()
    print(f"\nthis run: {time.monotonic() - t0:.0f} s")
    # the steps' times in the results (with --merge: also those of earlier runs)
    figures["bench_total_s"] = sum(float(figures.get(f"step_{s.name}_s") or 0.0) for s in STEPS)
    write_results(figures, out_dir)
    print("\n" + (out_dir / "latest.md").read_text())
    missed = [t.figure for t in TARGETS if t.met(figures) is False]
    if missed:
        print(f"targets missed: {missed}")
    if failed:
        print(f"steps failed: {failed}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
