"""A private Spark standalone cluster (one master with its REST server, one worker) on ports of
its own, for tests that stop and restart a cluster without touching the shared clusters A and B
of ``scripts/services.sh`` (no pytest here).

Started from the pyspark wheel like those (``bin/spark-class``; RUNTIME-NOTES "Spark"): each
daemon runs in a session of its own so that stopping it stops its whole process group. The
master refuses to move to another port when its own is taken (``spark.port.maxRetries=0``): a
restarted cluster is on the ports it had, or it fails loudly.

``kill_drover_apps`` clears what a test or a bench left on any standalone cluster, private or
shared.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness import http
from harness.nodes import free_port, poll
from harness.procs import Proc, parent_pid, processes, session_pids, signal_all
from scheduler.backends.standalone import StandaloneRestBackend

#: what one daemon JVM may use (a test cluster runs no big application)
DAEMON_MEMORY = "256m"
#: JVM options of the daemons and of the drivers and executors the worker launches (they inherit
#: its JAVA_TOOL_OPTIONS): C1 only and the serial GC cost two shared cores least for JVMs that
#: live seconds to minutes (as scripts/services.sh's DROVER_SVC_JVM_OPTS)
FAST_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
STOP_GRACE_S = 20.0


def spark_home() -> Path:
    configured = os.environ.get("SPARK_HOME")
    if configured:
        return Path(configured)
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class PrivateSparkCluster:
    """Master + REST server + one worker on free loopback ports, under ``work_dir``."""

    work_dir: Path
    cores: int = 2
    memory: str = "1g"
    master_port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    rest_port: int = field(default_factory=free_port)
    worker_ui_port: int = field(default_factory=free_port)
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.ui_port}"

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def _env(self) -> dict[str, str]:
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            "SPARK_LOG_DIR": str(self.work_dir / "logs"),
            "JAVA_TOOL_OPTIONS": os.environ.get("DROVER_SVC_APP_JVM_OPTS", FAST_JVM_OPTS),
        }

    def _spawn(self, name: str, *args: str) -> None:
        log = (self.work_dir / f"{name}.log").open("ab")
        try:
            self._procs[name] = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()

    def start(self, timeout: float = 120.0) -> float:
        """Start master and worker; wait until REST is ready and a worker is ALIVE. Returns the
        seconds it took."""
        started = time.monotonic()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.work_dir / "worker").mkdir(exist_ok=True)
        properties = self.work_dir / "master.properties"
        properties.write_text(
            "spark.master.rest.enabled=true\n"
            "spark.master.rest.host=127.0.0.1\n"
            f"spark.master.rest.port={self.rest_port}\n"
            "spark.port.maxRetries=0\n"
        )
        self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.master_port),
            "--webui-port",
            str(self.ui_port),
            "--properties-file",
            str(properties),
        )
        self._spawn(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            self.master_url,
            "--host",
            "127.0.0.1",
            "--cores",
            str(self.cores),
            "--memory",
            self.memory,
            "--webui-port",
            str(self.worker_ui_port),
            "--work-dir",
            str(self.work_dir / "worker"),
        )
        poll(self.ready, timeout=timeout, interval=0.2, what=f"private Spark on {self.ui_url}")
        return time.monotonic() - started

    def ready(self) -> bool:
        """REST ``readyz`` answers and the master is ALIVE with an ALIVE worker."""
        for name, proc in self._procs.items():
            if proc.poll() is not None:
                raise RuntimeError(
                    f"private Spark {name} exited with {proc.returncode}: see {self.work_dir}"
                )
        if http.get(f"{self.rest_url}/v1/submissions/readyz", timeout=2.0).status_code != 200:
            return False
        state = http.get(f"{self.ui_url}/json/", timeout=2.0).json()
        workers = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
        return state.get("status") == "ALIVE" and bool(workers)

    def pids(self) -> list[int]:
        """Every live process of the cluster: master, worker, and what the worker launched
        (drivers, their Python processes, executors: they stay in the worker's session)."""
        return [pid for proc in self._procs.values() for pid in session_pids(proc.pid)]

    def kill(self) -> float:
        """The whole cluster dies at once, as in the loss of its AZ: SIGKILL to the master, the
        worker and every driver and executor. Returns when they are all gone (seconds)."""
        started = time.monotonic()
        signal_all(self.pids())
        for proc in self._procs.values():
            proc.wait(timeout=STOP_GRACE_S)
        poll(lambda: not self.pids(), timeout=STOP_GRACE_S, interval=0.1, what="cluster gone")
        self._procs.clear()
        return time.monotonic() - started

    def drivers(self) -> list[Driver]:
        """The live Drover drivers the worker runs (their JVM and Python processes), read from
        /proc: what the drivers' own processes say, whatever the master says."""
        worker = self._procs.get("worker")
        if worker is None:
            return []
        sessions = {worker.pid}
        found = []
        for proc in processes():
            if not proc.alive or proc.session not in sessions:
                continue
            driver = Driver.of(proc)
            if driver is not None:
                found.append(driver)
        return found

    def stop(self) -> float:
        """Stop worker and master (SIGTERM to each process group, SIGKILL after a grace period).
        Returns the seconds it took."""
        started = time.monotonic()
        for name in ("worker", "master"):
            proc = self._procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(timeout=STOP_GRACE_S)
        return time.monotonic() - started


@dataclass(frozen=True)
class Driver:
    """One process of a Drover run's driver (its JVM, or the Python process it started)."""

    pid: int
    job: str
    run_id: str
    #: the run's fencing token (in the driver's environment only): how its fence checks can be
    #: told apart on the wire (``harness.tcpproxy.TcpProxy.cut_if``)
    fencing_token: str

    @classmethod
    def of(cls, proc: Proc) -> Driver | None:
        env = dict(
            entry.decode(errors="replace").split("=", 1)
            for entry in proc.environ()
            if b"=" in entry
        )
        if not env.get("DROVER_RUN_ID") or not env.get("DROVER_FENCING_TOKEN"):
            return None
        return cls(proc.pid, env.get("DROVER_JOB", ""), env["DROVER_RUN_ID"],
                   env["DROVER_FENCING_TOKEN"])  # fmt: skip


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)  # its own session: the group id is its pid
    except ProcessLookupError:
        pass


