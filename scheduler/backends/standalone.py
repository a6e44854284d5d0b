"""Spark standalone through the master's REST submission server (cluster deploy mode).

Submissions are ``CreateSubmissionRequest`` POSTs to ``<rest_url>/v1/submissions/create`` with main
class ``org.apache.spark.deploy.PythonRunner``: the PySpark driver runs on one of the cluster's
workers and no JVM is started on the Drover host. The submission id is the master's driver id
(``driver-<yyyyMMddHHmmss>-<n>``).

What the master exposes (measured on Spark 4.3.0):

- ``GET <rest_url>/v1/submissions/status/<id>`` gives the DRIVER state only (SUBMITTED, RUNNING,
  RELAUNCHING, FINISHED, FAILED, ERROR, KILLED, UNKNOWN) plus the worker; an unknown id answers
  ``success: false``. Driver RUNNING means *launched* (~0.1 s after create), not that the
  application runs.
- ``GET <ui_url>/json/`` lists ``workers`` (id, ``webuiaddress``), ``activeapps`` /
  ``completedapps`` (id, name, state) and ``activedrivers`` / ``completeddrivers`` (id, state,
  worker, mainclass, starttime). Nothing there links a driver to its application: drivers carry
  no name and applications no driver id. The app appears ~4 s after create.
- The worker UI serves each driver's stderr at ``<worker webuiaddress>/log/?driverId=<id>&
  logType=stderr``; its first line is the worker's ``Launch Command: ...`` with every Spark
  property as ``-D<key>=<value>``. Spark redacts values whose key *or value* matches
  ``spark.redaction.regex`` (``secret|password|token|access.?key``): a job named
  ``token-refresher`` would lose its ``spark.app.name`` there. So every submission also carries
  ``spark.drover.appTag`` = the hex of the UTF-8 app name, which no redaction pattern matches.

Driver -> app name: remembered from :meth:`submit` or from the name a :meth:`status` caller
recorded with the submission id (a node taking over jobs knows them from its store), else read
once from the driver's launch command through its worker's log endpoint (~15 ms) and cached for
the backend's lifetime (a driver's name never changes). A driver not launched yet (SUBMITTED, no
worker) cannot be identified; see :meth:`find`.

State of one submission (:meth:`status`)::

    driver SUBMITTED / RELAUNCHING                        -> STARTING
    driver RUNNING, app of that name RUNNING in /json/     -> RUNNING (app id)
    driver RUNNING, app WAITING (no executors yet)         -> STARTING
    driver RUNNING, app not registered (or not identified) -> STARTING
    driver RUNNING, app already in completedapps           -> RUNNING ("driver exiting")
    driver FINISHED / FAILED / ERROR / KILLED              -> FINISHED / FAILED / FAILED / KILLED
    the master does not know the driver                    -> NOT_FOUND (lost master state too)
    driver UNKNOWN (master recovering), no answer, 5xx     -> ClusterUnreachable (never a guess)

The master gives no reason and no exit code for a FAILED driver: :meth:`status` reads the end of
the driver's stderr (``User application exited with N``) and stdout (the Python application's
last line: PythonRunner merges Python's stderr into it) on its worker, so the reason reads
``driver exited with code 1; last output: ValueError: ...``.

Scale (simulated master in another process, 2 busy cores): 10,000 creates from 8 threads 5 s;
a status() tick over 10,000 drivers 0.3 s (one listing); a fresh backend's first find() reads
10,000 launch commands in 6-7 s (8 parallel reads), later finds 0.3 s.

Listing cache: ``/json/`` is fetched at most once per ``listing_ttl_s`` (0.5 s by default), or
per ``LISTING_REUSE_FACTOR`` times the last fetch's duration if that is longer (a 10,000-driver
listing took 0.5-0.7 s on a busy machine: with a plain TTL measured from the fetch's start it
was stale on arrival, and a tick that wrote to the store between status() calls fetched it once
per job), and shared by every call, so a reconciler tick over many jobs costs one listing (a
few if the tick is long) plus one REST status call only for drivers the listing does not show
(just submitted, or forgotten by the master) or that failed (for the error message).
:meth:`submit` and :meth:`kill` drop the cached listing; :meth:`find` always reads a fresh one
(it decides whether to submit).

Errors: connection errors, timeouts, 5xx and garbled answers raise
:class:`~scheduler.errors.ClusterUnreachable` (chained); a 4xx or ``success: false`` on create
raises :class:`~scheduler.errors.SubmissionRejected`. A create that times out may still have
created a driver: callers :meth:`find` the app name before submitting again.

Kill: ``POST kill/<id>``; ``success: false`` ("already finished or does not exist") counts as
done, so kill is idempotent. Confirmation comes from :meth:`status` (KILLED / NOT_FOUND); on
Spark 4.3 the driver is KILLED and the app gone from ``/json/`` ~0.6 s after the kill. The kill
stops the driver JVM only: the Python driver process exits when its next Py4J call fails (a
streaming query's ``awaitTermination`` does at once). A Python loop that never calls into the JVM
outlives the kill as an orphan on the worker (seen in testing: still alive 15 min later).
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from scheduler.backends.base import (
    AppInfo,
    AppState,
    AppStatus,
    ProbeResult,
    Submission,
    SubmitRequest,
)
from scheduler.errors import ClusterError, ClusterUnreachable, SubmissionRejected
from scheduler.submission import OWNED_PROPERTIES

log = logging.getLogger(__name__)

PYTHON_RUNNER = "org.apache.spark.deploy.PythonRunner"
DEFAULT_SPARK_VERSION = "4.3.0"
DEFAULT_LISTING_TTL_S = 0.5
#: a cached listing is reused for at least this many times its fetch took (see the docstring)
LISTING_REUSE_FACTOR = 4.0
#: resources of one small streaming job (fits a test worker; a job's conf overrides them)
DEFAULT_RESOURCE_CONF: Mapping[str, str] = {
    "spark.driver.memory": "512m",
    "spark.driver.cores": "1",
    "spark.executor.memory": "512m",
    "spark.executor.cores": "1",
    "spark.cores.max": "1",
}
APP_TAG_PROPERTY = "spark.drover.appTag"
#: parallel launch-command reads when many drivers are not identified yet
IDENTIFY_THREADS = 8
#: how much of a driver's stderr is read to find its launch command
LAUNCH_HEADER_BYTES = 32 << 10
#: how much of the end of a failed driver's stderr and stdout is read for the failure's reason
FAILURE_TAIL_BYTES = 8 << 10

# Spark properties Drover sets itself; a job's conf cannot override them.
_OWNED_CONF = frozenset(
    {
        "spark.master",
        "spark.app.name",
        "spark.submit.deployMode",
        "spark.driver.supervise",
        "spark.submit.pyFiles",
        APP_TAG_PROPERTY,
        *OWNED_PROPERTIES,
    }
)
_ALIVE_DRIVER_STATES = frozenset({"SUBMITTED", "RUNNING", "RELAUNCHING", "UNKNOWN"})
_TAG = re.compile(r"-D" + re.escape(APP_TAG_PROPERTY) + r"=([0-9a-f]+)")
_APP_NAME = re.compile(r'"-Dspark\.app\.name=((?:[^"\\]|\\.)*)"')
_EXIT_CODE = re.compile(r"User application exited with (-?\d+)")


def _success(response: httpx.Response) -> bool:
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and bool(body.get("success"))


def _millis(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def app_tag(app_name: str) -> str:
    """The redaction-proof form of an app name carried in ``spark.drover.appTag``."""
    return app_name.encode("utf-8").hex()


def app_name_from_launch_command(text: str) -> str | None:
    """The app name in a driver's ``Launch Command`` header, or None if it is not there."""
    match = _TAG.search(text)
    if match is not None:
        try:
            return bytes.fromhex(match.group(1)).decode("utf-8")
        except ValueError:
            pass
    match = _APP_NAME.search(text)
    if match is not None and "redacted" not in match.group(1):
        return match.group(1).replace('\\"', '"')
    return None


