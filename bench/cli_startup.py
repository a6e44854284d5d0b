"""How long the ``drover`` command line takes to answer: ``drover --help`` (nothing but the
command tree) and ``drover jobs get NAME`` against a real node (the command tree, the typed
client and one request), each the median of 10 runs after one to warm the page cache.

Run alone it prints the figures and what each import of the client path costs
(``python -X importtime``):

    .venv/bin/python -m bench.cli_startup
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness import http
from harness.nodes import DROVER, NodeProcess, admin_token

RUNS = 10
JOB = "bench-cli"


def median_seconds(args: list[str], env: dict[str, str], runs: int = RUNS) -> float:
    """The median wall time of ``drover ARGS`` (it must succeed), after one unmeasured run."""
    times = []
    for i in range(runs + 1):
        started = time.perf_counter()
        done = subprocess.run([DROVER, *args], env=env, capture_output=True, timeout=60)
        took = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"drover {' '.join(args)}: {done.stderr.decode()[-500:]}")
        if i:
            times.append(took)
    return statistics.median(times)


def embedded_node(workdir: Path) -> NodeProcess:
    """A ready node of the embedded default (SQLite, no ZooKeeper) under ``workdir``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DROVER_")}
    env |= {"DROVER_DATA_DIR": str(workdir / "data"), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    subprocess.run([DROVER, "db", "upgrade"], env=env, check=True, capture_output=True)
    node = NodeProcess("bench-cli", env, workdir / "node.log")
    node.start()
    node.wait_ready()
    return node


def compile_sources() -> None:
    """Byte-compile the project's packages, as installing them would (a checkout run with
    PYTHONDONTWRITEBYTECODE, as here, compiles every module from source on every start)."""
    root = Path(__file__).resolve().parents[1]
    packages = [str(root / p) for p in ("drover", "scheduler", "api")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], check=True)


def run() -> dict[str, Any]:
    compile_sources()
    out: dict[str, Any] = {}
    plain = {k: v for k, v in os.environ.items() if not k.startswith("DROVER_")}
    out["cli_help_s"] = median_seconds(["--help"], plain)
    with tempfile.TemporaryDirectory(prefix="drover-bench-cli-") as tmp:
        node = embedded_node(Path(tmp))
        try:
            pipeline = Path(__file__).resolve().parents[1] / "pipelines" / "windowed_counts.py"
            node.post("/v1/jobs", {"name": JOB, "entrypoint": str(pipeline)})
            reader = {**plain, "DROVER_URL": node.url, "DROVER_TOKEN": admin_token(node.env)}
            out["cli_jobs_get_s"] = median_seconds(["jobs", "get", JOB], reader)
            started = time.perf_counter()
            http.get(f"{node.url}/v1/jobs/{JOB}", headers=node.headers(), timeout=10)
            out["cli_jobs_get_request_s"] = time.perf_counter() - started
        finally:
            node.stop()
    return out


def main() -> int:
    figures = run()
    for name, value in figures.items():
        print(f"{name:28} {value:.3f}")
    imports = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import drover.cli.main, drover.api_client"],
        capture_output=True,
        text=True,
    ).stderr.splitlines()
    heavy = sorted(
        (int(line.split("|")[1]), line.split("|")[2].strip())
        for line in imports
        if line.startswith("import time:") and line.split("|")[1].strip().isdigit()
    )[-15:]
    print("\nthe heaviest imports of the client path (cumulative µs):")
    for micros, name in reversed(heavy):
        print(f"  {micros:>9}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
