"""The faults a chaos run injects, and the operator who acts through the API meanwhile (I/O).

Each fault is one function ``(stack, rng) -> target``: it breaks something, keeps it broken for
a while, heals it and returns what it hit. The length of a fault is the fault itself (how long a
node stays dead, a server down, a cluster cut off), so those waits are the injection, not
synchronisation. Faults run one at a time; ``KINDS`` names them all:

``kill9``           every process of a node dies at once; it starts again 2-6 s later (and boots
                    while the next faults go on)
``freeze``          SIGSTOP of a node past its session timeout, then SIGCONT
``zk_restart``      ZooKeeper stopped for 1-4 s, data kept
``zk_wipe``         ZooKeeper stopped and its data directory deleted, started empty
``db_restart``      MariaDB stopped for 1-4 s
``master_kill``     a cluster's master is killed (connections dropped, none answered) for 2-8 s,
                    then restarts: with recovery (it knows its drivers again) or without (every
                    driver and application on it is gone: the workers kill what the new master
                    does not know)
``worker_kill``     a worker dies: 1-3 live drivers on a cluster (one that has some) die with it
``cut_off``         the ports of a cluster are blocked for Drover for 4-12 s (the proxy every node
                    reaches it through closes every connection and refuses new ones); the
                    cluster and its applications go on as before

On real Spark standalone clusters (``SPARK_KINDS``: ``chaos/realspark.py`` deploys them) the
node and service faults above, ``cut_off``, and:

``az_loss``         a whole cluster dies at once (SIGKILL to its master, its worker and every
                    driver and executor on it); it starts again, empty, 3-6 s later (the
                    restart goes on in the background: a ``cluster_restart`` fault of its own)
``two_way_cut``     a cluster is cut off both ways for the fence lease plus 3-8 s: Drover cannot
                    reach its master (REST and UI proxies cut) and its drivers cannot reach
                    Drover (the proxies in front of the nodes' fence URLs refuse the fence checks
                    carrying the fencing token of a driver of that cluster);
                    its drivers and the master still see each other (these two come in
                    rounds, one of each a minute, every fault of a round on one cluster and the
                    rounds on the clusters in turn: ``Stack.next_lost``)
``driver_kill``     one live driver (its JVM and its Python process) killed -9
``freeze_executor`` the node executing a failover (the operation's ``executor``; waits up to 30 s
                    for one) frozen past its session timeout, then thawed

The operator (``Operator``) meanwhile stops, starts, restarts and upgrades random jobs (an
upgrade is a spec ``PATCH`` of the job's arguments followed by a restart) and now and then fails
a few jobs over between the two clusters (``POST /v1/failovers``), each write with an
``Idempotency-Key`` so that a retry after a lost answer is done once. On real clusters it fails
over jobs from where they run (so half of its failovers are fail-backs to the primary).

Every choice is drawn from a generator seeded from the run's seed and the choice's place
(``seeded``): the n-th fault of a lane, the n-th move of the operator, so a seed reproduces the
same faults with the same parameters, and the same moves, whatever else the deployment did.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import httpx

from harness import http
from harness.mariadb import MariaDbServer
from harness.nodes import NodeProcess
from harness.procs import signal_all
from harness.simcluster import SimProcess
from harness.spark import PrivateSparkCluster, driver_processes
from harness.tcpproxy import TcpProxy
from harness.zkserver import ZkServer


def seeded(seed: int, stream: str) -> random.Random:
    """The generator of one stream of choices of a run (``"faults/3"``: the third fault)."""
    return random.Random(f"{seed}/{stream}")


@dataclass
class Stack:
    """What a chaos run runs against."""

    workdir: Path
    zk: ZkServer
    db: MariaDbServer
    database_url: str
    #: simulated clusters (none on real Spark)
    clusters: dict[str, SimProcess]
    #: cluster -> the proxies every node reaches it through (its registered REST and UI URLs)
    proxies: dict[str, list[TcpProxy]]
    nodes: list[NodeProcess]
    jobs: list[str]
    session_timeout: float
    lock: threading.Lock = field(default_factory=threading.Lock)  # node restarts vs the operator
    #: nodes a fault keeps down on purpose (the run restarts any other node that exited)
    held: set[str] = field(default_factory=set)
    #: real Spark standalone clusters (none on simulated ones)
    spark: dict[str, PrivateSparkCluster] = field(default_factory=dict)
    #: the proxies in front of the nodes' fence URLs (every driver reaches Drover through them)
    fence_proxies: list[TcpProxy] = field(default_factory=list)
    #: job -> the arguments it was created with (an upgrade keeps them; empty: simulated jobs)
    job_args: dict[str, list[str]] = field(default_factory=dict)
    #: the fence lease the nodes grant, seconds (0: none)
    lease_s: float = 0.0
    #: the cluster the last whole-cluster fault hit, and how many there were (``next_lost``)
    last_lost: str = ""
    lost_count: int = 0
    #: where a fault reports a fault that outlasts it (kind, target, from, until): a cluster's
    #: restart after an ``az_loss``, which goes on in the background (``restarts``)
    report: Callable[[str, str, float, float], None] | None = None
    #: cluster -> the thread restarting it after an ``az_loss``, and what it raised
    restarts: dict[str, threading.Thread] = field(default_factory=dict)
    restart_errors: list[BaseException] = field(default_factory=list)

    def live_nodes(self) -> list[NodeProcess]:
        with self.lock:
            return [n for n in self.nodes if n.alive]

    def cluster_names(self) -> list[str]:
        return sorted(self.spark or self.clusters)

    def next_lost(self, rng: random.Random, per_round: int = 2) -> str:
        """The cluster a whole-cluster fault hits: the faults come in rounds of ``per_round``
        (one of each kind, ``chaos.run``: a round a minute), every fault of a round hits the same
        cluster, and the rounds take the clusters in turn (the first one at random). So the
        other cluster is spared for a whole round: the jobs of the one hit fail over to it and
        have time to start there, and fail back when the next round hits it."""
        names = self.cluster_names()
        if self.lost_count % per_round == 0:
            spared = [n for n in names if n != self.last_lost]
            self.last_lost = rng.choice(spared if self.last_lost else names)
        self.lost_count += 1
        return self.last_lost

    def upgraded_args(self, job: str, revision: int) -> list[str]:
        """A job's arguments after the operator's ``revision``-th upgrade: a changed rate for
        a real pipeline (its other arguments kept), a marker for a simulated one."""
        if job in self.job_args:
            return [*self.job_args[job], "--rows-per-second", str(2 + revision % 3)]
        return ["--chaos-rev", str(revision)]


def _kill9(stack: Stack, rng: random.Random) -> str:
    node = rng.choice(stack.nodes)
    with stack.lock:
        stack.held.add(node.node_id)
        node.kill9()
    time.sleep(rng.uniform(2, 6))
    with stack.lock:
        node.start()
        stack.held.discard(node.node_id)
    # it boots while the next faults go on (a node takes tens of seconds to be ready on a busy
    # machine); the run waits for every node to be ready before the faults count as cleared
    return node.node_id


def _down_for(seconds: float, stop: Callable[[], object], start: Callable[[], object]) -> None:
    """``stop``, then ``start`` ``seconds`` later: a node or a service out for a while."""
    stop()
    time.sleep(seconds)
    start()


def _freeze(stack: Stack, rng: random.Random) -> str:
    node = rng.choice(stack.nodes)
    _down_for(stack.session_timeout * 2 + rng.uniform(0.5, 2), node.freeze, node.thaw)
    return node.node_id


def _zk_restart(stack: Stack, rng: random.Random) -> str:
    _down_for(rng.uniform(1, 4), stack.zk.stop, stack.zk.start)
    return "zookeeper"


def _zk_wipe(stack: Stack, rng: random.Random) -> str:
    _down_for(rng.uniform(1, 3), partial(stack.zk.stop, wipe=True), stack.zk.start)
    return "zookeeper"


def _db_restart(stack: Stack, rng: random.Random) -> str:
    _down_for(rng.uniform(1, 4), stack.db.stop, stack.db.start)
    return "mariadb"


def _master_kill(stack: Stack, rng: random.Random) -> str:
    name = rng.choice(sorted(stack.clusters))
    sim = stack.clusters[name]
    seconds = rng.uniform(2, 8)
    recovery = rng.random() < 0.5
    sim.control("unreachable_for", seconds=seconds + 60, mode="close")  # until restarted
    time.sleep(seconds)
    if not recovery:
        sim.control("lose_state")
    sim.control("reachable")
    return f"{name} (down {seconds:.1f} s, {'recovered its state' if recovery else 'state lost'})"


def _worker_kill(stack: Stack, rng: random.Random) -> str:
    live_on: dict[str, list[dict[str, Any]]] = {}
    for name, sim in sorted(stack.clusters.items()):
        drivers = http.get(f"{sim.url}/sim/drivers", timeout=5).json()
        live_on[name] = [
            d for d in drivers if d["alive"] and (d.get("tag") or "").startswith("drover:")
        ]
    name = rng.choice([n for n, live in live_on.items() if live] or sorted(live_on))
    sim, live = stack.clusters[name], live_on[name]
    if not live:
        return f"{name} (no live driver)"
    victims = rng.sample(live, min(len(live), rng.randint(1, 3)))
    for victim in victims:
        sim.control("fail_after", app_name=victim["tag"], seconds=0)
    return f"{name}: " + ", ".join(v["tag"] for v in victims)


def _cut_off(stack: Stack, rng: random.Random) -> str:
    name = rng.choice(sorted(stack.proxies))
    seconds = rng.uniform(4, 12)
    proxies = stack.proxies[name]
    for proxy in proxies:
        proxy.cut()
    try:
        time.sleep(seconds)
    finally:
        for proxy in proxies:
            proxy.mend()
    return f"{name} ({seconds:.1f} s)"


KINDS: dict[str, Callable[[Stack, random.Random], str]] = {
    "kill9": _kill9,
    "freeze": _freeze,
    "zk_restart": _zk_restart,
    "zk_wipe": _zk_wipe,
    "db_restart": _db_restart,
    "master_kill": _master_kill,
    "worker_kill": _worker_kill,
    "cut_off": _cut_off,
}


#: the kind of the fault a cluster's restart after an ``az_loss`` is reported as (its polls
#: fail meanwhile: ``chaos.checker.EXCUSED_BY``)
RESTART = "cluster_restart"
#: how long a cluster may take to start again on a loaded machine
RESTART_TIMEOUT_S = 300.0


def _az_loss(stack: Stack, rng: random.Random) -> str:
    """The fault is the kill and the 3-6 s the cluster stays down; its restart (JVMs take
    seconds, minutes on a loaded machine) goes on in the background and is reported as a fault
    of its own (``RESTART``), so that the whole-cluster faults keep their pace. A cluster hit
    again while it is still starting is first waited for."""
    name = stack.next_lost(rng)
    seconds = rng.uniform(3, 6)
    cluster = stack.spark[name]
    waited = wait_restarted(stack, name)
    processes = len(cluster.pids())
    cluster.kill()
    time.sleep(seconds)

    def restart() -> None:
        t0 = time.time()
        try:
            took = cluster.start(timeout=RESTART_TIMEOUT_S)
        except BaseException as exc:  # noqa: BLE001 - the run reports it at the end
            stack.restart_errors.append(exc)
            took = time.time() - t0
        if stack.report is not None:
            stack.report(RESTART, f"{name} (back in {took:.1f} s)", t0, time.time())

    thread = threading.Thread(target=restart, name=f"chaos-restart-{name}", daemon=True)
    stack.restarts[name] = thread
    thread.start()
    return f"{name} (killed {processes} processes, down {seconds:.1f} s)" + (
        f", after waiting {waited:.1f} s for its last restart" if waited >= 0.5 else ""
    )


def wait_restarted(stack: Stack, name: str | None = None) -> float:
    """Wait until the restart of cluster ``name`` (default: every one) after an ``az_loss`` is
    over; the seconds it took."""
    t0 = time.monotonic()
    for cluster, thread in list(stack.restarts.items()):
        if name is None or cluster == name:
            thread.join(timeout=RESTART_TIMEOUT_S + 30)
    return time.monotonic() - t0


def _two_way_cut(stack: Stack, rng: random.Random) -> str:
    name = stack.next_lost(rng)
    seconds = stack.lease_s + rng.uniform(3, 8)
    cluster = stack.spark[name]
    for proxy in stack.proxies[name]:
        proxy.cut()

    def from_its_drivers(head: bytes) -> bool:
        """A fence check of one of the cluster's drivers (its token in the request's head)."""
        return any(d.fencing_token.encode() in head for d in cluster.drivers())

    for proxy in stack.fence_proxies:
        proxy.cut_if(from_its_drivers)
    try:
        time.sleep(seconds)
    finally:
        for proxy in stack.fence_proxies:
            proxy.mend()
        for proxy in stack.proxies[name]:
            proxy.mend()
    return f"{name} ({seconds:.1f} s)"


def _driver_kill(stack: Stack, rng: random.Random) -> str:
    drivers = sorted(driver_processes(stack.spark))
    if not drivers:
        return "no live driver"
    cluster, pid, job, _, children = rng.choice(drivers)
    signal_all([pid, *children])
    return f"{cluster}: {job} (pid {pid})"


def _freeze_executor(stack: Stack, rng: random.Random) -> str:
    import sqlalchemy as sa

    seconds = stack.session_timeout * 2 + rng.uniform(0.5, 2)
    engine = sa.create_engine(stack.database_url, poolclass=sa.NullPool)
    query = sa.text(
        "SELECT id, executor FROM operations WHERE state = 'RUNNING' AND executor IS NOT NULL "
        "ORDER BY id"
    )
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            try:
                with engine.connect() as conn:
                    found = [(int(op), str(who)) for op, who in conn.execute(query).all()]
            except sa.exc.SQLAlchemyError:
                found = []
            nodes = {n.node_id: n for n in stack.nodes}
            under_way = [(op, executor) for op, executor in found if executor in nodes]
            if under_way:
                op, executor = under_way[0]
                node = nodes[executor]
                with stack.lock:
                    if not node.alive:
                        return f"{executor} (executing failover {op}) was not running"
                    node.freeze()
                time.sleep(seconds)
                node.thaw()
                return f"{executor} (executing failover {op}, frozen {seconds:.1f} s)"
            time.sleep(0.5)  # not synchronisation: how often to look for a failover under way
    finally:
        engine.dispose()
    return "no failover under way within 30 s"


#: the faults of a run on real Spark clusters: those of the whole cluster (one at a time, a lane
#: of their own: ``CLUSTER_KINDS``) and the others (another lane)
CLUSTER_KINDS: dict[str, Callable[[Stack, random.Random], str]] = {
    "az_loss": _az_loss,
    "two_way_cut": _two_way_cut,
}
SPARK_KINDS: dict[str, Callable[[Stack, random.Random], str]] = {
    "kill9": _kill9,
    "freeze": _freeze,
    "zk_restart": _zk_restart,
    "zk_wipe": _zk_wipe,
    "db_restart": _db_restart,
    "cut_off": _cut_off,
    "driver_kill": _driver_kill,
    "freeze_executor": _freeze_executor,
}

#: what each operator action on a job leaves as its desired state (an upgrade keeps it)
OPERATIONS: dict[str, str | None] = {
    "stop": "STOPPED",
    "start": "RUNNING",
    "restart": "RUNNING",
    "upgrade": None,
}
#: the share of the operator's moves that are a failover of a few jobs
FAILOVER_SHARE = 0.12


class Acks(Protocol):
    """Where the operator reports what the API acknowledged (``chaos.recorder.Recorder``)."""

    def acked(self, job: str, op: str, desired: str | None, spec: str | None = None) -> None: ...

    def operation_acked(self, operation: int, kind: str, detail: str) -> None: ...


def spec_of(args: list[str]) -> str:
    """The fingerprint of a job's spec the checker compares: its arguments, as JSON."""
    return json.dumps(list(args))


