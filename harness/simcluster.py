"""A simulated Spark standalone cluster for benchmarks and fault tests (never a default).

One threaded HTTP server on loopback plays the master's REST submission server, the master's web
UI ``/json/`` and one worker's ``/log/`` endpoint -- the subset
:class:`scheduler.backends.standalone.StandaloneRestBackend` uses -- with thousands of fake
drivers and applications held in memory. Register it as a normal ``standalone`` cluster whose
``rest_url`` and ``ui_url`` are the simulator's URL (``master_url`` is ``spark://sim-...``).

Life of one fake driver (times from its create; all configurable)::

    create ----- launch_delay ----> driver RUNNING on the worker (launch command readable)
           ----- + app_start_delay -> app WAITING ----- + executor_delay -> app RUNNING
    fail_after(name, T): at create + T the driver FAILED, the app FINISHED
    kill: driver KILLED kill_delay seconds after the kill request, its app gone app_linger
          seconds after that

The fake pipeline and its driver's logs (what the driver <-> application link reads):

- ``pipeline_app_name``: None (default) registers each app under the ``spark.app.name`` of its
  submission; a string registers every app under that name, as pipelines that call
  ``SparkSession.builder.appName(...)`` do;
- the worker's ``/log/`` endpoint serves each driver's stderr (the launch command with every
  submitted property, then ``Connected to Spark cluster with app ID <id>`` once the app has
  registered, unless ``log_app_id`` is False: a cluster whose log4j config hides INFO) and stdout
  (``drover-runtime: started app_id=<id> ...`` once registered when ``runtime_announces``: a
  pipeline using drover_runtime), in byte ranges with Spark's ``==== Bytes a-b of n of ...``
  header; with ``log_every`` (seconds), a registered driver's stderr also grows by one line per
  committed micro-batch at that pace until the driver ends, as a streaming driver's log does.

Faults: ``latency`` added to every answer; ``fail_next_creates(n)`` (400, or 500 with
``http_status``); ``fail_after``; ``lose_state()`` (a master restarted without recovery: every
driver and app forgotten); ``unreachable_for(T, mode)`` -- ``close`` drops connections without an
answer, ``503`` answers Service Unavailable; ``kill_delay`` for slow kills. Completed drivers are
retained like Spark's ``spark.deploy.retainedDrivers`` (200 by default).

Control: the :class:`SimCluster` methods in-process, or ``POST /sim/control`` with
``{"op": <method name>, ...keyword arguments}`` from another process (see :func:`control`);
``GET /sim/stats`` counts drivers, requests, creates and kills; ``GET /sim/drivers`` lists every
driver with its run tag, app id and whether it is alive; ``GET /sim/fencing-token?tag=`` the
fencing token the driver of a run tag holds (tests and benches present it to fence checks: the
store keeps only its digest). ``/sim/*`` stays reachable during unreachable periods.

    python -m harness.simcluster --port 7177 [--app-start-delay 1] [--kill-delay 0]
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from harness.localserver import stop_process

SPARK_VERSION = "4.3.0"
PYTHON_RUNNER = "org.apache.spark.deploy.PythonRunner"
WORKER_ID = "worker-sim-0"
CONTROL_OPS = frozenset(
    {
        "configure",
        "fail_next_creates",
        "fail_after",
        "lose_state",
        "unreachable_for",
        "reachable",
    }
)


@dataclass
class FakeDriver:
    id: str
    app_name: str
    properties: dict[str, str]
    app_args: list[str]
    created: float
    launch_at: float
    app_at: float
    running_at: float
    app_id: str
    #: the name the app registers with (the pipeline may set its own)
    registered_name: str = ""
    #: seconds the app stays registered after its driver ended
    app_linger: float = 0.0
    log_app_id: bool = True
    runtime_announces: bool = False
    #: seconds between the batch lines its stderr gains once registered (None: none)
    log_every: float | None = None
    fail_at: float | None = None
    kill_at: float | None = None
    #: final driver state once ended (FINISHED, FAILED, KILLED)
    ended: str | None = None
    ended_at: float | None = None
    #: (state key, driver JSON, app JSON) of the last listing (see _master_json_text)
    fragments: tuple[tuple[str, bool, str | None, bool], str, str] | None = None
    #: the driver's environment as submitted (``environmentVariables``)
    environment: dict[str, str] = field(default_factory=dict)

    def advance(self, now: float) -> None:
        if self.ended is not None:
            return
        if self.kill_at is not None and now >= self.kill_at:
            self.ended, self.ended_at = "KILLED", self.kill_at
        elif self.fail_at is not None and now >= self.fail_at:
            self.ended, self.ended_at = "FAILED", self.fail_at

    def driver_state(self, now: float) -> str:
        if self.ended is not None:
            return self.ended
        return "RUNNING" if now >= self.launch_at else "SUBMITTED"

    def app_state(self, now: float) -> str | None:
        """WAITING / RUNNING while registered, None before; the app leaves ``app_linger``
        seconds after the driver ended."""
        if now < self.app_at:
            return None
        if self.ended is not None:
            assert self.ended_at is not None
            if self.ended_at < self.app_at or now >= self.ended_at + self.app_linger:
                return None
        return "RUNNING" if now >= self.running_at else "WAITING"

    def app_registered(self, now: float) -> bool:
        """The app registered at some point (its driver logged its id)."""
        return now >= self.app_at and (self.ended_at is None or self.ended_at >= self.app_at)


@dataclass
class _Faults:
    latency: float = 0.0
    fail_creates: int = 0
    fail_status: int = 400
    unreachable_until: float = 0.0
    unreachable_mode: str = "close"
    fail_after: dict[str, float] = field(default_factory=dict)


class SimCluster:
    """The simulated master + worker; start() binds a free loopback port unless one is given."""

    def __init__(
        self,
        *,
        port: int = 0,
        launch_delay: float = 0.0,
        app_start_delay: float = 0.5,
        executor_delay: float = 0.0,
        kill_delay: float = 0.0,
        retained_drivers: int = 200,
        app_linger: float = 0.0,
        pipeline_app_name: str | None = None,
        log_app_id: bool = True,
        runtime_announces: bool = False,
        log_every: float | None = None,
    ) -> None:
        self.port = port
        self.launch_delay = launch_delay
        self.app_start_delay = app_start_delay
        self.executor_delay = executor_delay
        self.kill_delay = kill_delay
        self.retained_drivers = retained_drivers
        self.app_linger = app_linger
        self.pipeline_app_name = pipeline_app_name
        self.log_app_id = log_app_id
        self.runtime_announces = runtime_announces
        self.log_every = log_every
        self._lock = threading.Lock()
        self._drivers: dict[str, FakeDriver] = {}
        self._completed: deque[str] = deque()
        self._faults = _Faults()
        self._seq = 0
        self._app_seq = 0
        self.requests = 0
        #: accepted creates and kill requests of live drivers since start (never reset)
        self.creates = 0
        self.kills = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------------- lifecycle

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    rest_url = url
    ui_url = url

    @property
    def master_url(self) -> str:
        return f"spark://sim-127.0.0.1:{self.port}"

    def start(self) -> SimCluster:
        sim = self

        class Handler(_Handler):
            cluster = sim

        server = _Server(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.05,), name=f"simcluster-{self.port}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------------- control

    def configure(self, **settings: Any) -> None:
        """Change settings at run time (for drivers created afterwards): launch_delay,
        app_start_delay, executor_delay, kill_delay, app_linger, latency (seconds);
        pipeline_app_name (str or None), log_app_id, runtime_announces (bool)."""
        with self._lock:
            for key, value in settings.items():
                if key == "latency":
                    self._faults.latency = float(value)
                elif key in (
                    "launch_delay",
                    "app_start_delay",
                    "executor_delay",
                    "kill_delay",
                    "app_linger",
                ):
                    setattr(self, key, float(value))
                elif key == "pipeline_app_name":
                    self.pipeline_app_name = None if value is None else str(value)
                elif key in ("log_app_id", "runtime_announces"):
                    setattr(self, key, bool(value))
                else:
                    raise ValueError(f"unknown setting {key!r}")

    def fail_next_creates(self, n: int, http_status: int = 400) -> None:
        with self._lock:
            self._faults.fail_creates = int(n)
            self._faults.fail_status = int(http_status)

    def fail_after(self, app_name: str, seconds: float) -> None:
        """The driver carrying ``app_name`` (now or submitted later) fails ``seconds`` after its
        create (or after now, if it runs already)."""
        now = time.monotonic()
        with self._lock:
            self._faults.fail_after[app_name] = float(seconds)
            for driver in self._drivers.values():
                if driver.app_name == app_name and driver.ended is None:
                    driver.fail_at = max(driver.created, now) + float(seconds)

    def lose_state(self) -> None:
        """Forget every driver and app, as a master restarted without recovery does."""
        with self._lock:
            self._drivers.clear()
            self._completed.clear()

    def unreachable_for(self, seconds: float, mode: str = "close") -> None:
        if mode not in ("close", "503"):
            raise ValueError("mode is 'close' or '503'")
        with self._lock:
            self._faults.unreachable_until = time.monotonic() + float(seconds)
            self._faults.unreachable_mode = mode

    def reachable(self) -> None:
        with self._lock:
            self._faults.unreachable_until = 0.0

    def stats(self) -> dict[str, int]:
        now = time.monotonic()
        with self._lock:
            self._advance_all(now)
            states: dict[str, int] = {}
            apps = 0
            for driver in self._drivers.values():
                key = driver.driver_state(now)
                states[key] = states.get(key, 0) + 1
                apps += driver.app_state(now) is not None
            return {
                "drivers": len(self._drivers),
                "apps": apps,
                "requests": self.requests,
                "creates": self.creates,
                "kills": self.kills,
                **states,
            }

    def live_apps(self, app_name: str | None = None, *, tag: str | None = None) -> list[str]:
        """Ids of registered (WAITING or RUNNING) apps, optionally only those registered as
        ``app_name`` and/or those whose driver was submitted with ``spark.app.name`` ``tag``."""
        now = time.monotonic()
        with self._lock:
            self._advance_all(now)
            return [
                d.app_id
                for d in self._drivers.values()
                if d.app_state(now) is not None
                and (app_name is None or d.registered_name == app_name)
                and (tag is None or d.app_name == tag)
            ]

    def drivers(self) -> list[dict[str, Any]]:
        """Every driver the simulator holds: its id, the ``spark.app.name`` it was submitted
        with (Drover's run tag), its app's id, and whether it is alive (the driver not ended, or
        its app still registered), and when it was created, its app running and it ended: what
        a checker outside Drover needs, also during outages."""
        now = time.monotonic()
        with self._lock:
            self._advance_all(now)
            return [
                {
                    "driver_id": d.id,
                    "tag": d.app_name,
                    "app_id": d.app_id,
                    "alive": d.ended is None or d.app_state(now) is not None,
                    # the simulator's clock (monotonic seconds): created, application RUNNING
                    # (if it got there), driver ended
                    "created": d.created,
                    "running_at": d.running_at
                    if d.ended_at is None or d.ended_at > d.running_at
                    else None,
                    "ended_at": d.ended_at,
                }
                for d in self._drivers.values()
            ]

    def fencing_token(self, tag: str) -> str | None:
        """The fencing token the driver submitted as ``tag`` (Drover's run tag) holds in its
        environment, as its pipeline reads it: what a test presents to a fence check (the
        store keeps only its digest). The latest such driver's; None when there is none."""
        with self._lock:
            found = [d for d in self._drivers.values() if d.app_name == tag]
        return found[-1].environment.get("DROVER_FENCING_TOKEN") if found else None

    def driver_app(self, driver_id: str) -> str | None:
        """The id of the app that belongs to a driver (what only the simulator knows for sure)."""
        with self._lock:
            driver = self._drivers.get(driver_id)
            return driver.app_id if driver is not None else None

    # ----------------------------------------------------------------------- model

    def _advance_all(self, now: float) -> None:
        for driver in list(self._drivers.values()):
            self._advance(driver, now)

    def _advance(self, driver: FakeDriver, now: float) -> None:
        """Apply time to one driver; forget the oldest completed ones beyond the retention."""
        if driver.ended is not None:
            return
        driver.advance(now)
        if driver.ended is not None:
            self._completed.append(driver.id)
            while len(self._completed) > self.retained_drivers:
                self._drivers.pop(self._completed.popleft(), None)

    def _create(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        props = body.get("sparkProperties")
        if (
            body.get("action") != "CreateSubmissionRequest"
            or not isinstance(props, dict)
            or not body.get("appResource")
            or not body.get("mainClass")
        ):
            return 400, _error("Malformed request: missing appResource, mainClass or properties")
        now = time.monotonic()
        with self._lock:
            if self._faults.fail_creates > 0:
                self._faults.fail_creates -= 1
                status = self._faults.fail_status
                return status, _error("injected failure: submission refused")
            self._seq += 1
            self._app_seq += 1
            self.creates += 1
            stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
            name = str(props.get("spark.app.name", ""))
            launch = now + self.launch_delay
            driver = FakeDriver(
                id=f"driver-{stamp}-{self._seq:04d}",
                app_name=name,
                properties={str(k): str(v) for k, v in props.items()},
                app_args=[str(a) for a in body.get("appArgs", [])],
                environment={
                    str(k): str(v) for k, v in (body.get("environmentVariables") or {}).items()
                },
                created=now,
                launch_at=launch,
                app_at=launch + self.app_start_delay,
                running_at=launch + self.app_start_delay + self.executor_delay,
                app_id=f"app-{stamp}-{self._app_seq:04d}",
                registered_name=name if self.pipeline_app_name is None else self.pipeline_app_name,
                app_linger=self.app_linger,
                log_app_id=self.log_app_id,
                runtime_announces=self.runtime_announces,
                log_every=self.log_every,
            )
            if name in self._faults.fail_after:
                driver.fail_at = now + self._faults.fail_after[name]
            self._drivers[driver.id] = driver
        return 200, {
            "action": "CreateSubmissionResponse",
            "message": f"Driver successfully submitted as {driver.id}",
            "serverSparkVersion": SPARK_VERSION,
            "submissionId": driver.id,
            "success": True,
        }

    def _status(self, driver_id: str) -> dict[str, Any]:
        now = time.monotonic()
        with self._lock:
            driver = self._drivers.get(driver_id)
            if driver is not None:
                self._advance(driver, now)
                driver = self._drivers.get(driver_id)
            answer: dict[str, Any] = {
                "action": "SubmissionStatusResponse",
                "serverSparkVersion": SPARK_VERSION,
                "submissionId": driver_id,
                "success": driver is not None,
            }
            if driver is not None:
                answer["driverState"] = driver.driver_state(now)
                if now >= driver.launch_at:
                    answer["workerId"] = WORKER_ID
                    answer["workerHostPort"] = f"127.0.0.1:{self.port}"
            return answer

    def _kill(self, driver_id: str) -> dict[str, Any]:
        now = time.monotonic()
        with self._lock:
            driver = self._drivers.get(driver_id)
            if driver is not None:
                self._advance(driver, now)
            ok = driver is not None and driver.ended is None
            if driver is not None and ok and driver.kill_at is None:
                self.kills += 1
                driver.kill_at = now + self.kill_delay
                self._advance(driver, now)
        message = (
            f"Kill request for {driver_id} submitted"
            if ok
            else f"Driver {driver_id} has already finished or does not exist"
        )
        return {
            "action": "KillSubmissionResponse",
            "message": message,
            "serverSparkVersion": SPARK_VERSION,
            "submissionId": driver_id,
            "success": ok,
        }

    def _master_json(self) -> dict[str, Any]:
        """The master's ``/json/`` answer as a dict (see :meth:`_master_json_text`)."""
        answer: dict[str, Any] = json.loads(self._master_json_text())
        return answer

    def _master_json_text(self) -> str:
        """The master's ``/json/`` answer, as JSON text.

        Built from per-driver fragments cached until that driver's or its app's state moves:
        a listing of 50,000 drivers costs the simulator a pass over them, not 100,000 dicts
        encoded again (the simulator is a test double; its own cost must not be what a bench
        measures)."""
        now = time.monotonic()
        with self._lock:
            self._advance_all(now)
            active_drivers: list[str] = []
            completed_drivers: list[str] = []
            active_apps: list[str] = []
            completed_apps: list[str] = []
            for d in self._drivers.values():
                state = d.driver_state(now)
                app_state = d.app_state(now)
                completed = app_state is None and d.ended is not None and d.app_registered(now)
                key = (state, now >= d.launch_at, app_state, completed)
                if d.fragments is None or d.fragments[0] != key:
                    d.fragments = (key, *self._fragments(d, key))
                _, driver_text, app_text = d.fragments
                (completed_drivers if d.ended else active_drivers).append(driver_text)
                if app_state is not None:
                    active_apps.append(app_text)
                elif completed:
                    completed_apps.append(app_text)
            head = json.dumps(
                {
                    "url": self.master_url,
                    "workers": [
                        {
                            "id": WORKER_ID,
                            "host": "127.0.0.1",
                            "port": self.port,
                            "webuiaddress": self.url,
                            "cores": 100000,
                            "state": "ALIVE",
                        }
                    ],
                    "aliveworkers": 1,
                    "status": "ALIVE",
                }
            )
        return (
            f'{head[:-1]}, "activeapps": [{", ".join(active_apps)}], '
            f'"completedapps": [{", ".join(completed_apps)}], '
            f'"activedrivers": [{", ".join(active_drivers)}], '
            f'"completeddrivers": [{", ".join(completed_drivers)}]}}'
        )

    @staticmethod
    def _fragments(d: FakeDriver, key: tuple[str, bool, str | None, bool]) -> tuple[str, str]:
        """One driver's entry and its app's entry in ``/json/`` (app entry only if listed)."""
        state, launched, app_state, completed = key
        driver = {
            "id": d.id,
            "starttime": str(int(d.created * 1000)),
            "state": state,
            "cores": 1,
            "memory": 512,
            "resources": {},
            "submitdate": "",
            "worker": WORKER_ID if launched else "None",
            "mainclass": PYTHON_RUNNER,
        }
        app_text = ""
        if app_state is not None or completed:
            app = {
                "id": d.app_id,
                "name": d.registered_name,
                "starttime": int(d.app_at * 1000),
                "cores": 1,
                "user": "sim",
                "state": app_state if app_state is not None else "FINISHED",
            }
            app_text = json.dumps(app)
        return json.dumps(driver), app_text

    def _driver_log(self, driver_id: str, kind: str, offset: int | None, length: int) -> str:
        """One byte range of a driver's stderr or stdout, as a Spark worker's ``/log/`` serves
        it (the text only grows as the driver's life goes on; no offset: the last ``length``
        bytes)."""
        now = time.monotonic()
        path = f"/sim/work/{driver_id}/{kind}"
        with self._lock:
            driver = self._drivers.get(driver_id)
            if driver is None or now < driver.launch_at:
                return f"==== Bytes 0-0 of 0 of {path} ====\nError: invalid log directory {path}\n"
            text = _log_text(driver, kind, now)
        data = text.encode("utf-8")
        if offset is None:
            offset = len(data) - length
        start = min(max(offset, 0), len(data))
        end = min(start + max(length, 0), len(data))
        page = data[start:end].decode("utf-8", errors="replace")
        return f"==== Bytes {start}-{end} of {len(data)} of {path} ====\n{page}"

    def _fault_for(self, path: str) -> str | None:
        """'close' or '503' while unreachable (never for /sim/ control paths), else None."""
        if path.startswith("/sim/"):
            return None
        with self._lock:
            self.requests += 1
            latency = self._faults.latency
            fault = self._faults.unreachable_mode
            down = time.monotonic() < self._faults.unreachable_until
        if latency:
            time.sleep(latency)
        return fault if down else None

    def _control(self, body: dict[str, Any]) -> dict[str, Any]:
        op = body.pop("op", None)
        if op not in CONTROL_OPS:
            raise ValueError(f"unknown op {op!r}; one of {sorted(CONTROL_OPS)}")
        getattr(self, op)(**body)
        return {"ok": True, "stats": self.stats()}


def _log_text(driver: FakeDriver, kind: str, now: float) -> str:
    """The whole log of one launched driver at ``now`` (see the module docstring)."""
    registered = driver.app_registered(now)
    if kind == "stdout":
        if driver.runtime_announces and registered:
            run = driver.properties.get("spark.drover.runId", "-")
            return f"drover-runtime: started app_id={driver.app_id} job=- run_id={run}\n"
        return ""
    options = " ".join(f'"-D{k}={v}"' for k, v in driver.properties.items())
    args = " ".join(f'"{a}"' for a in driver.app_args)
    lines = [
        f'Launch Command: "java" "-cp" "/sim/jars/*" "-Xmx512M" {options} '
        f'"org.apache.spark.deploy.worker.DriverWrapper" "spark://Worker@127.0.0.1:1" '
        f'"{PYTHON_RUNNER}" {args}',
        "=" * 40,
        "",
        "26/11/23 08:44:10 INFO DriverWrapper: Driver address: 127.0.0.1:42377",
        f"26/11/23 08:44:18 INFO SparkContext: Submitted application: {driver.registered_name}",
    ]
    if registered and driver.log_app_id:
        lines.append(
            "26/11/23 08:44:23 INFO StandaloneSchedulerBackend: Connected to Spark cluster "
            f"with app ID {driver.app_id}"
        )
    if registered and driver.log_every:
        until = now if driver.ended_at is None else min(now, driver.ended_at)
        for batch in range(int((until - driver.app_at) / driver.log_every)):
            lines.append(
                f"26/11/23 08:44:{30 + batch % 30:02d} INFO MicroBatchExecution: Committed "
                f"batch {batch} of query windowed_counts (50 rows)"
            )
    return "\n".join(lines) + "\n"


def _error(message: str) -> dict[str, Any]:
    return {
        "action": "ErrorResponse",
        "message": message,
        "serverSparkVersion": SPARK_VERSION,
        "success": False,
    }


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-answer (a node stopped while a listing was being sent)
        is not an error of the simulator: no traceback for it."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    cluster: SimCluster
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else a 40 ms delayed-ACK stall per answer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def _send(self, status: int, body: Any, content_type: str = "application/json") -> None:
        data = (json.dumps(body) if content_type == "application/json" else body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        value = json.loads(raw) if raw else {}
        if not isinstance(value, dict):
            raise ValueError("expected a JSON object")
        return value

    def _handle(self, method: str) -> None:
        parts = urlsplit(self.path)
        path = parts.path
        sim = self.cluster
        fault = sim._fault_for(path)
        if method == "POST":
            try:
                body = self._body()
            except ValueError as exc:
                self._send(400, _error(f"Malformed request: {exc}"))
                return
        else:
            body = {}
        if fault == "close":
            self._drop()
            return
        if fault == "503":
            self._send(503, {"message": "simulated outage"})
            return
        sub = "/v1/submissions/"
        if method == "POST" and path == f"{sub}create":
            self._send(*sim._create(body))
        elif method == "GET" and path.startswith(f"{sub}status/"):
            self._send(200, sim._status(path[len(sub) + len("status/") :]))
        elif method == "POST" and path.startswith(f"{sub}kill/"):
            self._send(200, sim._kill(path[len(sub) + len("kill/") :]))
        elif method == "GET" and path == f"{sub}readyz":
            self._send(200, {"action": "ReadyzResponse", "message": "", "success": True})
        elif method == "GET" and path in ("/json", "/json/"):
            self._send(200, sim._master_json_text(), "application/json; charset=utf-8")
        elif method == "GET" and path in ("/log", "/log/"):
            query = parse_qs(parts.query)
            try:  # no offset: the last byteLength bytes (as Spark's worker answers)
                offset = int(query["offset"][0]) if "offset" in query else None
                length = int(query.get("byteLength", [str(100 << 10)])[0])
            except ValueError:
                self._send(400, _error("offset and byteLength are numbers"))
                return
            kind = query.get("logType", ["stderr"])[0]
            text = sim._driver_log(query.get("driverId", [""])[0], kind, offset, length)
            self._send(200, text, "text/plain;charset=utf-8")
        elif method == "POST" and path == "/sim/control":
            try:
                self._send(200, sim._control(body))
            except (TypeError, ValueError) as exc:
                self._send(400, {"ok": False, "error": str(exc)})
        elif method == "GET" and path == "/sim/stats":
            self._send(200, sim.stats())
        elif method == "GET" and path == "/sim/drivers":
            self._send(200, sim.drivers())
        elif method == "GET" and path == "/sim/fencing-token":
            tag = parse_qs(parts.query).get("tag", [""])[0]
            self._send(200, {"tag": tag, "fencing_token": sim.fencing_token(tag)})
        else:
            self._send(404, _error(f"no such endpoint: {method} {path}"))

    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        self._handle("POST")


def control(url: str, op: str, timeout: float = 5.0, **params: Any) -> dict[str, Any]:
    """Drive a simulator in another process: ``control(url, "lose_state")``."""
    from harness import http

    response = http.post(
        f"{url.rstrip('/')}/sim/control",
        json={"op": op, **params},
        timeout=timeout,
    )
    response.raise_for_status()
    answer: dict[str, Any] = response.json()
    return answer


@dataclass
class SimProcess:
    """A simulator running in its own process (:func:`sim_process`)."""

    proc: subprocess.Popen[str]
    url: str
    master_url: str

    def stats(self) -> dict[str, int]:
        from harness import http

        answer: dict[str, int] = http.get(f"{self.url}/sim/stats", timeout=30).json()
        return answer

    def live_apps(self) -> dict[str, str]:
        """app id -> app name of every registered (WAITING or RUNNING) application."""
        from harness import http

        body = http.get(f"{self.url}/json/", timeout=60).json()
        return {a["id"]: a["name"] for a in body["activeapps"]}

    def control(self, op: str, **params: Any) -> dict[str, Any]:
        return control(self.url, op, **params)

    def fencing_token(self, tag: str) -> str | None:
        """:meth:`SimCluster.fencing_token` of the simulator in that process."""
        from harness import http

        answer = http.get(f"{self.url}/sim/fencing-token", params={"tag": tag}, timeout=30).json()
        token: str | None = answer["fencing_token"]
        return token


@contextmanager
def sim_process(app_start_delay: float, *extra: str) -> Iterator[SimProcess]:
    """``python -m harness.simcluster`` on a free port (``extra``: more of its options),
    terminated at the end."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness.simcluster",
            "--port",
            "0",
            "--app-start-delay",
            str(app_start_delay),
            *extra,
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("the simulator exited before printing its URLs")
        info = json.loads(line)
        yield SimProcess(proc, info["rest_url"], info["master_url"])
    finally:
        stop_process(proc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Simulated Spark standalone master (loopback).")
    parser.add_argument("--port", type=int, default=0, help="0 = a free port")
    parser.add_argument("--launch-delay", type=float, default=0.0)
    parser.add_argument("--app-start-delay", type=float, default=0.5)
    parser.add_argument("--executor-delay", type=float, default=0.0)
    parser.add_argument("--kill-delay", type=float, default=0.0)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--retained-drivers", type=int, default=200)
    parser.add_argument("--app-linger", type=float, default=0.0)
    parser.add_argument(
        "--pipeline-app-name", default=None, help="every app registers under this name"
    )
    parser.add_argument(
        "--no-log-app-id", action="store_true", help="drivers do not log their app id (INFO off)"
    )
    parser.add_argument("--runtime-announces", action="store_true")
    args = parser.parse_args(argv)
    sim = SimCluster(
        port=args.port,
        launch_delay=args.launch_delay,
        app_start_delay=args.app_start_delay,
        executor_delay=args.executor_delay,
        kill_delay=args.kill_delay,
        retained_drivers=args.retained_drivers,
        app_linger=args.app_linger,
        pipeline_app_name=args.pipeline_app_name,
        log_app_id=not args.no_log_app_id,
        runtime_announces=args.runtime_announces,
    ).start()
    sim.configure(latency=args.latency)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(
        json.dumps({"rest_url": sim.url, "ui_url": sim.url, "master_url": sim.master_url}),
        flush=True,
    )
    stop.wait()
    sim.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
