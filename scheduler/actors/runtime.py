"""NodeRuntime: the Ray side of one node process, as the API and the CLI see it."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ray.exceptions import RayTaskError

from scheduler.actors.common import PING_TIMEOUT, forward_nudge, ray
from scheduler.actors.host import LoopThread
from scheduler.actors.supervisor import NodeSupervisor
from scheduler.actors.worker_output import WorkerOutputTail
from scheduler.config import Settings
from scheduler.core.errors import CoordinationUnavailable, DroverError
from scheduler.core.logs import configure_from, worker_output_printer
from scheduler.core.metrics import ActorMetrics
from scheduler.core.nudges import Coalescer
from scheduler.decisions.membership import MembershipSnapshot, Mode, NodeCard, unavailable

log = logging.getLogger("drover.actors.runtime")

#: seconds after which the supervisor's last read of Membership's snapshot is not trusted (it
#: reads it at least every ``SNAPSHOT_INTERVAL``, 1 s; a read waits up to ``PING_TIMEOUT`` more)
SNAPSHOT_MAX_AGE = PING_TIMEOUT + 1.0

# -- Ray, trimmed to what Drover uses -------------------------------------------------------------
#
# Drover uses named, restartable async actors (``max_restarts``, ``ray.get_actor`` by name in the
# node's namespace), calls on them with timeouts, and the workers' log lines in the node's log
# (read from their files by a thread of the node process, scheduler/actors/worker_output.py, instead
# of Ray's log monitor process; actor errors reach their callers with the calls). It does not use
# the dashboard, the state/observability API (``ray list``, timeline), metrics, runtime
# environments, the autoscaler, job submission or usage statistics. What is switched off below
# costs none of the former (bench/node_rss.py measures the result). The dashboard agent and the
# runtime-env agent stay: the raylet starts them itself and refuses an empty command for either
# (no supported switch), and it exits if either of them dies.

#: The object store (shared memory, /dev/shm) holds only objects above Ray's inline limit
#: (100 KiB); Drover's calls pass settings, claims and snapshots of a few KiB, returned inline.
#: Ray's floor is 75 MiB; its default is 30 % of RAM, reserved per node.
OBJECT_STORE_BYTES = 80 * 1024 * 1024

#: CPUs the node's Ray advertises: one per actor of the node (Membership, JobReconciler), not the
#: machine's cores. The actors ask for none (``num_cpus=0``); Ray prestarts this many worker
#: processes when the driver connects (the actors then start in them) and keeps up to this many
#: workers before it kills idle ones (``num_workers_soft_limit`` defaults to it), so with every
#: core advertised a 16-core machine would keep 14 idle workers of about 60 MiB each.
RAY_CPUS = 2

#: times ``ray.init`` is tried when Ray gives up waiting for its own raylet (an overloaded machine)
RAY_START_ATTEMPTS = 3

#: Ray system settings (every Ray process of the node reads them from the GCS):
#: - task events off: every actor call (ticks' claims, supervision pings, nudges) would otherwise
#:   be reported to the GCS each second and kept there (up to 100,000 tasks) for the state API;
#: - metrics off: workers, raylet and GCS would record and export metrics to the dashboard agent
#:   every few seconds for the Prometheus endpoint nothing scrapes;
#: - event-loop statistics off: every handler run on the event loops of the GCS, the raylet and
#:   each worker would be timed and counted for Ray's debug dumps and a log line a minute;
#: - the raylet's memory monitor off: it reads the memory use of the machine and of every worker
#:   four times a second to kill workers when the machine runs short (Ray's OOM killer); the
#:   only workers of a node are its own actors, which would be killed and restarted for memory
#:   other processes use, and the kernel's OOM killer stays.
#: Together about 0.15 CPU s/min less per node, idle (bench/node_cpu.py).
#: - workers at the node's own priority: Ray starts its workers at nice 15 so that they yield
#:   to its GCS and raylet, but a node's workers are its actors (the reconcile loops, the
#:   ZooKeeper session, the executor): at nice 15 any busy process of the machine at normal
#:   priority (a Spark driver in local mode, a JVM starting) starves them, and a late session
#:   heartbeat or tick costs a takeover or a lease.
RAY_SYSTEM_CONFIG: tuple[tuple[str, object], ...] = (
    ("task_events_report_interval_ms", 0),
    ("enable_metrics_collection", False),
    ("event_stats", False),
    ("memory_monitor_refresh_ms", 0),
    ("worker_niceness", 0),
)


def switch_off_unused_helpers() -> None:
    """Stop the helper processes ``ray.init`` starts for features Drover does not use.

    ``ray.init`` has no switch for these three (``ray start`` has a hidden ``--no-monitor`` and
    no switch for the others either); stopping them through the node object, as Ray's own
    tests do, is the only way:

    - the dashboard process: with ``include_dashboard=False`` it still runs, serving only the
      usage-statistics module (and usage statistics are off, see ``common.py``); nothing in
      Ray's runtime (GCS, raylet, workers) talks to it;
    - the autoscaler monitor: it autoscales clusters launched by the cluster launcher; a
      Drover node is one fixed-size local Ray instance;
    - the log monitor: it tails the workers' output files and publishes their lines through
      the GCS to drivers started with ``log_to_driver`` (the node starts Ray without it and
      follows the same files itself, :class:`~scheduler.actors.worker_output.WorkerOutputTail`).
      Nothing else in Ray reads from it.

    Any may already be gone (a failed start); that is not an error.
    """
    node = getattr(ray._private.worker, "_global_node", None)  # type: ignore[attr-defined]
    if node is None:
        return
    for kill in (node.kill_dashboard, node.kill_monitor, node.kill_log_monitor):
        try:
            kill(check_alive=False)
        except Exception as exc:  # noqa: BLE001 - a helper left running costs memory only
            log.warning("could not stop a Ray helper process (%s): %s", kill.__name__, exc)


def follow_worker_output(log_format: str) -> WorkerOutputTail | None:
    """Start printing the output of this node's Ray workers (the actors) as the node's records.

    None (and a warning) when Ray's log directory is not known: the actors then still log to
    their files in Ray's session directory, and the node keeps running."""
    node = getattr(ray._private.worker, "_global_node", None)  # type: ignore[attr-defined]
    try:
        logs_dir = node.get_logs_dir_path() if node is not None else None
    except Exception as exc:  # noqa: BLE001 - the node runs without the actors' lines
        logs_dir = None
        log.warning("Ray's log directory is not known (%s)", exc)
    if not logs_dir:
        log.warning("the actors' output is not followed: Ray's log directory is not known")
        return None
    tail = WorkerOutputTail(logs_dir, worker_output_printer(log_format))
    tail.start()
    return tail