@dataclass(frozen=True)
class _Driver:
    id: str
    state: str
    worker: str | None
    mainclass: str
    active: bool
    #: master clock, ms (when the master accepted the driver)
    starttime: int


@dataclass(frozen=True)
class _App:
    id: str
    name: str
    state: str
    active: bool
    #: master clock, ms (when the app registered)
    starttime: int


@dataclass(frozen=True)
class _Listing:
    """One parsed ``/json/`` answer of the master."""

    fetched_at: float
    drivers: dict[str, _Driver]
    #: app name -> apps of that name, active first
    apps: dict[str, list[_App]]
    #: worker id -> worker web UI address
    workers: dict[str, str]
    status: str
    #: how long the fetch took (s)
    seconds: float = 0.0

    def app(self, name: str, since: float = 0) -> _App | None:
        """The most relevant app of that name registered at or after ``since`` (ms): RUNNING,
        then WAITING, then any completed one. ``since`` = the driver's start time skips apps of
        earlier drivers that carried the same name (e.g. another Drover database's run 1)."""
        apps = [a for a in self.apps.get(name, []) if a.starttime >= since]
        for wanted in ("RUNNING", "WAITING"):
            for app in apps:
                if app.active and app.state == wanted:
                    return app
        active = [a for a in apps if a.active]
        candidates = active or apps
        return candidates[0] if candidates else None


