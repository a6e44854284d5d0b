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
  ``completedapps`` (id, name, state, starttime) and ``activedrivers`` / ``completeddrivers`` (id,
  state, worker, mainclass, starttime). Nothing there links a driver to its application: drivers
  carry no name and applications no driver id. The app appears ~4 s after create.
- The worker UI serves each driver's stderr and stdout at ``<worker webuiaddress>/log/?driverId=
  <id>&logType=stderr&offset=..&byteLength=..``. The stderr starts with the worker's ``Launch
  Command: ...`` (every Spark property of the submission as ``-D<key>=<value>``), followed by the
  driver's own log4j output.

Three identities (see ``scheduler/backends/driverlog.py`` for the log lines):

- driver -> run: the run's tag (``drover:<job>:<run>``) is in the driver's launch command as
  ``spark.drover.appTag`` (hex: Spark redacts values matching ``token|secret|...``, so a job named
  ``token-refresher`` would lose its ``spark.app.name`` there). The worker writes it from the
  submission before any pipeline code runs: the pipeline cannot change it.
- driver -> application (the *link*): the application id the driver logs once the master
  registered it (``Connected to Spark cluster with app ID app-...``, or drover_runtime's
  ``drover-runtime: started app_id=...`` on its stdout). The application's registered *name* is
  not the link: a pipeline that calls ``builder.appName("rate-counter")`` registers as
  ``rate-counter``. The name is only a hint, used when the driver's log has no app id line (a
  cluster whose log4j config hides INFO) and the pipeline kept Drover's name.
- Both are cached for the backend's lifetime (neither ever changes for a driver) and can be
  handed in by a :meth:`status` caller that recorded them (a node taking over jobs knows the tag
  and app id of every run from its store): then no log is read at all.

When logs are read: the tag once per driver (the first ``LOG_CHUNK_BYTES`` of its stderr, which
usually hold the app id line as well); the app id only while the driver is unlinked *and* the
listing shows an application registered since the driver started that no known driver owns
(so nothing is read while an application has not registered yet, and nothing once linked),
continuing where the last read stopped, backing off between unsuccessful reads. A driver not
launched yet (SUBMITTED, no worker) cannot be identified; see :meth:`find`.

State of one submission (:meth:`status`)::

    driver SUBMITTED / RELAUNCHING                        -> STARTING
    driver RUNNING, its linked app RUNNING in /json/       -> RUNNING (app id)
    driver RUNNING, app WAITING (no executors yet)         -> STARTING
    driver RUNNING, app not registered (or not linked yet) -> STARTING
    driver RUNNING, app already in completedapps           -> RUNNING ("driver exiting")
    driver ended, its linked app still active in /json/    -> RUNNING ("still registered")
    driver FINISHED / FAILED / ERROR / KILLED              -> FINISHED / FAILED / FAILED / KILLED
    the master does not know the driver                    -> NOT_FOUND (lost master state too)
    driver UNKNOWN (master recovering), no answer, 5xx     -> ClusterUnreachable (never a guess)

The master gives no reason and no exit code for a FAILED driver: :meth:`status` reads the end of
the driver's stderr (``User application exited with N``) and stdout (the Python application's
last line: PythonRunner merges Python's stderr into it) on its worker, so the reason reads
``driver exited with code 1; last output: ValueError: ...``.

Scale (simulated master in another process, 2 busy cores): 10,000 creates from 8 threads 5 s;
a status() tick over 10,000 drivers 0.3 s (one listing); a fresh backend's first find() reads
10,000 launch commands in 6-7 s (8 parallel reads), later finds 0.3 s. The link costs one log
read per driver, once (``bench/link.py``).

Listing cache: ``/json/`` is fetched at most once per ``listing_ttl_s`` (0.5 s by default), or
per ``LISTING_REUSE_FACTOR`` times the last fetch's duration if that is longer (a 10,000-driver
listing took 0.5-0.7 s on a busy machine: with a plain TTL measured from the fetch's start it
was stale on arrival, and a tick that wrote to the store between status() calls fetched it once
per job; at 50,000 drivers it is ~20 MB and about a fifth of a reconciler's CPU went to fetching
it again every 4 fetch-durations: 10 bounds that to a tenth of the time, for the master too), and
shared by every call, so a reconciler tick over many jobs costs one listing (a
few if the tick is long) plus one REST status call only for drivers the listing does not show
(just submitted, or forgotten by the master) or that failed (for the error message).
:meth:`submit` and :meth:`kill` mark their driver: a :meth:`status` of a marked driver wants a
listing whose fetch started after the mark (fetched once, then shared: a failover that kills
1,000 drivers and then asks each one's status fetches the listing once, not once per driver, as
when every submit and kill dropped the cached listing). :meth:`find` always reads a fresh one
(it decides whether to submit). A fetch that fails is remembered for ``FAILURE_REUSE_FACTOR`` times
its duration: the status of 1,000 drivers on an unreachable master fails fast after the first
timeout instead of waiting for one each (only a slow failure is remembered: a refused connection or
a 503 is asked again at once).

