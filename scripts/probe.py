"""Readiness probes for scripts/services.sh.

Each probe polls one condition until it holds or its deadline passes, then exits 0 (ready) or
1 (not ready, with the last observed reason on stderr). Loopback HTTP only, proxies ignored.

    probe.py zk HOSTS                 a kazoo session can be opened
    probe.py spark-master UI_URL      <ui>/json/ says ALIVE and lists >= --min-workers ALIVE workers
    probe.py spark-rest REST_URL      GET <rest>/v1/submissions/readyz answers 200
    probe.py yarn RM_WEB_URL          the ResourceManager is STARTED and ACTIVE with >= 1 active
                                      NodeManager (its REST API: /ws/v1/cluster/info, /metrics)

Options: --wait S (keep polling S seconds), --pid PID (give up at once if that process is gone:
the service we are waiting for has died), --min-workers N (spark-master, default 1).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url: str, timeout: float = 2.0) -> tuple[int, bytes]:
    try:
        with _NO_PROXY.open(url, timeout=timeout) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:  # an HTTP answer, just not a 2xx one
        return int(exc.code), exc.read()


def zk_ready(hosts: str) -> str | None:
    """Return None when a ZooKeeper session opens, else the reason it did not."""
    from kazoo.client import KazooClient

    logging.disable(logging.CRITICAL)  # kazoo logs every refused connect
    retry = {"max_tries": -1, "delay": 0.05, "max_delay": 0.2}
    client = KazooClient(hosts=hosts, timeout=2.0, connection_retry=retry)
    try:
        client.start(timeout=2.0)
        client.get_children("/")
        return None
    except Exception as exc:  # noqa: BLE001 - any failure just means "not ready yet"
        return f"{type(exc).__name__}: {exc}"
    finally:
        client.stop()
        client.close()


def spark_master_ready(ui_url: str, min_workers: int = 1) -> str | None:
    """Return None when the master is ALIVE and has at least `min_workers` ALIVE workers."""
    try:
        status, body = _get(ui_url.rstrip("/") + "/json/")
    except OSError as exc:
        return f"{ui_url}/json/: {exc}"
    if status != 200:
        return f"{ui_url}/json/: HTTP {status}"
    try:  # a master still starting its UI may answer 200 with an empty or partial body
        doc: dict[str, Any] = json.loads(body)
    except ValueError as exc:
        return f"{ui_url}/json/: not JSON yet ({exc})"
    if not isinstance(doc, dict) or doc.get("status") != "ALIVE":
        return f"master status {doc.get('status') if isinstance(doc, dict) else doc!r}"
    alive = [w for w in doc.get("workers", []) if w.get("state") == "ALIVE"]
    if len(alive) < min_workers:
        return f"master has {len(alive)} ALIVE worker(s), want {min_workers}"
    return None


def spark_rest_ready(rest_url: str) -> str | None:
    """Return None when the REST submission server reports itself ready."""
    url = rest_url.rstrip("/") + "/v1/submissions/readyz"
    try:
        status, body = _get(url)
    except OSError as exc:
        return f"{url}: {exc}"
    if status != 200:
        return f"{url}: HTTP {status} {body[:200]!r}"
    return None


def yarn_ready(rm_url: str) -> str | None:
    """Return None when the ResourceManager is started, active, and has an active NodeManager."""
    base = rm_url.rstrip("/") + "/ws/v1/cluster"
    try:
        docs = [_get(f"{base}/{what}") for what in ("info", "metrics")]
    except OSError as exc:
        return f"{base}: {exc}"
    bodies: list[dict[str, Any]] = []
    for (status, body), key in zip(docs, ("clusterInfo", "clusterMetrics"), strict=True):
        if status != 200:
            return f"{base}: HTTP {status} {body[:200]!r}"
        try:
            bodies.append(json.loads(body)[key])
        except (ValueError, KeyError, TypeError) as exc:
            return f"{base}: unexpected answer ({exc!r})"
    info, metrics = bodies
    if info.get("state") != "STARTED" or info.get("haState") != "ACTIVE":
        return f"ResourceManager state {info.get('state')}, HA state {info.get('haState')}"
    if int(metrics.get("activeNodes", 0)) < 1:
        return "no active NodeManager yet"
    return None


PROBES: dict[str, Callable[[str], str | None]] = {
    "yarn": yarn_ready,
    "zk": zk_ready,
    "spark-master": spark_master_ready,
    "spark-rest": spark_rest_ready,
}


def _process_gone(pid: int) -> bool:
    """True when `pid` no longer runs (absent, or a zombie nobody has reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return True
    return state in ("Z", "X")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("probe", choices=sorted(PROBES))
    parser.add_argument("target")
    parser.add_argument("--wait", type=float, default=0.0, help="seconds to keep polling")
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--pid", type=int, action="append", default=[])
    parser.add_argument("--min-workers", type=int, default=1)
    args = parser.parse_args(argv)

    check = PROBES[args.probe]
    if args.probe == "spark-master":
        check = functools.partial(spark_master_ready, min_workers=args.min_workers)
    deadline = time.monotonic() + args.wait
    while True:
        reason = check(args.target)
        if reason is None:
            return 0
        gone = [pid for pid in args.pid if _process_gone(pid)]
        if gone:
            print(f"{args.probe} {args.target}: process {gone} exited; {reason}", file=sys.stderr)
            return 1
        if time.monotonic() >= deadline:
            print(f"{args.probe} {args.target}: not ready: {reason}", file=sys.stderr)
            return 1
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