#: the main class of the JVM a standalone worker starts for a driver
DRIVER_MAIN = b"org.apache.spark.deploy.worker.DriverWrapper"


def driver_processes(
    clusters: dict[str, PrivateSparkCluster],
) -> list[tuple[str, int, str, str, list[int]]]:
    """Every live driver on the machine, by the cluster whose worker launched it: ``(cluster,
    pid of its JVM, job, run id, the pids of its other processes)``. A driver is the JVM a
    worker starts (``DriverWrapper``); its Python process is listed with it, not apart: without
    its JVM it cannot commit."""
    found = []
    for name, cluster in clusters.items():
        processes_of = cluster.drivers()
        jvms = {d.pid for d in processes_of if DRIVER_MAIN in Proc(d.pid, "S", 0).cmdline()}
        for driver in processes_of:
            if driver.pid not in jvms:
                continue
            if parent_pid(driver.pid) in jvms:
                continue  # a fork of a driver's JVM before its exec (its Python process starting)
            others = [
                d.pid for d in processes_of if d.run_id == driver.run_id and d.pid != driver.pid
            ]
            found.append((name, driver.pid, driver.job, driver.run_id, others))
    return found


def kill_drover_apps(rest_url: str, master_url: str, ui_url: str, prefix: str) -> list[str]:
    """Kill every live application of the standalone cluster at these URLs that Drover started
    for a job named ``prefix...`` (application name ``drover:<job>:<run id>``), through its REST
    submission server; the names of those killed."""
    backend = StandaloneRestBackend(rest_url, master_url, ui_url)
    try:
        killed = []
        for app in backend.list_applications():
            if app.app_name.startswith(f"drover:{prefix}") and app.state.is_alive:
                backend.kill(app.submission_id)
                killed.append(app.app_name)
        return killed
    finally:
        backend.close()