def _stop_children(grace: float = 5.0) -> None:
    """SIGTERM every child process of this process, SIGKILL those still there after ``grace``
    seconds, and reap them (before Ray starts, the node has no children of its own)."""
    import psutil

    children = [child.pid for child in psutil.Process().children()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while children and time.monotonic() < deadline:
            for pid in list(children):
                with contextlib.suppress(ChildProcessError):
                    if os.waitpid(pid, os.WNOHANG)[0] == 0:
                        continue
                children.remove(pid)
            time.sleep(0.05)


class NodeRuntime:
    """Starts Ray and the node's actors; what the API calls to nudge, read membership, drain.

    The supervisor runs in this process, on a loop of its own (``self._host``); the API's
    threads hand it coroutines with deadlines."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._supervisor: NodeSupervisor | None = None
        self._host: LoopThread | None = None
        self._forwarder = ThreadPoolExecutor(max_workers=4, thread_name_prefix="nudge-forward")
        #: nudges on their way (scheduler/core/nudges.py): to this node's loops, by group; to other
        #: nodes, by (API URL, group)
        self._local_nudges = Coalescer()
        self._forwarded_nudges = Coalescer()
        self._output: WorkerOutputTail | None = None

    def start(self) -> None:
        """Start Ray and the actors; raises DroverError (e.g. DuplicateNode) with its own text."""
        self._start_ray()
        # ray.init (and importing ray) set up Ray's own logging: ours again, and the actors'
        # output printed as our records (scheduler/core/logs.py) before any actor starts
        configure_from(self._settings, "api")
        self._output = follow_worker_output(self._settings.log_format)
        switch_off_unused_helpers()
        self._host = LoopThread("node-supervisor")
        self._supervisor = NodeSupervisor(self._settings)
        try:
            self._host.call(
                self._supervisor.start(), timeout=self._settings.zk_session_timeout + 60
            )
        except RayTaskError as exc:
            cause = exc.cause if isinstance(exc.cause, DroverError) else None
            if cause is not None:
                raise cause from None
            raise

    def _start_ray(self) -> None:
        """``ray.init`` on loopback; started again (up to ``RAY_START_ATTEMPTS`` times) when Ray
        gives up waiting for its raylet: Ray waits a fixed 30 s for the raylet to register with
        the GCS, which a machine busy enough (seen at a load average of 24 on 2 cores) exceeds
        while nothing is wrong."""
        for attempt in range(1, RAY_START_ATTEMPTS + 1):
            try:
                ray.init(
                    address="local",
                    include_dashboard=False,
                    namespace=f"drover-{self._settings.node_id}",
                    logging_level=logging.getLevelName(self._settings.ray_log_level),
                    log_to_driver=False,  # the node follows the workers' output itself (below)
                    num_cpus=RAY_CPUS,
                    object_store_memory=OBJECT_STORE_BYTES,
                    _system_config=dict(RAY_SYSTEM_CONFIG),
                )
                return
            except Exception as exc:
                if attempt == RAY_START_ATTEMPTS or "timed out during startup" not in str(exc):
                    raise
                log.warning(
                    "Ray did not start (attempt %d of %d): %s; starting it again",
                    attempt,
                    RAY_START_ATTEMPTS,
                    exc,
                )
                ray.shutdown()
                _stop_children()  # the GCS and raylet of the failed start: Ray keeps no handle

    def actor_metrics(self) -> ActorMetrics:
        """The last collection of the actors' figures (never waits on an actor)."""
        if self._supervisor is None:
            return ActorMetrics()
        return self._supervisor.latest_metrics()

    def nudge_local(self, group: str) -> None:
        """Fire and forget: this node's reconcile loop of ``group`` runs a tick now (one nudge
        of a burst: scheduler/core/nudges.py)."""
        if self._supervisor is None or self._host is None:
            return
        if not self._local_nudges.claim(group):
            return
        try:
            self._host.submit(self._deliver_local(self._supervisor, group))
        except RuntimeError:  # the loop is closed: the node is stopping
            self._local_nudges.release(group)

    async def _deliver_local(self, supervisor: NodeSupervisor, group: str) -> None:
        self._local_nudges.release(group)
        await supervisor.nudge(group)

    def nudge(self, group: str, job: str | None = None) -> None:
        """Wake the owner of ``job`` at once: this node's reconcile loop, or the owner's over HTTP.

        Never blocks the caller and never fails it: a nudge that cannot be delivered only
        means the owner acts at its next periodic tick.
        """
        target = self._owner_url(group, job) if job is not None else None
        if target is None or job is None:
            self.nudge_local(group)
            return
        key = (target, group)  # the owner nudges the whole group (POST /v1/internal/nudge)
        if not self._forwarded_nudges.claim(key):
            return
        secret = self._settings.resolved_deployment_secret
        try:
            self._forwarder.submit(self._forward, key, job, secret)
        except RuntimeError:  # shut down: the node is stopping
            self._forwarded_nudges.release(key)

    def _forward(self, key: tuple[str, str], job: str, secret: str) -> None:
        self._forwarded_nudges.release(key)
        forward_nudge(key[0], key[1], job, secret)

    def _owner_url(self, group: str, job: str) -> str | None:
        """The API URL of ``job``'s owner when it is another node; None for this node/unknown."""
        snapshot = self.views()
        return snapshot.owner_url(group, job)

    def _this_node(self) -> NodeCard:
        s = self._settings
        return NodeCard(s.node_id, s.resolved_api_url, s.az, s.cloud)

    def views(self) -> MembershipSnapshot:
        """Membership as this node sees it (see scheduler.decisions.membership.MembershipSnapshot):
        the supervisor's last read of it, read at once when it changes and at most
        ``SNAPSHOT_INTERVAL`` old while Membership answers. Never waits on an actor (the API
        calls this on request paths: a create finds the job's owner here to nudge it); a
        snapshot older than ``SNAPSHOT_MAX_AGE`` is not trusted (Membership is not answering)
        and the mode is UNKNOWN."""
        if self._supervisor is None or self._host is None:
            return unavailable(Mode.STARTING, self._this_node())
        snapshot, read_at = self._supervisor.latest_snapshot()
        if snapshot is None:
            return unavailable(Mode.STARTING, self._this_node(), "membership not read yet")
        age = time.monotonic() - read_at
        if age > SNAPSHOT_MAX_AGE:
            return unavailable(
                Mode.UNKNOWN, self._this_node(), f"membership not answering for {age:.1f} s"
            )
        return snapshot

    def set_draining(self, draining: bool) -> dict[str, Any]:
        """Drain or undrain this node (``Membership.set_draining``); raises its DroverError."""
        if self._supervisor is None or self._host is None:
            raise CoordinationUnavailable("this node's actors are not started")
        try:
            return self._host.call(  # type: ignore[no-any-return]
                self._supervisor.set_draining(draining),
                timeout=self._settings.zk_session_timeout + 10,
            )
        except RayTaskError as exc:
            if isinstance(exc.cause, DroverError):
                raise exc.cause from None
            raise

    def status(self) -> dict[str, Any]:
        """This node's actors: membership, and per group the reconcile loop's ticks."""
        if self._supervisor is None or self._host is None:
            return {"reconcilers": {}, "membership": {}}
        try:
            return self._host.call(self._supervisor.status(), timeout=PING_TIMEOUT)
        except Exception as exc:
            return {"reconcilers": {}, "membership": {}, "error": repr(exc)}

    def readiness(self) -> tuple[bool, str]:
        if self._supervisor is None or self._host is None:
            return False, "actors not started"
        try:
            status = self._host.call(self._supervisor.status(), timeout=PING_TIMEOUT)
        except Exception as exc:
            return False, f"supervisor not answering: {type(exc).__name__}"
        membership = status.get("membership", {})
        if not membership.get("alive", True):
            return False, "membership not answering"
        reconcilers = status["reconcilers"]
        down = sorted(g for g, h in reconcilers.items() if not h.get("alive"))
        if down:
            return False, f"reconcilers down: {', '.join(down)}"
        connection = membership.get("connection", "NONE")
        return True, f"{len(reconcilers)} reconciler(s) up; ZooKeeper {connection}"

    def stop(self) -> None:
        """Drain: loops stop acting, membership leaves ZooKeeper, Ray stops."""
        if self._supervisor is not None and self._host is not None:
            try:
                self._host.call(self._supervisor.drain(), timeout=40)
            except Exception:
                log.exception("drain failed")
        if self._host is not None:
            self._host.stop()
        self._forwarder.shutdown(wait=False, cancel_futures=True)
        if self._output is not None:
            self._output.stop()  # the actors' last lines, before Ray's files go
            self._output = None
        if ray.is_initialized():
            ray.shutdown()
