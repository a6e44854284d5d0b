"""The real-Spark deployment of a chaos run (``python -m chaos.run --spark``; I/O).

Everything private to the run, on loopback, stopped at the end: a ZooKeeper server and a MariaDB
server (as in the simulated mode), two Spark standalone clusters ``spark-a`` and ``spark-b``
(``harness/spark.py``: a master with its REST server and one worker each, on ports of their own;
groups ``ga`` and ``gb``, each the other's failover cluster), three Drover nodes and a handful of
self-fencing jobs: the sample pipeline ``pipelines/rate_counter.py`` with a 2 s trigger, each
recording which run handed each batch to Spark to commit (``--commit-log``).

Two kinds of proxies (``harness/tcpproxy.py``) let the faults cut a cluster off both ways:

- Drover -> cluster: every node reaches a cluster's REST server and master UI through a proxy of
  each (the cluster is registered with the proxies' URLs; its ``master_url``, used by the drivers
  and executors only, is the master itself);
- driver -> Drover: the nodes' fence URLs (``DROVER_FENCE_URLS``) are proxies in front of the
  nodes' APIs, which refuse the fence checks of one cluster's drivers (by the fencing tokens in
  their environment) while it is cut off.

Each group fails over automatically, and the nodes bound every failover step (drain, fence,
start: ``node_settings``) so that a failover ends, DONE or FAILED with its reason, within a bound
the checker derives from them (``failover_bound``).

A job costs ~0.9 GB (a 512 MB driver and a 512 MB executor, one core each; RUNTIME-NOTES), and
the machine has 2 shared cores: 3-6 jobs (3 by default: fewer JVMs, faster starts). Each worker
advertises room for every job (a cluster must hold them all after the other one is lost): two
cores and 1 GB per job, plus one of each.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from chaos import deploy
from chaos.faults import Stack
from harness import http
from harness.nodes import NodeProcess
from harness.spark import PrivateSparkCluster, driver_processes

__all__ = [
    "commit_log",
    "deployment",
    "driver_processes",
    "failover_bound",
    "job_bodies",
    "node_settings",
]
from harness.tcpproxy import TcpProxy

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "pipelines" / "rate_counter.py"
#: cluster -> (its group, the group's failover cluster, its AZ)
CLUSTERS = {"spark-a": ("ga", "spark-b", "az-a"), "spark-b": ("gb", "spark-a", "az-b")}
SESSION_TIMEOUT = 3.0
#: the fence lease the nodes grant (seconds): short, so that a cut-off driver stops soon
LEASE_S = 15.0
TRIGGER_S = 2.0
DEFAULT_JOBS = 3
#: seconds after the faults cleared within which every job runs again (a real application
#: takes 20-60 s to start on the shared cores; a failover under way waits for its lease)
DEFAULT_BOUND = 240.0


#: the operator's bounds on a failover's steps (``DROVER_FAILOVER_*``): past one, the item FAILS
#: with its reason and its job goes back to its usual management where it is. Chosen for a run
#: of minutes with a whole-cluster fault every ~30 s: a real job drains in seconds and starts in
#: 20-60 s on the shared cores, longer while its target is itself hit (killed, or cut off
#: until its first fence lease) -- the product's defaults (600 s, none, 900 s) are for outages
#: of hours
DRAIN_TIMEOUT_S = 60.0
START_TIMEOUT_S = 150.0
#: the fence timeout is the lease path's own bound (the lease, the clock margin and the exit
#: grace, after which a fenced run is surely gone) plus this much
FENCE_SLACK_S = 25.0
FENCE_EXIT_GRACE_S = 15.0
#: what a failover may take beyond the sum of its steps' bounds: an executor handed over (its
#: node killed -9 or frozen past the session timeout, ZooKeeper restarted or wiped), MariaDB
#: restarted, the executor's round interval, the checkpoint copies
FAILOVER_MARGIN_S = 45.0


def node_settings(lease_s: float) -> dict[str, str]:
    """The nodes' settings: faults come often, real applications start in tens of seconds."""
    fence_timeout = lease_s + 5.0 + FENCE_EXIT_GRACE_S + FENCE_SLACK_S  # 5 s: the lease margin
    return {
        "DROVER_ZK_SESSION_TIMEOUT": str(SESSION_TIMEOUT),
        "DROVER_RECONCILE_INTERVAL": "1",
        "DROVER_RESTART_MAX_ATTEMPTS": "1000",
        "DROVER_RESTART_BACKOFF_INITIAL": "1",
        "DROVER_RESTART_BACKOFF_MAX": "8",
        "DROVER_HEALTH_PROBE_INTERVAL": "2",
        "DROVER_HEALTH_PROBE_TIMEOUT": "2",
        # a cluster takes a whole-cluster fault every minute or so: with the default window
        # (6 failed probes within 60 s) both would stay THRESHOLD_ABNORMAL the whole run --
        # flapping, rightly: no restart there, no move onto them -- and no job would run
        "DROVER_HEALTH_QUIET_PERIOD": "3",
        "DROVER_HEALTH_THRESHOLD_WINDOW": "10",
        "DROVER_FAILOVER_INTERVAL": "0.5",
        "DROVER_FAILOVER_FENCE_EXIT_GRACE": f"{FENCE_EXIT_GRACE_S:g}",
        "DROVER_FENCE_LEASE_SECONDS": f"{lease_s:g}",
        "DROVER_FENCE_LEASE_MARGIN": "5",
        "DROVER_FAILOVER_DRAIN_TIMEOUT": f"{DRAIN_TIMEOUT_S:g}",
        "DROVER_FAILOVER_FENCE_TIMEOUT": f"{fence_timeout:g}",
        "DROVER_FAILOVER_START_TIMEOUT": f"{START_TIMEOUT_S:g}",
        # each cluster is hit every other minute (``chaos.run``: the cluster lane): automatic
        # failover may move jobs back onto the cluster hit last once it is NORMAL again
        "DROVER_FAILOVER_AUTO_COOLDOWN": "5",
    }


