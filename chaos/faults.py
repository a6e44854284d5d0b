"""The faults a chaos run injects, and the operator who acts through the API meanwhile (I/O).

Each fault is one function ``(stack, rng) -> target``: it breaks something, keeps it broken for
a while, heals it and returns what it hit. The length of a fault is the fault itself (how long a
node stays dead, a server down, a cluster cut off), so those waits are the injection, not
synchronisation. Faults run one at a time; ``KINDS`` names them all:

``kill9``           every process of a node dies at once; it starts again 2-6 s later
``freeze``          SIGSTOP of a node past its session timeout, then SIGCONT
``zk_restart``      ZooKeeper stopped for 1-4 s, data kept
``zk_wipe``         ZooKeeper stopped and its data directory deleted, started empty
``db_restart``      MariaDB stopped for 1-4 s
``master_restart``  a cluster's master restarts without recovery: every driver and app on it gone
``worker_kill``     one live driver on a cluster dies (its worker was lost)
``cut_off``         a cluster answers Drover nothing for 4-12 s (its applications keep running)
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from harness.mariadb import MariaDbServer
from harness.nodes import NodeProcess
from harness.simcluster import SimProcess
from harness.zkserver import ZkServer


@dataclass
class Stack:
    """What a chaos run runs against."""

    workdir: Path
    zk: ZkServer
    db: MariaDbServer
    database_url: str
    clusters: dict[str, SimProcess]
    nodes: list[NodeProcess]
    jobs: list[str]
    session_timeout: float
    lock: threading.Lock = field(default_factory=threading.Lock)  # node restarts vs the operator

    def live_nodes(self) -> list[NodeProcess]:
        with self.lock:
            return [n for n in self.nodes if n.alive]


def _kill9(stack: Stack, rng: random.Random) -> str:
    node = rng.choice(stack.nodes)
    with stack.lock:
        node.kill9()
    time.sleep(rng.uniform(2, 6))
    with stack.lock:
        node.start()
    node.wait_ready()
    return node.node_id


def _freeze(stack: Stack, rng: random.Random) -> str:
    node = rng.choice(stack.nodes)
    node.freeze()
    time.sleep(stack.session_timeout * 2 + rng.uniform(0.5, 2))
    node.thaw()
    return node.node_id


def _zk_restart(stack: Stack, rng: random.Random) -> str:
    stack.zk.stop()
    time.sleep(rng.uniform(1, 4))
    stack.zk.start()
    return "zookeeper"


def _zk_wipe(stack: Stack, rng: random.Random) -> str:
    stack.zk.stop(wipe=True)
    time.sleep(rng.uniform(1, 3))
    stack.zk.start()
    return "zookeeper"


def _db_restart(stack: Stack, rng: random.Random) -> str:
    stack.db.stop()
    time.sleep(rng.uniform(1, 4))
    stack.db.start()
    return "mariadb"


def _master_restart(stack: Stack, rng: random.Random) -> str:
    name = rng.choice(sorted(stack.clusters))
    stack.clusters[name].control("lose_state")
    return name


def _worker_kill(stack: Stack, rng: random.Random) -> str:
    name = rng.choice(sorted(stack.clusters))
    sim = stack.clusters[name]
    drivers = httpx.get(f"{sim.url}/sim/drivers", timeout=5, trust_env=False).json()
    live = [d for d in drivers if d["alive"] and (d.get("tag") or "").startswith("drover:")]
    if not live:
        return f"{name} (no live driver)"
    victim = rng.choice(live)
    sim.control("fail_after", app_name=victim["tag"], seconds=0)
    return f"{name}/{victim['tag']}"


def _cut_off(stack: Stack, rng: random.Random) -> str:
    name = rng.choice(sorted(stack.clusters))
    seconds = rng.uniform(4, 12)
    stack.clusters[name].control("unreachable_for", seconds=seconds)
    time.sleep(seconds)
    return name


KINDS: dict[str, Callable[[Stack, random.Random], str]] = {
    "kill9": _kill9,
    "freeze": _freeze,
    "zk_restart": _zk_restart,
    "zk_wipe": _zk_wipe,
    "db_restart": _db_restart,
    "master_restart": _master_restart,
    "worker_kill": _worker_kill,
    "cut_off": _cut_off,
}

#: what each operator action leaves as the job's desired state
OPERATIONS = {"stop": "STOPPED", "start": "RUNNING", "restart": "RUNNING"}


class Operator:
    """Stops, starts and restarts random jobs through any live node, one at a time, and reports
    each acknowledged write. A write whose outcome is unknown (no answer, or a 5xx) is retried
    until acknowledged; if that never happens the job is in doubt: reported so, and left alone."""

    def __init__(
        self,
        stack: Stack,
        rng: random.Random,
        acked: Callable[[str, str, str | None], None],
        *,
        interval: float = 1.5,
        retry_for: float = 20.0,
    ) -> None:
        self.stack = stack
        self.rng = rng
        self.acked = acked
        self.interval = interval
        self.retry_for = retry_for
        self.doubtful: set[str] = set()
        self.done: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-operator", daemon=True)

    def start(self) -> Operator:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.retry_for + 30)

    def _run(self) -> None:
        while not self._stop.wait(self.rng.uniform(0.5, 1.5) * self.interval):
            jobs = [j for j in self.stack.jobs if j not in self.doubtful]
            if jobs:
                self.act(self.rng.choice(jobs), self.rng.choice(sorted(OPERATIONS)))

    def act(self, job: str, op: str) -> None:
        deadline = time.monotonic() + self.retry_for
        while time.monotonic() < deadline:
            answer = self._post(job, op)
            if answer is None or answer >= 500:
                time.sleep(0.5)
                continue  # no answer: it may or may not have happened; say it again
            if answer < 300:
                self.acked(job, op, OPERATIONS[op])
                self.done[op] = self.done.get(op, 0) + 1
            return  # a 4xx: refused, nothing changed
        self.doubtful.add(job)
        self.acked(job, "in_doubt", None)

    def _post(self, job: str, op: str) -> int | None:
        nodes = self.stack.live_nodes()
        if not nodes:
            return None
        node = self.rng.choice(nodes)
        try:
            response = httpx.post(
                f"{node.url}/v1/jobs/{job}/{op}",
                headers=node.headers(),
                timeout=5.0,
                trust_env=False,
            )
        except (httpx.HTTPError, RuntimeError):
            return None
        return response.status_code


def describe(stats: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(stats.items())) or "none"