Change feed (``scheduler/backends/changes.py``): every listing fetched is summarised per driver
(its state, worker and whether it is active, and its linked application's state), and
:meth:`changes` names the drivers whose summary differs between the caller's mark and now, those
killed since, and those whose last :meth:`status` did not follow from a listing alone (not listed
yet, failed, not linked yet). A reconciler asks :meth:`status` only about those: a steady tick
over 10,000 running jobs costs one listing, not 10,000 calls.

Errors: connection errors, timeouts, 5xx and garbled answers raise
:class:`~scheduler.core.errors.ClusterUnreachable` (chained); a 4xx or ``success: false`` on create
raises :class:`~scheduler.core.errors.SubmissionRejected`. A create that times out may still have
created a driver: callers :meth:`find` the app name before submitting again.

Kill: ``POST kill/<id>``; ``success: false`` ("already finished or does not exist") counts as
done, so kill is idempotent. Confirmation comes from :meth:`status`: KILLED / NOT_FOUND only once
the driver has ended *and* its linked application has left the active applications (on Spark 4.3
the driver is KILLED and the app gone from ``/json/`` ~0.6 s after the kill). The kill
stops the driver JVM only: the Python driver process exits when its next Py4J call fails (a
streaming query's ``awaitTermination`` does at once). A Python loop that never calls into the JVM
outlives the kill as an orphan on the worker (seen in testing: still alive 15 min later).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import httpx

from scheduler.backends import http
from scheduler.backends.changes import ChangeLog, Changes, Mark
from scheduler.backends.driverlog import (
    APP_TAG_PROPERTY,
    FENCE_TAG_PROPERTY,
    LogCursor,
    app_id_in,
    app_name_from_launch_command,
    app_tag,
    fence_tag_from_launch_command,
    parse_log_page,
)
from scheduler.core.backend import (
    AppInfo,
    AppState,
    AppStatus,
    LogChunk,
    ProbeResult,
    Submission,
    SubmitRequest,
    fence_head,
    fence_tag_of_digest,
    parse_app_name,
)
from scheduler.core.errors import (
    ClusterError,
    ClusterUnreachable,
    InvalidInput,
    NotFound,
    SubmissionRejected,
)
from scheduler.core.ledger import fencing_digest
from scheduler.decisions.submission import OWNED_PROPERTIES

__all__ = [
    "APP_TAG_PROPERTY",
    "PYTHON_RUNNER",
    "StandaloneRestBackend",
    "app_name_from_launch_command",
    "app_tag",
]

log = logging.getLogger(__name__)

PYTHON_RUNNER = "org.apache.spark.deploy.PythonRunner"
DEFAULT_SPARK_VERSION = "4.3.0"
DEFAULT_LISTING_TTL_S = 0.5
#: a cached listing is reused for at least this many times its fetch took (see the docstring)
LISTING_REUSE_FACTOR = 10.0
#: a failed listing fetch that took this long (s) is reused for FAILURE_REUSE_FACTOR times that
SLOW_FAILURE_S = 0.5
#: (shorter than a listing's reuse: a cluster that answers again is seen again soon)
FAILURE_REUSE_FACTOR = 4.0
#: resources of one small streaming job (fits a test worker; a job's conf overrides them)
DEFAULT_RESOURCE_CONF: Mapping[str, str] = {
    "spark.driver.memory": "512m",
    "spark.driver.cores": "1",
    "spark.executor.memory": "512m",
    "spark.executor.cores": "1",
    "spark.cores.max": "1",
}
#: parallel launch-command reads when many drivers are not identified yet
IDENTIFY_THREADS = 8
#: how much of a driver's log one read asks for (the first holds the launch command)
LOG_CHUNK_BYTES = 64 << 10
#: how far into a driver's stderr the app id line is looked for
LINK_SCAN_LIMIT = 4 << 20
#: back-off between unsuccessful link reads of one driver (doubling from the first value)
LINK_RETRY_S = (0.5, 30.0)
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
        FENCE_TAG_PROPERTY,
        *OWNED_PROPERTIES,
    }
)
_ALIVE_DRIVER_STATES = frozenset({"SUBMITTED", "RUNNING", "RELAUNCHING", "UNKNOWN"})
_EXIT_CODE = re.compile(r"User application exited with (-?\d+)")