def failover_bound(settings: dict[str, str]) -> tuple[float, str]:
    """How long a failover may take, created to ended, under the nodes' ``settings``: the sum of
    the bounds the operator chose for its steps (the nodes' own failover timing, read from the
    settings as a node reads them) plus ``FAILOVER_MARGIN_S``; and how it adds up."""
    from scheduler.config import load_settings

    timing = load_settings(
        **{key.removeprefix("DROVER_").lower(): value for key, value in settings.items()}
    ).failover_timing
    lease = float(settings["DROVER_FENCE_LEASE_SECONDS"])
    fence = timing.fence_timeout or lease + timing.lease_margin + timing.fence_exit_grace
    checkpoint = timing.checkpoint_attempts * timing.retry_after
    parts = {
        "drain": timing.drain_timeout,
        "fence": fence,
        "checkpoint": checkpoint,
        "start": timing.start_timeout,
        "margin": FAILOVER_MARGIN_S,
    }
    bound = sum(parts.values())
    return bound, " + ".join(f"{name} {value:g}" for name, value in parts.items()) + " s"


def job_args(workdir: Path, name: str) -> list[str]:
    return [
        "--output",
        str(workdir / "out" / name),
        "--app-name",
        name,  # the masters list the application under its job's name
        "--trigger-seconds",
        f"{TRIGGER_S:g}",
        "--rows-per-second",
        "2",
        "--commit-log",
        str(commit_log(workdir, name)),
    ]


def commit_log(workdir: Path, job: str) -> Path:
    """The file the job's runs append their committed batches to (``--commit-log``)."""
    return workdir / "commits" / f"{job}.log"


@contextmanager
def deployment(workdir: Path, nodes: int, jobs: int, lease_s: float) -> Iterator[Stack]:
    with ExitStack() as stack:
        zk, db, database_url = deploy.services(stack, workdir)
        clusters = {
            name: PrivateSparkCluster(workdir / name, cores=2 * jobs + 1, memory=f"{jobs + 1}g")
            for name in CLUSTERS
        }
        for cluster in clusters.values():
            stack.callback(cluster.kill)
            cluster.start(timeout=180)
        proxies = {
            name: [
                stack.enter_context(TcpProxy(cluster.rest_port)),
                stack.enter_context(TcpProxy(cluster.ui_port)),
            ]
            for name, cluster in clusters.items()
        }
        (workdir / "commits").mkdir(parents=True, exist_ok=True)
        procs = deploy.node_processes(workdir, nodes)
        fence_proxies = [stack.enter_context(TcpProxy(node.port)) for node in procs]
        settings = {
            "DROVER_FENCE_URLS": ",".join(p.url for p in fence_proxies),
            **node_settings(lease_s),
        }
        env = deploy.node_env(workdir, database_url, zk.hosts, settings)
        deploy.start_registered(
            stack,
            workdir,
            procs,
            env,
            {
                name: (cluster.master_url, proxies[name][0].url, proxies[name][1].url)
                for name, cluster in clusters.items()
            },
            CLUSTERS,
        )
        for group, _, _ in CLUSTERS.values():
            auto_failover(procs[0], group)
        names = [f"chaos-{i:03d}" for i in range(jobs)]
        yield Stack(
            workdir=workdir,
            zk=zk,
            db=db,
            database_url=database_url,
            clusters={},
            proxies=proxies,
            nodes=procs,
            jobs=names,
            session_timeout=SESSION_TIMEOUT,
            spark=clusters,
            fence_proxies=fence_proxies,
            job_args={name: job_args(workdir, name) for name in names},
            lease_s=lease_s,
        )


def auto_failover(node: NodeProcess, group: str) -> None:
    """Turn on ``group``'s automatic failover: every job, 2 s after its cluster went abnormal
    (at most once per incident; the operator's failovers go on besides)."""
    response = http.put(
        f"{node.url}/v1/groups/{group}/auto-failover",
        json={"enabled": True, "after_seconds": 2, "min_priority": "low"},
        headers=node.headers(),
        timeout=10,
    )
    assert response.status_code == 200, response.text


def job_bodies(stack: Stack) -> list[dict[str, object]]:
    """The jobs of a real-Spark run: every other one in each group, all high priority."""
    groups = [g for g, _, _ in CLUSTERS.values()]
    return [
        {
            "name": name,
            "group": groups[i % len(groups)],
            "entrypoint": str(PIPELINE),
            "args": stack.job_args[name],
            "priority": ("high", "normal")[i % 2],
            "desired_state": "RUNNING",
        }
        for i, name in enumerate(stack.jobs)
    ]