@dataclass(frozen=True)
class _Answer:
    status: int
    body: Any
    applied: bool  # a retry learned that the first attempt committed, its answer lost


class Operator:
    """Acts on random jobs through any live node, one write at a time, and reports each
    acknowledged write: stops, starts, restarts, upgrades (a spec ``PATCH`` of the arguments, then
    a restart) and failovers of a few jobs between the two clusters.

    Every write is sent with an ``Idempotency-Key`` (the ``PATCH``, which takes none, sets a
    fixed value: sending it twice is harmless) and retried with the same key while its outcome is
    unknown (no answer, a 5xx, "still being processed"). A retry answered "applied, its answer
    lost" counts as acknowledged. A write that never gets an answer leaves its job in doubt:
    reported so, and the job is left alone from then on."""

    def __init__(
        self,
        stack: Stack,
        rng: random.Random,
        acks: Acks,
        *,
        interval: float = 1.5,
        retry_for: float = 20.0,
        retry_pause: float = 0.5,
        failover_share: float = FAILOVER_SHARE,
        seed: int | None = None,
        move_wait: float = 0.0,
    ) -> None:
        self.stack = stack
        #: the generator of the moves (with ``seed``: one per move, ``seeded(seed, "operator/n")``)
        self.rng = rng
        #: which node a request goes to (apart, so that retries do not shift the moves' draws)
        self._route = random.Random(rng.random())
        self.seed = seed
        self.moves = 0
        self.failover_share = failover_share
        #: how long a failover move on real clusters waits for a move Drover may carry out
        self.move_wait = move_wait
        self.acks = acks
        self.interval = interval
        self.retry_for = retry_for
        self.retry_pause = retry_pause
        self.doubtful: set[str] = set()
        self.done: dict[str, int] = {}
        self.refused: dict[str, int] = {}
        self._revision = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-operator", daemon=True)

    def start(self) -> Operator:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.retry_for * 2 + 30)

    def _run(self) -> None:
        while True:
            if self.seed is not None:
                self.rng = seeded(self.seed, f"operator/{self.moves}")
            self.moves += 1
            if self._stop.wait(self.rng.uniform(0.5, 1.5) * self.interval):
                return
            jobs = [j for j in self.stack.jobs if j not in self.doubtful]
            if not jobs:
                continue
            if self.rng.random() < self.failover_share:
                if self.stack.spark:
                    self.fail_over_from_where_they_run(jobs)
                else:
                    picked = self.rng.sample(jobs, min(len(jobs), self.rng.randint(1, 3)))
                    self.fail_over(self.rng.choice(self.stack.cluster_names()), picked)
            else:
                self.act(self.rng.choice(jobs), self.rng.choice(sorted(OPERATIONS)))

    def fail_over_from_where_they_run(self, jobs: list[str]) -> None:
        """Fail 1-2 jobs over from a cluster they run on to the other one (a failover, or a
        fail-back to their primary). It waits up to ``move_wait`` seconds for a move Drover may
        carry out -- a job on a cluster whose other cluster is healthy and, when its own
        cluster is not (lost, cut off), RUNNING and known to fence itself -- and then moves such
        jobs; with none in time it asks for a move of jobs from a random cluster anyway (which
        Drover refuses, with its reason). A move onto a cluster that is down is no move."""
        names = self.stack.cluster_names()
        source = self.rng.choice(names)
        count = self.rng.randint(1, 2)
        pick = self.rng.random()  # drawn now: the seed fixes the draws, not their outcome
        deadline = time.monotonic() + self.move_wait
        while True:
            movable = self._movable(jobs, names)
            if movable or time.monotonic() >= deadline or self._stop.is_set():
                break
            self._stop.wait(2.0)  # not synchronisation: how often the operator looks again
        if movable:
            source = sorted(movable)[int(pick * len(movable))]
            jobs = movable[source]
        else:
            print(f"  chaos: operator: no job Drover may move within {self.move_wait:g} s")
        self.fail_over(source, self.rng.sample(jobs, min(len(jobs), count)))

    def _movable(self, jobs: list[str], names: list[str]) -> dict[str, list[str]]:
        """Of ``jobs``, those Drover may move now, by the cluster they run on (see
        :meth:`fail_over_from_where_they_run`)."""
        response = self._send("GET", "/v1/clusters", None, None)
        if response is None or response.status_code != 200:
            return {}
        healthy = {
            c["name"] for c in response.json().get("data", []) if c.get("health") == "NORMAL"
        }
        response = self._send("GET", "/v1/jobs?limit=500", None, None)
        if response is None or response.status_code != 200:
            return {}
        movable: dict[str, list[str]] = {}
        for job in response.json().get("data", []):
            source = job.get("cluster")
            if job.get("name") not in jobs or source not in names:
                continue
            if not (set(names) - {source}) <= healthy:
                continue  # its target is not healthy: refused
            if source not in healthy and (
                job.get("state") != "RUNNING" or job.get("self_fencing") is not True
            ):
                continue  # its driver may go on unseen: refused unless forced
            movable.setdefault(source, []).append(job["name"])
        return {source: sorted(found) for source, found in movable.items()}

    def _count(self, op: str, answer: _Answer | None) -> None:
        if answer is not None:
            tally = self.done if answer.status < 300 or answer.applied else self.refused
            tally[op] = tally.get(op, 0) + 1

    def act(self, job: str, op: str) -> None:
        if op == "upgrade":
            self._revision += 1
            args = self.stack.upgraded_args(job, self._revision)
            answer = self._write("PATCH", f"/v1/jobs/{job}", {"args": args}, keyed=False)
            self._count(op, answer)
            if answer is None:
                self._in_doubt(job)
            elif answer.status < 300:
                body = answer.body
                self.acks.acked(job, op, body["desired_state"], spec_of(body["args"]))
                if body["desired_state"] == "RUNNING":
                    self.act(job, "restart")  # the new spec applies from the next run
            return
        answer = self._write("POST", f"/v1/jobs/{job}/{op}", None)
        self._count(op, answer)
        if answer is None:
            self._in_doubt(job)
        elif answer.applied:
            self.acks.acked(job, op, OPERATIONS[op])
        elif answer.status < 300:
            body = answer.body
            self.acks.acked(job, op, body["desired_state"], spec_of(body["args"]))
        # a 4xx: refused (the job was already so), nothing changed

    def fail_over(self, source: str, jobs: list[str]) -> None:
        body = {
            "source": source,
            "selector": {"jobs": sorted(jobs)},
            "reason": "chaos: operator failover",
        }
        answer = self._write("POST", "/v1/failovers", body)
        self._count("failover", answer)
        target = f"{source} ({', '.join(sorted(jobs))})"
        if answer is None:
            # the failover may exist or not; its jobs keep their desired state either way
            self.acks.operation_acked(0, "failover_in_doubt", target)
        elif answer.status < 300 and isinstance(answer.body, dict) and answer.body.get("id"):
            self.acks.operation_acked(int(answer.body["id"]), "failover", target)

    def _in_doubt(self, job: str) -> None:
        self.doubtful.add(job)
        self.acks.acked(job, "in_doubt", None)

    def _write(self, method: str, path: str, body: Any, *, keyed: bool = True) -> _Answer | None:
        key = str(uuid.uuid4())
        deadline = time.monotonic() + self.retry_for
        while time.monotonic() < deadline:
            response = self._send(method, path, body, key if keyed else None)
            if response is None or response.status_code >= 500:
                time.sleep(self.retry_pause)
                continue  # no answer: it may or may not have happened; say it again
            if response.status_code == 409 and _problem_kind(response) == "idempotency-key-in-use":
                if "retry-after" in response.headers:
                    time.sleep(self.retry_pause)
                    continue  # the first attempt is still being processed somewhere
                return _Answer(response.status_code, None, applied=True)
            try:
                parsed = response.json() if response.content else None
            except ValueError:
                parsed = None
            return _Answer(response.status_code, parsed, applied=False)
        return None

    def _send(self, method: str, path: str, body: Any, key: str | None) -> httpx.Response | None:
        nodes = self.stack.live_nodes()
        if not nodes:
            return None
        node = self._route.choice(nodes)
        headers = node.headers()
        if key is not None:
            headers = {**headers, "Idempotency-Key": key}
        try:
            return http.request(
                method,
                f"{node.url}{path}",
                json=body,
                headers=headers,
                timeout=5.0,
            )
        except (httpx.HTTPError, RuntimeError):
            return None


def _problem_kind(response: httpx.Response) -> str:
    """The kind of an RFC 9457 problem (``urn:drover:problem:<kind>``; "" when it is none)."""
    try:
        problem = response.json()
    except ValueError:
        return ""
    kind = problem.get("type", "") if isinstance(problem, dict) else ""
    return str(kind).rsplit(":", 1)[-1]


def describe(stats: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(stats.items())) or "none"
