"""What the driver <-> application link costs (a driver linked to its application by the id
the driver logs, never by name): prints figures, asserts nothing.

``sim`` (default): a simulated standalone master in its own process (``harness/simcluster.py``)
with N drivers (default 1,000), all submitted through the real :class:`StandaloneRestBackend`,
their apps registered under one name of the pipelines' own (``--own-name``; ``""`` keeps
Drover's names). Then the cost of one reconcile tick's status() calls over all N runs:

- ``first``: the tick that links every driver (one log read each, once);
- ``steady``: every later tick (links cached: one listing, no log read);
- ``takeover-recorded``: a fresh backend (a node taking over) handed each run's recorded tag and
  app id, as the reconciler does;
- ``takeover-tag-only``: a fresh backend handed only the tags (runs recorded before their app
  registered): one log read per driver again;
- ``cold``: a fresh backend handed nothing (``list_applications``-like): launch command and link
  from one read per driver.

``real``: one run of ``pipelines/rate_counter.py`` (its own app name) on a real standalone
cluster (``DROVER_TEST_SPARK_A_*``): when the driver launched, when its app registered in the
master's ``/json/``, when status() first returned the app id (the link), RUNNING; then the kill
until status() confirmed it and the app left ``/json/``. Run it under the heavy lock.

    set -a; . var/services/env; set +a
    flock /tmp/drover-heavy.lock .venv/bin/python -m bench.link [sim] [--runs 1000]
    flock /tmp/drover-heavy.lock .venv/bin/python -m bench.link real
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from harness import http
from harness.nodes import free_port, poll
from scheduler.backends.standalone import StandaloneRestBackend
from scheduler.core.backend import AppState, AppStatus, SubmitRequest

ROOT = Path(__file__).resolve().parents[1]


def _requests(sim_url: str) -> int:
    return int(http.get(f"{sim_url}/sim/stats").json()["requests"])


def _tick(
    backend: StandaloneRestBackend,
    sim_url: str,
    calls: list[Callable[[], AppStatus]],
) -> tuple[float, int, int, list[AppStatus]]:
    """Seconds, HTTP requests to the cluster and log reads of one pass of status() calls."""
    requests, reads = _requests(sim_url), backend.log_reads
    started = time.perf_counter()
    statuses = [call() for call in calls]
    seconds = time.perf_counter() - started
    return seconds, _requests(sim_url) - requests, backend.log_reads - reads, statuses


def bench_sim(runs: int, own_name: str, listing_ttl: float) -> None:
    port = free_port()
    command = [sys.executable, "-m", "harness.simcluster", "--port", str(port)]
    command += ["--app-start-delay", "0", "--retained-drivers", str(runs)]
    if own_name:
        command += ["--pipeline-app-name", own_name]
    sim = subprocess.Popen(command, stdout=subprocess.PIPE, cwd=ROOT)
    try:
        assert sim.stdout is not None
        urls = json.loads(sim.stdout.readline())
        url, master = urls["rest_url"], urls["master_url"]

        def backend() -> StandaloneRestBackend:
            return StandaloneRestBackend(url, master, url, listing_ttl_s=listing_ttl)

        first = backend()
        started = time.perf_counter()
        subs = [
            first.submit(
                SubmitRequest(
                    job_name=f"job-{i}",
                    run_id=i + 1,
                    fencing_token=f"t{i}",
                    entrypoint="/p.py",
                    checkpoint_location=f"/c/{i}",
                )
            )
            for i in range(runs)
        ]
        print(f"{runs} submissions in {time.perf_counter() - started:.1f} s")
        tags = [f"drover:job-{i}:{i + 1}" for i in range(runs)]
        ids = [s.submission_id for s in subs]
        poll(
            lambda: http.get(f"{url}/sim/stats").json().get("apps") == runs,
            timeout=60,
            what="every app registered",
        )

        def report(what: str, result: tuple[float, int, int, list[AppStatus]]) -> None:
            seconds, requests, reads, statuses = result
            running = sum(s.state is AppState.RUNNING and bool(s.app_id) for s in statuses)
            print(
                f"  {what:<20} {seconds * 1000:8.0f} ms  {seconds / runs * 1e6:7.0f} µs/run  "
                f"{requests:5d} requests  {reads:5d} log reads  {running}/{runs} RUNNING+linked"
            )

        name = f"own name {own_name!r}" if own_name else "Drover's names"
        print(f"status() over {runs} runs ({name}, listing TTL {listing_ttl:g} s):")
        result = _tick(first, url, [lambda i=i: first.status(i) for i in ids])
        report("first (links)", result)
        statuses = result[3]
        report("steady", _tick(first, url, [lambda i=i: first.status(i) for i in ids]))
        report("steady again", _tick(first, url, [lambda i=i: first.status(i) for i in ids]))
        recorded = [s.app_id for s in statuses]
        fresh = backend()
        report(
            "takeover-recorded",
            _tick(
                fresh,
                url,
                [
                    lambda i=i, t=t, a=a: fresh.status(i, t, a)
                    for i, t, a in zip(ids, tags, recorded, strict=True)
                ],
            ),
        )
        fresh = backend()
        report(
            "takeover-tag-only",
            _tick(
                fresh,
                url,
                [lambda i=i, t=t: fresh.status(i, t) for i, t in zip(ids, tags, strict=True)],
            ),
        )
        fresh = backend()
        report("cold", _tick(fresh, url, [lambda i=i: fresh.status(i) for i in ids]))
    finally:
        sim.terminate()
        sim.wait(timeout=10)


def bench_real() -> None:
    master = os.environ["DROVER_TEST_SPARK_A_MASTER"]
    rest = os.environ["DROVER_TEST_SPARK_A_REST"]
    ui = os.environ["DROVER_TEST_SPARK_A_UI"].rstrip("/")
    own = f"rate-counter-bench-{os.getpid()}"
    backend = StandaloneRestBackend(rest, master, ui, listing_ttl_s=0.0)
    marks: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        request = SubmitRequest(
            job_name=f"bench-link-{os.getpid()}",
            run_id=1,
            fencing_token="bench",
            entrypoint=str(ROOT / "pipelines" / "rate_counter.py"),
            args=("--output", f"{tmp}/out", "--app-name", own, "--trigger-seconds", "2"),
            checkpoint_location=f"file://{tmp}/ckpt",
            py_files=(str(ROOT / "pipelines" / "drover_runtime.py"),),
        )
        started = time.monotonic()
        sub = backend.submit(request)
        try:
            deadline = started + 300
            while "running" not in marks and time.monotonic() < deadline:
                status = backend.status(sub.submission_id)
                now = time.monotonic() - started
                apps = http.get(f"{ui}/json/").json()["activeapps"]
                if any(a["name"] == own for a in apps):
                    marks.setdefault("app in /json/", now)
                if status.reason != "driver waiting for a worker":
                    marks.setdefault("driver launched", now)
                if status.app_id:
                    marks.setdefault("linked (app id known)", now)
                if status.state is AppState.RUNNING:
                    marks.setdefault("running", now)
                time.sleep(0.1)
            reads = backend.log_reads
        finally:
            killed = time.monotonic()
            backend.kill(sub.submission_id)
            confirmed = poll(
                lambda: backend.status(sub.submission_id).state.is_terminal,
                timeout=60,
                what="the kill",
                interval=0.05,
            )
            assert confirmed
            took = time.monotonic() - killed
            gone = not any(a["name"] == own for a in http.get(f"{ui}/json/").json()["activeapps"])
            backend.close()
    print(f"one rate_counter run (own app name {own!r}) on {master}:")
    for what, at in sorted(marks.items(), key=lambda kv: kv[1]):
        print(f"  {what:<24} {at:6.2f} s after submit")
    if "linked (app id known)" in marks and "app in /json/" in marks:
        lag = marks["linked (app id known)"] - marks["app in /json/"]
        print(f"  link after registration: {lag:+.2f} s (status polled every ~0.1 s)")
    print(f"  log reads until RUNNING: {reads}")
    print(f"  kill -> status KILLED: {took:.2f} s; app gone from /json/ then: {gone}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=("sim", "real"), default="sim")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--own-name", default="rate-counter", help='"" keeps Drover\'s names')
    parser.add_argument("--listing-ttl", type=float, default=0.5, help="the backend's default")
    args = parser.parse_args(argv)
    if args.mode == "real":
        bench_real()
    else:
        bench_sim(args.runs, args.own_name, args.listing_ttl)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