def _success(response: httpx.Response) -> bool:
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and bool(body.get("success"))


_DECODER = json.JSONDecoder()


def _master_head(text: str) -> dict[str, Any]:
    """The master's ``/json/`` status and workers, all a probe reads, without decoding its
    drivers and applications (about 20 MB at 50,000 drivers: a node probing every few seconds
    spent more CPU decoding them than on anything else it does). The two keys occur once, at the
    top level: a driver or an application has a ``state`` and a ``worker``, never a ``status``
    or ``workers``, and a string value cannot hold an unescaped quote. Anything unexpected is
    decoded in full. Raises ValueError when the answer is not a JSON object."""
    head: dict[str, Any] = {}
    for key in ("status", "workers"):
        at = text.find(f'"{key}":')
        if at < 0:
            break
        start = at + len(key) + 3
        while start < len(text) and text[start] in " \t\r\n":
            start += 1
        try:
            head[key], _ = _DECODER.raw_decode(text, start)
        except ValueError:
            break
    else:
        if text.lstrip().startswith("{"):
            return head
    body = json.loads(text)
    if not isinstance(body, dict):
        raise ValueError("not a JSON object")
    return body


def _millis(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


class _Driver(NamedTuple):
    """One driver of a listing (a tuple: a listing makes tens of thousands of them, and a
    frozen dataclass's ``__init__`` costs several times a tuple's)."""

    id: str
    state: str
    worker: str | None
    mainclass: str
    active: bool
    #: master clock, ms (when the master accepted the driver)
    starttime: int


class _App(NamedTuple):
    """One application of a listing (a tuple, as :class:`_Driver`)."""

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
    #: app id -> app (active and completed)
    by_id: dict[str, _App] = field(default_factory=dict)

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
class _DriverLog:
    """What is known of one driver: its run's tag and its application (the link)."""

    stderr: LogCursor = field(default_factory=LogCursor)
    stdout: LogCursor = field(default_factory=LogCursor)
    #: the run's tag from the launch command (or handed in by a caller that recorded it)
    name: str | None = None
    #: the launch command header of the stderr has been read completely
    header_done: bool = False
    #: the fence tag of the launch command (``spark.drover.fenceTag``; None: not there)
    fence_tag: str | None = None
    #: the linked application's id
    app_id: str | None = None
    #: how the link was made: "log", "name" (hint), "recorded" (handed in), "submit"
    linked_by: str = ""
    #: unsuccessful link reads so far, and when the next one may happen (monotonic)
    misses: int = 0
    next_read_at: float = 0.0


@dataclass
class _Cache:
    listing: _Listing | None = None
    drivers: dict[str, _DriverLog] = field(default_factory=dict)
    #: app id -> the driver linked to it
    owners: dict[str, str] = field(default_factory=dict)
    #: drivers this instance submitted or was asked about that are not linked yet
    unlinked_watched: set[str] = field(default_factory=set)
    #: (start time, id) of the apps of listing ``unlinked_of`` no driver was linked to
    unlinked_of: _Listing | None = None
    unlinked: list[tuple[int, str]] = field(default_factory=list)
    #: driver id -> when this backend last submitted or killed it (monotonic): its status needs
    #: a listing fetched after that
    touched: dict[str, float] = field(default_factory=dict)
    #: the last failed fetch: (when it started, how long it took, the error)
    failure: tuple[float, float, ClusterUnreachable] | None = None


class StandaloneRestBackend:
    """:class:`~scheduler.core.backend.ClusterBackend` for one Spark standalone master.

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
        self._http = http.client(timeout_s, transport)
        self._lock = threading.Lock()
        self._fetch_lock = threading.Lock()
        self._cache = _Cache()
        self._changes = ChangeLog()
        self._link_pool: ThreadPoolExecutor | None = None
        #: number of /json/ fetches and worker log reads (for tests and benches)
        self.listing_fetches = 0
        self.log_reads = 0

    # ----------------------------------------------------------------------- HTTP

    def _request(self, method: str, url: str, what: str, **kwargs: Any) -> httpx.Response:
        return http.request(self._http, method, url, what, **kwargs)

    @staticmethod
    def _json(response: httpx.Response, what: str) -> dict[str, Any]:
        return http.json_object(response, what)

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
                # which token the driver holds (its digest's head), for the stray sweep
                FENCE_TAG_PROPERTY: fence_head(fencing_digest(request.fencing_token)),
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
            entry = self._cache.drivers.setdefault(driver_id, _DriverLog())
            entry.name = request.app_name
            entry.fence_tag = fence_head(fencing_digest(request.fencing_token))
            self._cache.unlinked_watched.add(driver_id)
            self._cache.touched[driver_id] = time.monotonic()
        log.info("submitted %s as %s on %s", request.app_name, driver_id, self.master_url)
        return Submission(submission_id=driver_id)

    # ----------------------------------------------------------------------- listing

    def _listing(self, max_age: float | None = None, *, driver: str | None = None) -> _Listing:
        """The master's /json/, at most ``max_age`` seconds old (default: the TTL, or
        ``LISTING_REUSE_FACTOR`` times the last fetch's duration if that is longer), and fetched
        after this backend last submitted or killed ``driver``."""

        def fresh(cached: _Listing) -> bool:
            limit = max_age
            if limit is None:
                limit = max(self.listing_ttl_s, LISTING_REUSE_FACTOR * cached.seconds)
            if time.monotonic() - cached.fetched_at > limit:
                return False
            return touched is None or cached.fetched_at >= touched

        def failed_lately() -> ClusterUnreachable | None:
            failure = self._cache.failure
            if failure is None or max_age == 0.0:
                return None
            started, seconds, error = failure
            if time.monotonic() - started > FAILURE_REUSE_FACTOR * seconds:
                return None
            if touched is not None and started < touched:
                return None
            return error

        with self._lock:
            cached = self._cache.listing
            touched = self._cache.touched.get(driver) if driver is not None else None
        if cached is not None and fresh(cached):
            return cached
        with self._fetch_lock:  # one fetch at a time; others reuse its result (or its failure)
            with self._lock:
                cached = self._cache.listing
                failed = failed_lately()
            if cached is not None and fresh(cached):
                return cached
            if failed is not None:
                raise ClusterUnreachable(f"{failed.message} (a moment ago)") from failed
            started = time.monotonic()
            try:
                listing = replace(self._fetch_listing(started), seconds=time.monotonic() - started)
            except ClusterUnreachable as exc:
                took = time.monotonic() - started
                if took >= SLOW_FAILURE_S:  # a timeout: not worth waiting for again at once
                    with self._lock:
                        self._cache.failure = (started, took, exc)
                raise
            with self._lock:
                self._cache.listing = listing
                self._cache.failure = None
                self.listing_fetches += 1
                if self._cache.touched:  # marks this listing already answers
                    self._cache.touched = {
                        d: t for d, t in self._cache.touched.items() if t > started
                    }
                prints = self._fingerprints(listing)
            self._changes.advance(prints)
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
            by_id: dict[str, _App] = {}
            for key, active in (("activeapps", True), ("completedapps", False)):
                for a in body.get(key, []):
                    app = _App(a["id"], a["name"], a["state"], active, _millis(a.get("starttime")))
                    apps.setdefault(app.name, []).append(app)
                    by_id.setdefault(app.id, app)
            workers = {w["id"]: w.get("webuiaddress", "") for w in body.get("workers", [])}
        except (KeyError, TypeError) as exc:
            raise ClusterUnreachable(f"{what}: unexpected /json/ layout: {exc!r}") from exc
        return _Listing(
            fetched_at, drivers, apps, workers, str(body.get("status", "")), by_id=by_id
        )

    # ----------------------------------------------------------------------- driver logs

    def _entry(self, driver_id: str) -> _DriverLog:
        """The record of one driver (call with the lock held)."""
        entry = self._cache.drivers.get(driver_id)
        if entry is None:
            entry = self._cache.drivers[driver_id] = _DriverLog()
        return entry

    def _link(self, driver_id: str, entry: _DriverLog, app_id: str, how: str) -> None:
        """Tie a driver to its application (call with the lock held)."""
        entry.app_id, entry.linked_by = app_id, how
        self._cache.owners[app_id] = driver_id
        self._cache.unlinked_watched.discard(driver_id)
        if entry.name is not None:  # nothing more to learn from its logs
            entry.stderr.carry = entry.stdout.carry = b""

    def _worker_log(
        self, address: str, driver_id: str, kind: str, **window: int
    ) -> httpx.Response:
        """One read of a driver's ``kind`` log (stderr, stdout) on its worker at ``address``;
        ``window``: ``offset`` and ``byteLength`` (from the end without an offset)."""
        response = self._request(
            "GET",
            f"{address.rstrip('/')}/log/",
            f"reading the {kind} of {driver_id}",
            params={"driverId": driver_id, "logType": kind, **window},
        )
        with self._lock:
            self.log_reads += 1
        return response

    def _read_log(
        self, driver_id: str, worker_id: str | None, listing: _Listing, kind: str
    ) -> bool:
        """Read the next chunk of a driver's stderr or stdout on its worker and learn from it
        (the run's tag from the launch command, the app id from the lines of driverlog.py).
        False when there is nothing to read (no worker, unreadable)."""
        address = listing.workers.get(worker_id or "")
        if not address:
            return False  # not launched yet, or its worker is gone
        with self._lock:
            entry = self._entry(driver_id)
            offset = (entry.stderr if kind == "stderr" else entry.stdout).offset
        response = self._worker_log(
            address, driver_id, kind, offset=offset, byteLength=LOG_CHUNK_BYTES
        )
        page = parse_log_page(response.content) if response.status_code == 200 else None
        if page is None:
            return False
        with self._lock:
            cursor = entry.stderr if kind == "stderr" else entry.stdout
            for line in cursor.feed(page):
                if kind == "stderr" and not entry.header_done:
                    if line.startswith(b"===="):
                        entry.header_done = True
                    else:
                        text = line.decode("utf-8", errors="replace")
                        if entry.name is None:
                            entry.name = app_name_from_launch_command(text)
                        if entry.fence_tag is None:
                            entry.fence_tag = fence_tag_from_launch_command(text)
                if entry.app_id is None:
                    app_id = app_id_in(line)
                    if app_id is not None:
                        self._link(driver_id, entry, app_id, "log")
        return True

    def _name_of(self, driver_id: str, worker_id: str | None, listing: _Listing) -> str | None:
        """The run's tag a driver carries (cached; else from its launch command on its worker)."""
        with self._lock:
            entry = self._entry(driver_id)
            if entry.name is not None or entry.header_done:
                return entry.name
        self._read_log(driver_id, worker_id, listing, "stderr")
        with self._lock:
            return entry.name

    def _identify_live_drivers(self, listing: _Listing) -> None:
        """Read the launch commands of all live, launched, unidentified drivers in parallel."""
        with self._lock:
            todo = [
                d
                for d in listing.drivers.values()
                if d.active
                and d.mainclass in ("", PYTHON_RUNNER)
                and listing.workers.get(d.worker or "")
                and not self._identified(d.id)
            ]
        if len(todo) < 2:
            return
        with ThreadPoolExecutor(IDENTIFY_THREADS, thread_name_prefix="drover-identify") as pool:
            for future in [pool.submit(self._name_of, d.id, d.worker, listing) for d in todo]:
                future.result()  # ClusterUnreachable propagates

    def _identified(self, driver_id: str) -> bool:
        entry = self._cache.drivers.get(driver_id)
        return entry is not None and (entry.name is not None or entry.header_done)

    # ----------------------------------------------------------------------- the link

    def _unlinked_app_since(self, since: float, listing: _Listing) -> bool:
        """Whether the listing shows an app registered at or after ``since`` (ms) that no known
        driver is linked to: the only time reading an unlinked driver's log can link it.

        Amortised O(1) per call: the listing's unlinked apps sorted by start time, the linked
        ones dropped from the top as links are made (only the latest unlinked app matters)."""
        with self._lock:
            owners = self._cache.owners
            if self._cache.unlinked_of is not listing:
                self._cache.unlinked_of = listing
                apps = listing.by_id.values()
                self._cache.unlinked = sorted(
                    (app.starttime, app.id) for app in apps if app.id not in owners
                )
            stack = self._cache.unlinked
            while stack and stack[-1][1] in owners:
                stack.pop()
            return bool(stack) and stack[-1][0] >= since

    def _app_of(
        self,
        driver_id: str,
        worker_id: str | None,
        since: float,
        listing: _Listing,
        *,
        ended: bool = False,
    ) -> tuple[_App | None, bool]:
        """The driver's application as the listing shows it (None if not registered, linked but
        no longer listed, or not linked), and whether an unlinked candidate app exists.

        The link comes from the driver's own log; only when that has no app id line does the
        name hint (an app carrying the run's tag, registered since the driver started and not
        linked to another driver) link it. A worker that cannot be read raises
        ClusterUnreachable for a live driver the hint cannot link (never a guess); for an
        ``ended`` driver it only leaves the driver unlinked."""
        with self._lock:
            entry = self._entry(driver_id)
            app_id = entry.app_id
        if app_id is not None:
            return listing.by_id.get(app_id), False
        if not self._unlinked_app_since(since, listing):
            return None, False
        failure: ClusterUnreachable | None = None
        try:
            self._read_for_link(driver_id, worker_id, listing, entry)
        except ClusterUnreachable as exc:
            failure = exc
        with self._lock:
            app_id, name = entry.app_id, entry.name
        if app_id is not None:
            return listing.by_id.get(app_id), False
        if name is not None:
            app = listing.app(name, since)
            with self._lock:
                if app is not None and self._cache.owners.get(app.id, driver_id) == driver_id:
                    self._link(driver_id, entry, app.id, "name")
                    return app, False
        if failure is not None and not ended:
            raise failure
        return None, True

    def _read_for_link(
        self, driver_id: str, worker_id: str | None, listing: _Listing, entry: _DriverLog
    ) -> None:
        """One attempt at reading a driver's app id from its logs (backing off after misses)."""
        now = time.monotonic()
        with self._lock:
            due = now >= entry.next_read_at and entry.stderr.offset < LINK_SCAN_LIMIT
        if not due or not self._read_log(driver_id, worker_id, listing, "stderr"):
            return
        with self._lock:
            # no app id line on stderr last time either (log4j hides INFO?): drover_runtime
            # prints its own line, which a standalone worker keeps in the driver's stdout
            read_stdout = entry.app_id is None and entry.misses > 0
        if read_stdout:
            self._read_log(driver_id, worker_id, listing, "stdout")
        with self._lock:
            if entry.app_id is None:
                entry.misses += 1
                first, most = LINK_RETRY_S
                entry.next_read_at = now + min(first * 2 ** (entry.misses - 1), most)

    # ----------------------------------------------------------------------- status

    def status(
        self, submission_id: str, app_name: str | None = None, app_id: str | None = None
    ) -> AppStatus:
        with self._lock:
            entry = self._entry(submission_id)
            if app_name and entry.name is None:
                # recorded from submit()/find()/status(): no log read needed for what is handed in
                entry.name = app_name
            if app_id and entry.app_id is None:
                self._link(submission_id, entry, app_id, "recorded")
            if entry.app_id is None:
                self._cache.unlinked_watched.add(submission_id)
        from_listing = False
        try:
            listing = self._listing(driver=submission_id)
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
            if state == "FAILED" and not message and status.state.is_terminal:
                status = self._with_failure_detail(status, submission_id, worker, listing)
            from_listing = (
                driver is not None and message is None and self._settled(submission_id, state)
            )
            if status.state.is_terminal:
                with self._lock:  # never linked now: no more link reads for it
                    self._cache.unlinked_watched.discard(submission_id)
            return status
        finally:
            # the change feed names this driver until its status follows from a listing alone
            self._changes.volatile(submission_id, not from_listing)

    def _settled(self, driver_id: str, state: str) -> bool:
        """Whether a listed driver's status follows from the listing alone: it waits for a
        worker, or it is linked to its application (else a log read may change it)."""
        if state in ("SUBMITTED", "RELAUNCHING"):
            return True
        if state in ("ERROR", "FAILED"):
            return False
        with self._lock:
            entry = self._cache.drivers.get(driver_id)
            return entry is not None and entry.app_id is not None

    def changes(self, since: Mark | None) -> Changes:
        """The drivers whose status may have changed since ``since`` (see
        ``scheduler/backends/changes.py``): those whose entry in the listing, or their linked
        application's, differs between the listing of the mark and the current one (fetched if
        the cached one is older than the TTL), those killed since, and those whose last status
        did not follow from the listing alone."""
        listing = self._listing()
        self._link_watched(listing)
        return self._changes.changes(since)

    def _link_watched(self, listing: _Listing) -> None:
        """Read the logs of the launched, unlinked drivers this instance watches in parallel
        (``IDENTIFY_THREADS``), where an application they may own has registered: thousands of
        jobs starting at once get their links in one parallel pass, not one read per status
        call in a row. Failures only leave a driver unlinked (its status says so)."""
        now = time.monotonic()
        with self._lock:
            watched = [
                (d, entry)
                for driver_id in self._cache.unlinked_watched
                if (d := listing.drivers.get(driver_id)) is not None
                and d.active
                and d.state == "RUNNING"
                and listing.workers.get(d.worker or "")
                and (entry := self._cache.drivers.get(driver_id)) is not None
                and entry.app_id is None
                and now >= entry.next_read_at
                and entry.stderr.offset < LINK_SCAN_LIMIT
            ]
        todo = [(d, e) for d, e in watched if self._unlinked_app_since(d.starttime, listing)]
        if len(todo) < 2:
            return  # status() reads a single one itself
        with self._lock:
            if self._link_pool is None:
                self._link_pool = ThreadPoolExecutor(
                    IDENTIFY_THREADS, thread_name_prefix="drover-link"
                )
            pool = self._link_pool
        futures = [pool.submit(self._read_for_link, d.id, d.worker, listing, e) for d, e in todo]
        for future in futures:
            try:
                future.result()
            except ClusterUnreachable as exc:
                log.debug("a link read failed: %s", exc)

    def _fingerprints(self, listing: _Listing) -> dict[str, tuple[object, ...]]:
        """What ``status`` derives from the listing, per driver (call with the lock held)."""
        drivers = self._cache.drivers
        by_id = listing.by_id
        prints: dict[str, tuple[object, ...]] = {}
        for driver in listing.drivers.values():
            entry = drivers.get(driver.id)
            app_id = entry.app_id if entry is not None else None
            app = by_id.get(app_id) if app_id is not None else None
            prints[driver.id] = (
                driver.state,
                driver.worker,
                driver.active,
                app_id,
                None if app is None else (app.state, app.active),
            )
        return prints

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
                response = self._worker_log(
                    address, driver_id, kind, byteLength=FAILURE_TAIL_BYTES
                )
            except ClusterUnreachable:
                return status  # the detail is a courtesy: a status never fails over it
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
        app, unlinked = self._app_of(driver_id, worker, since, listing, ended=state != "RUNNING")
        if state == "RUNNING":
            if app is None:
                if unlinked:
                    return AppStatus(
                        AppState.STARTING,
                        reason="driver launched, app not linked yet (no app id in the driver's "
                        "log, no app carrying the run's tag)",
                    )
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
        if app is not None and app.active:
            # the driver is gone but the master still lists its app: not over yet (a kill is
            # confirmed only once the application has left)
            return AppStatus(
                AppState.RUNNING if app.state == "RUNNING" else AppState.STARTING,
                app.id,
                reason=f"driver {state.lower()}, app {app.id} still registered",
            )
        app_id = app.id if app is not None else None
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
            self._cache.touched[submission_id] = time.monotonic()
        self._changes.touch([submission_id])
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

    def list_tagged(self) -> list[tuple[AppInfo, frozenset[str]]]:
        """The live drivers that carry a run's tag, for the stray sweep (``scheduler.loops.
        strays``), each with its fence tag (``spark.drover.fenceTag`` in its launch command: the
        head of its token's digest) as its only tag; a driver submitted before Drover passed it
        has none, and the sweep never touches it.

        One listing (the cached one if fresh) and, once per driver, the head of its launch
        command; ended drivers are not looked at, nor drivers not launched yet (no worker: they
        cannot be identified, and the next sweep sees them)."""
        listing = self._listing()
        self._identify_live_drivers(listing)
        found: list[tuple[AppInfo, frozenset[str]]] = []
        for driver in listing.drivers.values():
            if driver.mainclass not in ("", PYTHON_RUNNER) or not driver.active:
                continue
            if driver.state not in _ALIVE_DRIVER_STATES or not listing.workers.get(
                driver.worker or ""
            ):
                continue
            name = self._name_of(driver.id, driver.worker, listing)
            if name is None or parse_app_name(name) is None:
                continue
            status = self._driver_status(driver.id, driver.state, driver.worker, None, listing)
            if not status.state.is_alive:
                continue
            with self._lock:
                entry = self._entry(driver.id)
                fence, unread = entry.fence_tag, not entry.header_done
            if fence is None and unread:  # its tag was handed in: read its launch command once
                self._read_log(driver.id, driver.worker, listing, "stderr")
                with self._lock:
                    fence = entry.fence_tag
            tags = frozenset({fence_tag_of_digest(fence)} if fence else ())
            found.append((AppInfo(driver.id, name, status.state, status.app_id), tags))
        return found

    def find(self, app_name: str) -> Submission | None:
        """The live driver carrying the run's tag ``app_name`` (from a fresh /json/), with its
        linked app id when the app has registered.

        Raises ClusterUnreachable instead of answering None when the answer could be wrong: a
        live driver that cannot be identified yet (queued for a worker, launch command not
        readable), an ended driver of that tag whose app is still registered, or a live app
        named ``app_name`` whose driver is not among the identified ones.
        """
        listing = self._listing(max_age=0.0)
        self._identify_live_drivers(listing)
        unidentified = []
        for driver in listing.drivers.values():
            if driver.mainclass not in ("", PYTHON_RUNNER):
                continue
            if not driver.active or driver.state not in _ALIVE_DRIVER_STATES:
                with self._lock:
                    entry = self._cache.drivers.get(driver.id)
                    lingering = (
                        entry is not None
                        and entry.name == app_name
                        and entry.app_id is not None
                        and (app := listing.by_id.get(entry.app_id)) is not None
                        and app.active
                    )
                if lingering:
                    raise ClusterUnreachable(
                        f"{app_name}: driver {driver.id} ended but its app is still registered"
                    )
                continue
            name = self._name_of(driver.id, driver.worker, listing)
            if name == app_name:
                app, _ = self._app_of(driver.id, driver.worker, driver.starttime, listing)
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

    # ----------------------------------------------------------------------- driver log

    #: a standalone worker keeps a driver's stderr (the launch command, Spark's log) and its
    #: stdout (the Python application's output: PythonRunner merges Python's stderr into it)
    log_streams: tuple[str, ...] = ("stderr", "stdout")

    def driver_log(
        self, submission_id: str, stream: str, offset: int | None, limit: int
    ) -> LogChunk:
        """A byte range of a driver's stderr or stdout from the worker that runs (or ran) it
        (:class:`~scheduler.core.backend.DriverLogs`): the worker's ``/log/`` endpoint, which
        answers a range with its place in the whole (``==== Bytes <from>-<to> of <total>``).
        The worker comes from the master's listing, or, for a driver the master no longer
        lists (it keeps ``spark.deploy.retainedDrivers``), from the REST status."""
        if stream not in self.log_streams:
            raise InvalidInput(
                f"a standalone driver's log streams are stderr and stdout, not {stream!r}"
            )
        listing = self._listing()
        driver = listing.drivers.get(submission_id)
        worker_id = driver.worker if driver is not None else None
        if worker_id is None:
            answer = self._rest_status(submission_id)
            worker_id = answer.get("workerId") if answer is not None else None
        address = listing.workers.get(worker_id or "")
        if not address:
            raise NotFound(
                f"{submission_id} has no log on {self.master_url}: not launched on a worker, "
                "or its worker is gone"
            )
        what = f"reading the {stream} of {submission_id}"
        params: dict[str, Any] = {"driverId": submission_id, "logType": stream, "byteLength": limit}
        if offset is not None:
            params["offset"] = max(0, offset)
        response = self._request("GET", f"{address.rstrip('/')}/log/", what, params=params)
        with self._lock:
            self.log_reads += 1
        page = parse_log_page(response.content) if response.status_code == 200 else None
        if page is None:
            raise ClusterUnreachable(
                f"{what}: unexpected answer ({response.status_code}): {response.text[:200]!r}"
            )
        if page.total == 0 and page.data.startswith(b"Error:"):
            raise NotFound(f"the worker keeps no {stream} for {submission_id} (cleaned up?)")
        return LogChunk(stream, page.data, page.start, page.total)

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
        if ok:
            with self._lock:
                self._cache.failure = None  # it answers again: no failed fetch to reuse
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
        try:
            body = _master_head(response.text)
        except ValueError:
            return False, f"master {url}: unexpected answer {response.text[:100]!r}"
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
        if self._link_pool is not None:
            self._link_pool.shutdown(wait=False)
        self._http.close()