@dataclass
class _Cache:
    listing: _Listing | None = None
    names: dict[str, str] = field(default_factory=dict)


class StandaloneRestBackend:
    """:class:`~scheduler.backends.base.ClusterBackend` for one Spark standalone master.

    Thread-safe; every call is a few short HTTP requests (``timeout_s`` each).
    """

    def __init__(
        self,
        rest_url: str,
        master_url: str,
        ui_url: str,
        *,
        python: str = sys.executable,
        base_conf: Mapping[str, str] | None = None,
        spark_version: str = DEFAULT_SPARK_VERSION,
        timeout_s: float = 3.0,
        listing_ttl_s: float = DEFAULT_LISTING_TTL_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not rest_url or not master_url or not ui_url:
            raise ClusterError("a standalone cluster needs its master, REST and UI URLs")
        self.rest_url = rest_url.rstrip("/")
        self.master_url = master_url
        self.ui_url = ui_url.rstrip("/")
        self.python = python
        self.base_conf: dict[str, str] = {**DEFAULT_RESOURCE_CONF, **(base_conf or {})}
        self.spark_version = spark_version
        self.listing_ttl_s = listing_ttl_s
        self._http = httpx.Client(
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 2.0)),
            trust_env=False,  # never through a proxy
            transport=transport,
        )
        self._lock = threading.Lock()
        self._fetch_lock = threading.Lock()
        self._cache = _Cache()
        #: number of /json/ fetches and worker log reads (for tests and benches)
        self.listing_fetches = 0
        self.log_reads = 0

    # ----------------------------------------------------------------------- HTTP

    def _request(self, method: str, url: str, what: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            raise ClusterUnreachable(f"{what}: no answer from {url}: {exc!r}") from exc
        if response.status_code >= 500:
            raise ClusterUnreachable(
                f"{what}: {url} answered {response.status_code}: {response.text[:200]}"
            )
        return response

    @staticmethod
    def _json(response: httpx.Response, what: str) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError as exc:
            raise ClusterUnreachable(
                f"{what}: garbled answer ({response.status_code}): {response.text[:200]!r}"
            ) from exc
        if not isinstance(body, dict):
            raise ClusterUnreachable(f"{what}: unexpected answer {body!r:.200}")
        return body

    # ----------------------------------------------------------------------- submit

    def submission_body(self, request: SubmitRequest) -> dict[str, Any]:
        """The ``CreateSubmissionRequest`` for one run (public for tests and benches)."""
        entrypoint = request.entrypoint
        app_resource = entrypoint if "://" in entrypoint else f"file:{entrypoint}"
        py_files = ",".join(request.py_files)
        conf = dict(self.base_conf)
        conf.update({k: v for k, v in request.conf.items() if k not in _OWNED_CONF})
        conf.update(request.drover_properties())  # a job's conf never overrides these
        conf.update(
            {
                "spark.master": self.master_url,
                "spark.app.name": request.app_name,
                "spark.submit.deployMode": "cluster",
                "spark.driver.supervise": "false",  # Drover's restart policy owns restarts
                APP_TAG_PROPERTY: app_tag(request.app_name),
            }
        )
        if py_files:
            conf["spark.submit.pyFiles"] = py_files
        env = {
            **request.env,
            "PYSPARK_PYTHON": self.python,
            "PYSPARK_DRIVER_PYTHON": self.python,
            **request.drover_environment(),
        }
        return {
            "action": "CreateSubmissionRequest",
            "clientSparkVersion": self.spark_version,
            "appResource": app_resource,
            "mainClass": PYTHON_RUNNER,
            "appArgs": [entrypoint, py_files, *request.args],
            "environmentVariables": env,
            "sparkProperties": conf,
        }

    def submit(self, request: SubmitRequest) -> Submission:
        if not request.entrypoint:
            raise SubmissionRejected(f"{request.app_name}: no entrypoint")
        url = f"{self.rest_url}/v1/submissions/create"
        what = f"submitting {request.app_name}"
        response = self._request("POST", url, what, json=self.submission_body(request))
        body = self._json(response, what) if response.content else {}
        driver_id = body.get("submissionId")
        if response.status_code >= 400 or not body.get("success") or not driver_id:
            message = body.get("message") or response.text[:300]
            raise SubmissionRejected(
                f"{what}: the master refused it ({response.status_code}): {message}"
            )
        with self._lock:
            self._cache.names[driver_id] = request.app_name
            self._cache.listing = None
        log.info("submitted %s as %s on %s", request.app_name, driver_id, self.master_url)
        return Submission(submission_id=driver_id)

    # ----------------------------------------------------------------------- listing

    def _listing(self, max_age: float | None = None) -> _Listing:
        """The master's /json/, at most ``max_age`` seconds old (default: the TTL, or
        ``LISTING_REUSE_FACTOR`` times the last fetch's duration if that is longer)."""

        def fresh(cached: _Listing) -> bool:
            limit = max_age
            if limit is None:
                limit = max(self.listing_ttl_s, LISTING_REUSE_FACTOR * cached.seconds)
            return time.monotonic() - cached.fetched_at <= limit

        with self._lock:
            cached = self._cache.listing
        if cached is not None and fresh(cached):
            return cached
        with self._fetch_lock:  # one fetch at a time; others reuse its result
            with self._lock:
                cached = self._cache.listing
            if cached is not None and fresh(cached):
                return cached
            started = time.monotonic()
            listing = replace(self._fetch_listing(started), seconds=time.monotonic() - started)
            with self._lock:
                self._cache.listing = listing
                self.listing_fetches += 1
            return listing

    def _fetch_listing(self, fetched_at: float) -> _Listing:
        url = f"{self.ui_url}/json/"
        what = f"listing {self.master_url}"
        response = self._request("GET", url, what)
        if response.status_code != 200:
            raise ClusterUnreachable(f"{what}: {url} answered {response.status_code}")
        body = self._json(response, what)
        try:
            drivers: dict[str, _Driver] = {}
            for key, active in (("completeddrivers", False), ("activedrivers", True)):
                for d in body.get(key, []):
                    drivers[d["id"]] = _Driver(
                        d["id"],
                        d["state"],
                        d.get("worker"),
                        d.get("mainclass", ""),
                        active,
                        _millis(d.get("starttime")),
                    )
            apps: dict[str, list[_App]] = {}
            for key, active in (("activeapps", True), ("completedapps", False)):
                for a in body.get(key, []):
                    apps.setdefault(a["name"], []).append(
                        _App(a["id"], a["name"], a["state"], active, _millis(a.get("starttime")))
                    )
            workers = {w["id"]: w.get("webuiaddress", "") for w in body.get("workers", [])}
        except (KeyError, TypeError) as exc:
            raise ClusterUnreachable(f"{what}: unexpected /json/ layout: {exc!r}") from exc
        return _Listing(fetched_at, drivers, apps, workers, str(body.get("status", "")))

    # ----------------------------------------------------------------------- driver names

    def _name_of(self, driver_id: str, worker_id: str | None, listing: _Listing) -> str | None:
        """The app name a driver carries (cached; else from its launch command on its worker)."""
        with self._lock:
            name = self._cache.names.get(driver_id)
        if name is not None:
            return name
        address = listing.workers.get(worker_id or "")
        if not address:
            return None  # not launched yet, or its worker is gone
        response = self._request(
            "GET",
            f"{address.rstrip('/')}/log/",
            f"reading the launch command of {driver_id}",
            params={
                "driverId": driver_id,
                "logType": "stderr",
                "offset": 0,
                "byteLength": LAUNCH_HEADER_BYTES,
            },
        )
        with self._lock:
            self.log_reads += 1
        if response.status_code != 200:
            return None
        name = app_name_from_launch_command(response.text)
        if name is not None:
            with self._lock:
                self._cache.names[driver_id] = name
        return name

    def _identify_live_drivers(self, listing: _Listing) -> None:
        """Read the launch commands of all live, launched, unidentified drivers in parallel."""
        with self._lock:
            todo = [
                d
                for d in listing.drivers.values()
                if d.active
                and d.id not in self._cache.names
                and d.mainclass in ("", PYTHON_RUNNER)
                and listing.workers.get(d.worker or "")
            ]
        if len(todo) < 2:
            return
        with ThreadPoolExecutor(IDENTIFY_THREADS, thread_name_prefix="drover-identify") as pool:
            for future in [pool.submit(self._name_of, d.id, d.worker, listing) for d in todo]:
                future.result()  # ClusterUnreachable propagates

    # ----------------------------------------------------------------------- status

    def status(self, submission_id: str, app_name: str | None = None) -> AppStatus:
        if app_name:
            # the caller recorded this pair from submit()/find(): no launch-command read needed
            with self._lock:
                self._cache.names.setdefault(submission_id, app_name)
        listing = self._listing()
        driver = listing.drivers.get(submission_id)
        message = None
        if driver is None or driver.state in ("ERROR", "FAILED"):
            rest = self._rest_status(submission_id)
            if rest is None:
                return AppStatus(
                    AppState.NOT_FOUND,
                    reason=f"the master does not know {submission_id} "
                    "(never submitted here, long finished, or the master lost its state)",
                )
            state = str(rest.get("driverState", ""))
            worker = rest.get("workerId") or (driver.worker if driver else None)
            message = rest.get("message")
        else:
            state, worker = driver.state, driver.worker
        status = self._driver_status(submission_id, state, worker, message, listing)
        if state == "FAILED" and not message:
            status = self._with_failure_detail(status, submission_id, worker, listing)
        return status

    def _with_failure_detail(
        self, status: AppStatus, driver_id: str, worker_id: str | None, listing: _Listing
    ) -> AppStatus:
        """``status`` of a FAILED driver, with the exit code of the Python application and the
        last line it printed, read from the end of the driver's logs on its worker (the master
        reports neither). Unchanged when the worker cannot tell."""
        address = listing.workers.get(worker_id or "")
        if not address:
            return status
        tails = {}
        for kind in ("stderr", "stdout"):  # PythonRunner puts Python's stderr in stdout
            try:
                response = self._request(
                    "GET",
                    f"{address.rstrip('/')}/log/",
                    f"reading the {kind} of {driver_id}",
                    params={
                        "driverId": driver_id,
                        "logType": kind,
                        "byteLength": FAILURE_TAIL_BYTES,
                    },
                )
            except ClusterUnreachable:
                return status  # the detail is a courtesy: a status never fails over it
            with self._lock:
                self.log_reads += 1
            tails[kind] = response.text if response.status_code == 200 else ""
        codes = _EXIT_CODE.findall(tails["stderr"])
        exit_code = int(codes[-1]) if codes else status.exit_code
        lines = [
            line.strip()
            for line in tails["stdout"].splitlines()
            if line.strip() and not line.startswith(("====", "Launch Command:"))
        ]
        reason = "driver exited with an error"
        if exit_code is not None:
            reason = f"driver exited with code {exit_code}"
        if lines:
            reason = f"{reason}; last output: {lines[-1][:300]}"
        return replace(status, reason=reason, exit_code=exit_code)

    def _rest_status(self, driver_id: str) -> dict[str, Any] | None:
        url = f"{self.rest_url}/v1/submissions/status/{driver_id}"
        what = f"status of {driver_id}"
        response = self._request("GET", url, what)
        body = self._json(response, what)
        if response.status_code == 404 or not body.get("success") or not body.get("driverState"):
            return None
        return body

    def _driver_status(
        self,
        driver_id: str,
        state: str,
        worker: str | None,
        message: str | None,
        listing: _Listing,
    ) -> AppStatus:
        if state == "SUBMITTED":
            return AppStatus(AppState.STARTING, reason="driver waiting for a worker")
        if state == "RELAUNCHING":
            return AppStatus(AppState.STARTING, reason="driver relaunching")
        if state == "UNKNOWN":
            raise ClusterUnreachable(
                f"{driver_id}: driver state UNKNOWN on {self.master_url} (master recovering)"
            )
        listed = listing.drivers.get(driver_id)
        # a driver the listing does not show is younger than the listing: so is any app of it
        since = listed.starttime if listed is not None else float("inf")
        name = self._name_of(driver_id, worker, listing) if state == "RUNNING" else None
        if state == "RUNNING":
            app = listing.app(name, since) if name is not None else None
            if name is None:
                return AppStatus(
                    AppState.STARTING, reason="driver launched, app not identified yet"
                )
            if app is None:
                return AppStatus(
                    AppState.STARTING, reason="driver launched, app not registered yet"
                )
            if not app.active:
                return AppStatus(
                    AppState.RUNNING, app.id, reason=f"app ended ({app.state}), driver exiting"
                )
            if app.state == "RUNNING":
                return AppStatus(AppState.RUNNING, app.id)
            return AppStatus(AppState.STARTING, app.id, reason=f"app {app.state.lower()}")
        with self._lock:
            known = self._cache.names.get(driver_id)
        ended = listing.app(known, since) if known is not None else None
        app_id = ended.id if ended is not None else None
        if state == "FINISHED":
            return AppStatus(AppState.FINISHED, app_id, exit_code=0)
        if state == "FAILED":
            detail = f": {message}" if message else ""
            return AppStatus(AppState.FAILED, app_id, reason=f"driver exited with an error{detail}")
        if state == "ERROR":
            detail = f": {message}" if message else ""
            return AppStatus(AppState.FAILED, app_id, reason=f"driver could not run{detail}")
        if state == "KILLED":
            return AppStatus(AppState.KILLED, app_id, reason="killed")
        raise ClusterUnreachable(f"{driver_id}: unexpected driver state {state!r}")

    # ----------------------------------------------------------------------- kill

    def kill(self, submission_id: str) -> None:
        url = f"{self.rest_url}/v1/submissions/kill/{submission_id}"
        what = f"killing {submission_id}"
        response = self._request("POST", url, what)
        body = self._json(response, what)
        with self._lock:
            self._cache.listing = None
        if not body.get("success"):
            # "Driver ... has already finished or does not exist": nothing left to kill
            log.info("%s: %s", what, body.get("message", "not running"))

    # ----------------------------------------------------------------------- listing / find

    def list_applications(self) -> list[AppInfo]:
        """Every driver the master lists that carries a Drover app name, plus unidentified live
        drivers (with an empty app name: they may be Drover's)."""
        listing = self._listing()
        self._identify_live_drivers(listing)
        apps = []
        for driver in listing.drivers.values():
            if driver.mainclass not in ("", PYTHON_RUNNER):
                continue
            try:
                name = self._name_of(driver.id, driver.worker, listing)
            except ClusterUnreachable:
                if not driver.active:
                    continue  # an ended driver on a vanished worker: nothing to act on
                raise
            if name is None and not driver.active:
                continue
            if name is not None and not name.startswith("drover:"):
                continue
            status = self._driver_status(driver.id, driver.state, driver.worker, None, listing)
            apps.append(AppInfo(driver.id, name or "", status.state, status.app_id))
        return apps

    def find(self, app_name: str) -> Submission | None:
        """The live driver carrying ``app_name`` (from a fresh /json/).

        Raises ClusterUnreachable instead of answering None when the answer could be wrong: a
        live driver that cannot be identified yet (queued for a worker, launch command not
        readable), or a live app of that name whose driver is not among the identified ones.
        """
        listing = self._listing(max_age=0.0)
        self._identify_live_drivers(listing)
        unidentified = []
        for driver in listing.drivers.values():
            if not driver.active or driver.state not in _ALIVE_DRIVER_STATES:
                continue
            if driver.mainclass not in ("", PYTHON_RUNNER):
                continue
            name = self._name_of(driver.id, driver.worker, listing)
            if name == app_name:
                app = listing.app(app_name, driver.starttime)
                return Submission(driver.id, app.id if app is not None and app.active else None)
            if name is None:
                unidentified.append(driver.id)
        app = listing.app(app_name)
        if app is not None and app.active:
            raise ClusterUnreachable(
                f"{app_name} runs as {app.id} on {self.master_url} but no driver of it was found"
            )
        if unidentified:
            raise ClusterUnreachable(
                f"cannot tell whether {app_name} exists on {self.master_url}: "
                f"drivers {', '.join(sorted(unidentified))} are not identified yet"
            )
        return None

    # ----------------------------------------------------------------------- probe

    def probe(self) -> ProbeResult:
        """The REST server's ``readyz`` answers, and the master's ``/json/`` answers with status
        ALIVE and at least one alive worker. Free cores are reported, not judged: a busy cluster
        is not a failing one."""
        started = time.monotonic()
        try:
            ok, detail = self._probe()
        except Exception as exc:  # noqa: BLE001 - a probe never raises
            ok, detail = False, f"probe failed: {exc!r}"
        return ProbeResult(ok=ok, detail=detail, latency_s=time.monotonic() - started)

    def _probe(self) -> tuple[bool, str]:
        url = f"{self.rest_url}/v1/submissions/readyz"
        try:
            response = self._http.get(url)
        except httpx.HTTPError as exc:
            return False, f"REST {url}: no answer: {exc!r}"
        if response.status_code != 200 or not _success(response):
            return False, f"REST {url}: not ready ({response.status_code})"
        url = f"{self.ui_url}/json/"
        try:
            response = self._http.get(url)
        except httpx.HTTPError as exc:
            return False, f"master {url}: no answer: {exc!r}"
        if response.status_code != 200:
            return False, f"master {url}: answered {response.status_code}"
        body = response.json()
        if not isinstance(body, dict):
            return False, f"master {url}: unexpected answer {body!r:.100}"
        status = str(body.get("status", ""))
        workers = [w for w in body.get("workers", []) if isinstance(w, dict)]
        alive = [w for w in workers if w.get("state") == "ALIVE"]
        free = sum(int(w.get("coresfree", 0)) for w in alive)
        summary = (
            f"master {status or 'status unknown'}, {len(alive)} of {len(workers)} workers alive, "
            f"{free} cores free"
        )
        if status != "ALIVE":
            return False, f"master {url}: {summary}"
        if not alive:
            return False, f"no alive worker: {summary}"
        return True, summary

    # ----------------------------------------------------------------------- lifecycle

    def close(self) -> None:
        self._http.close()
