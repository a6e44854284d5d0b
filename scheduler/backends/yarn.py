"""Spark on YARN in cluster deploy mode: ``spark-submit`` to submit, the ResourceManager's REST API
for everything else.

Submission: ``$SPARK_HOME/bin/spark-submit --master yarn --deploy-mode cluster`` with
``spark.yarn.submit.waitAppCompletion=false``: the client returns once YARN accepted the
application (``Submitted application application_...``, parsed from its output) and the driver runs
in the ApplicationMaster's container. One JVM per *submission* (7-13 s on the test machine: it
uploads the pipeline and Spark's configuration to the staging directory); Spark's jars come from
the cluster nodes' disks (``spark.yarn.jars=local:<spark home>/jars/*``, unless the job names a
``spark.yarn.jars`` or ``spark.yarn.archive`` of its own, e.g. an archive on HDFS), never uploaded
per submission. The client reads the cluster's ``HADOOP_CONF_DIR`` (``hadoop_conf_dir`` of the
cluster record). Everything the submission carries (conf, the driver's ``DROVER_*`` environment as
``spark.yarn.appMasterEnv.*``) goes in a properties file readable by this user only, removed
afterwards: the fencing token is never on a command line.

Identity: the submission id *is* YARN's application id. A run's identity travels as YARN
**application tags** (lower-case ASCII, at most 100 characters each; YARN lower-cases them):
``drover-run-<run id>``, ``drover-job-<16 hex of sha256(job name)>`` and
``drover-fence-<16 hex of sha256(fencing token)>``. :meth:`YarnBackend.find` asks the
ResourceManager for ``/ws/v1/cluster/apps?applicationTags=drover-run-<id>`` and keeps the live
applications whose job tag matches: a run whose submission was not recorded is found and adopted,
never submitted twice. The application's YARN *name* is Drover's ``drover:<job>:<run>``: in cluster
mode the client sets it before any pipeline code runs, so ``builder.appName(...)`` does not change
it, and it is how a listing reads the job back. The fence tag tells this deployment's applications
from another's that happens to use the same job names and run ids (only the holder of the run's
token can produce it): :mod:`scheduler.loops.strays` kills only applications whose fence tag is
the one of a closed run of its own store.

State of one application (``GET /ws/v1/cluster/apps/{id}``)::

    NEW, NEW_SAVING, SUBMITTED, ACCEPTED                  -> STARTING
    RUNNING with the ApplicationMaster only                -> STARTING ("driver up, no executor")
    RUNNING with the ApplicationMaster and an executor     -> RUNNING
    FINISHED, final status SUCCEEDED (or UNDEFINED)        -> FINISHED
    FINISHED, final status FAILED / KILLED                 -> FAILED / KILLED
    FAILED, KILLED                                         -> FAILED, KILLED
    404 (unknown to this ResourceManager), asked again
    after it said it was ACTIVE                            -> NOT_FOUND
    not ACTIVE (a restarted one recovering), no answer,
    5xx, garbled answer                                    -> ClusterUnreachable

A restarted ResourceManager serves its REST API a moment before it has recovered its
applications from its state store (it becomes ACTIVE once it has): meanwhile it answers 404 for
applications it is about to bring back and lists none. So a 404 and every listing count only from
a ResourceManager that said ACTIVE before; otherwise the answer is ClusterUnreachable (measured:
trusting the early 404 closed two live runs as LOST).

YARN's RUNNING means the ApplicationMaster registered, which Spark's does in cluster mode only
once the driver's SparkContext is up (the driver has checked in); an application that has it but
no executor yet is still starting, like a standalone application WAITING for cores. A FAILED
application's reason is YARN's diagnostics plus the last error line of the driver's output
(Python's traceback lands in the ApplicationMaster container's ``stdout``).

Kill: ``PUT /ws/v1/cluster/apps/{id}/state`` ``{"state": "KILLED"}`` (202; ``user.name`` set for
the ResourceManager's simple authentication); idempotent (an ended or unknown application is
nothing to kill). Confirmed only by :meth:`status`: KILLED, FINISHED or FAILED.

Probe: ``/ws/v1/cluster/info`` (``state`` STARTED, ``haState`` ACTIVE) and
``/ws/v1/cluster/metrics`` (at least one active NodeManager; lost and unhealthy NodeManagers and
free memory/vcores are reported, not judged).

After a ResourceManager restart with recovery on, the applications it knew come back, killed
ones included when the restart interrupted their kill: a run Drover is stopping keeps being
killed until the ResourceManager confirms it; an application of a run Drover has already closed
is killed again by :mod:`scheduler.loops.strays` (from :meth:`list_applications`).

Driver log: :meth:`read_driver_log` reads the ApplicationMaster container's ``stdout`` or
``stderr`` from its NodeManager's web service (``/ws/v1/node/containers/{id}/logs/{file}``).

Measured on the test clusters (``docs/yarn.md``): the client returns in 7-13 s, the application
is RUNNING ~26 s after the submission started, a kill is KILLED 0.3 s after the PUT.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from scheduler.backends import http
from scheduler.backends.driverlog import log4j2_properties
from scheduler.core.backend import (
    AppInfo,
    AppState,
    AppStatus,
    ProbeResult,
    Submission,
    SubmitRequest,
    fence_tag_of_digest,
    parse_app_name,
)
from scheduler.core.errors import ClusterError, ClusterUnreachable, SubmissionRejected
from scheduler.core.ledger import fencing_digest
from scheduler.decisions.submission import OWNED_PROPERTIES

__all__ = [
    "DriverLog",
    "YarnBackend",
    "fence_tag",
    "job_tag",
    "run_tag",
    "yarn_tags",
]

log = logging.getLogger(__name__)

TAG_PREFIX = "drover-"
#: the longest tag YARN accepts
MAX_TAG_LENGTH = 100
#: resources of one small streaming job on YARN (a job's conf overrides them): two containers of
#: 768 MB (512 MB heap + 256 MB overhead), so a test NodeManager of 8 GB holds five applications
DEFAULT_RESOURCE_CONF: Mapping[str, str] = {
    "spark.driver.memory": "512m",
    "spark.driver.cores": "1",
    "spark.driver.memoryOverhead": "256m",
    "spark.executor.memory": "512m",
    "spark.executor.cores": "1",
    "spark.executor.memoryOverhead": "256m",
    "spark.executor.instances": "1",
}
#: how long one spark-submit may take before its outcome counts as unknown
DEFAULT_SUBMIT_TIMEOUT_S = 300.0
#: YARN application states of an application that is alive
LIVE_STATES = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING")
#: how much of the end of a failed driver's output is read for the failure's reason
FAILURE_TAIL_BYTES = 8 << 10

# Spark properties the backend owns: a job's conf cannot override them.
_OWNED_CONF = frozenset(
    {
        "spark.master",
        "spark.app.name",
        "spark.submit.deployMode",
        "spark.submit.pyFiles",
        "spark.yarn.tags",
        "spark.yarn.submit.waitAppCompletion",
        "spark.yarn.maxAppAttempts",
        *OWNED_PROPERTIES,
    }
)
_APP_ID = re.compile(r"^application_\d+_\d+$")
_SUBMITTED = re.compile(r"Submitted application (application_\d+_\d+)")
_PY_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b(?::.*)?$")
_PR_SET_PDEATHSIG = 1

#: spark-submit's own log configuration: warnings, plus the lines naming the application
SUBMIT_LOG4J2_PROPERTIES = log4j2_properties(
    "Written by Drover's YARN backend: the submission's output keeps the application id.",
    [
        ("yarnclient", "org.apache.hadoop.yarn.client.api.impl.YarnClientImpl", "info"),
        ("client", "org.apache.spark.deploy.yarn.Client", "info"),
    ],
)


def _hash16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def run_tag(run_id: int) -> str:
    return f"{TAG_PREFIX}run-{run_id}"


def job_tag(job_name: str) -> str:
    return f"{TAG_PREFIX}job-{_hash16(job_name)}"


def fence_tag(fencing_token: str) -> str:
    """The tag a run's application carries for its token (a hash: the token stays secret)."""
    return fence_tag_of_digest(fencing_digest(fencing_token))


def yarn_tags(job_name: str, run_id: int, fencing_token: str) -> list[str]:
    """The YARN application tags of one run (lower-case ASCII, each within YARN's limit)."""
    tags = [run_tag(run_id), job_tag(job_name), fence_tag(fencing_token)]
    assert all(len(t) <= MAX_TAG_LENGTH and t.isascii() and t == t.lower() for t in tags)
    return tags


def _tags_of(app: Mapping[str, Any]) -> set[str]:
    return {t.strip() for t in str(app.get("applicationTags") or "").split(",") if t.strip()}


def _set_pdeathsig() -> None:  # pragma: no cover - runs in the child between fork and exec
    """The submission dies with the thread that waits for it: a node killed mid-submission
    leaves no client behind that could still submit once another node took the run over."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass(frozen=True)
class DriverLog:
    """A piece of a driver's log file (the ApplicationMaster container's ``stdout``/``stderr``)."""

    submission_id: str
    file: str
    text: str
    #: where the driver's container runs (the NodeManager's web address)
    node: str


class YarnBackend:
    """:class:`~scheduler.core.backend.ClusterBackend` for one YARN cluster.

    Thread-safe. Every call but :meth:`submit` is one or two short HTTP requests to the
    ResourceManager (``timeout_s`` each); :meth:`submit` runs a ``spark-submit`` client.
    """

    def __init__(
        self,
        rm_url: str,
        hadoop_conf_dir: str | Path,
        *,
        spark_home: Path,
        python: str = sys.executable,
        base_conf: Mapping[str, str] | None = None,
        queue_of: Callable[[str], str | None] | None = None,
        user: str | None = None,
        env_passthrough: Sequence[str] = ("PATH", "JAVA_HOME", "LANG", "LC_ALL", "TZ", "HOME"),
        work_dir: Path | None = None,
        timeout_s: float = 3.0,
        submit_timeout_s: float = DEFAULT_SUBMIT_TIMEOUT_S,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not rm_url:
            raise ClusterError("a YARN cluster needs its ResourceManager's web URL")
        self.rm_url = rm_url.rstrip("/")
        self.hadoop_conf_dir = Path(hadoop_conf_dir)
        self.spark_home = Path(spark_home)
        self.python = python
        self.base_conf: dict[str, str] = {**DEFAULT_RESOURCE_CONF, **(base_conf or {})}
        #: the YARN queue of a business (None: the cluster's default, or the job's own)
        self.queue_of = queue_of
        self.user = user or _current_user()
        self.env_passthrough = tuple(env_passthrough)
        self.work_dir = work_dir
        self.submit_timeout_s = submit_timeout_s
        self._http = http.client(timeout_s, transport)
        self._lock = threading.Lock()
        #: tags of the runs this instance is submitting right now (find() cannot tell for them)
        self._in_flight: set[str] = set()
        #: spark-submit clients started (for tests and benches)
        self.submissions = 0

    # ----------------------------------------------------------------------- HTTP

    def _request(self, method: str, path: str, what: str, **kwargs: Any) -> httpx.Response:
        url = path if path.startswith("http") else f"{self.rm_url}{path}"
        return http.request(self._http, method, url, what, **kwargs)

    @staticmethod
    def _json(response: httpx.Response, what: str) -> dict[str, Any]:
        return http.json_object(response, what)

    def _apps(self, what: str, **params: str) -> list[dict[str, Any]]:
        """``GET /ws/v1/cluster/apps`` with ``params``: the applications, never a guess. Only
        from a ResourceManager that was ACTIVE before the listing: a restarted one serves its
        REST API before it has recovered its applications, and lists none of them meanwhile."""
        self._info(what)
        response = self._request("GET", "/ws/v1/cluster/apps", what, params=params)
        if response.status_code != 200:
            raise ClusterUnreachable(f"{what}: the ResourceManager answered {response.status_code}")
        body = self._json(response, what)
        apps = body.get("apps")
        if apps is None:  # an empty result is {"apps": null}
            return []
        if not isinstance(apps, dict) or not isinstance(apps.get("app", []), list):
            raise ClusterUnreachable(f"{what}: unexpected answer {body!r:.200}")
        return [a for a in apps.get("app", []) if isinstance(a, dict)]

    def _app(self, app_id: str, what: str) -> dict[str, Any] | None:
        """One application (None: the ResourceManager does not know it). A 404 counts only
        when asked again of a ResourceManager that was ACTIVE before (see :meth:`_apps`)."""
        response = self._request("GET", f"/ws/v1/cluster/apps/{app_id}", what)
        if response.status_code == 404:
            self._info(what)  # ClusterUnreachable while it is not ACTIVE (still recovering)
            response = self._request("GET", f"/ws/v1/cluster/apps/{app_id}", what)
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise ClusterUnreachable(f"{what}: the ResourceManager answered {response.status_code}")
        app = self._json(response, what).get("app")
        if not isinstance(app, dict):
            raise ClusterUnreachable(f"{what}: unexpected answer {app!r:.200}")
        return app

    # ----------------------------------------------------------------------- submit

    def properties(self, request: SubmitRequest) -> dict[str, str]:
        """The Spark properties of one run's submission (public for tests and benches)."""
        conf = dict(self.base_conf)
        conf.update({k: v for k, v in request.conf.items() if k not in _OWNED_CONF})
        if "spark.yarn.jars" not in conf and "spark.yarn.archive" not in conf:
            conf["spark.yarn.jars"] = f"local:{self.spark_home}/jars/*"
        conf.setdefault("spark.pyspark.python", self.python)
        queue = self.queue_of(request.business) if self.queue_of and request.business else None
        if queue:
            conf["spark.yarn.queue"] = queue
        conf.update(request.drover_properties())  # a job's conf never overrides these
        conf.update(
            {
                "spark.app.name": request.app_name,
                "spark.yarn.tags": ",".join(
                    yarn_tags(request.job_name, request.run_id, request.fencing_token)
                ),
                "spark.yarn.submit.waitAppCompletion": "false",
                "spark.yarn.maxAppAttempts": "1",  # Drover's restart policy owns restarts
            }
        )
        # the driver's environment: the job's own variables, then the run's identity
        for key, value in {**request.env, **request.drover_environment()}.items():
            conf[f"spark.yarn.appMasterEnv.{key}"] = value
        return conf

    def submit(self, request: SubmitRequest) -> Submission:
        if not Path(request.entrypoint).is_file() and "://" not in request.entrypoint:
            raise SubmissionRejected(f"entrypoint {request.entrypoint!r} is not a file")
        tag = request.app_name
        self._info("checking the ResourceManager before submitting")  # unreachable: raises
        existing = self.find(tag)
        if existing is not None:  # submitted before (a retry after an unknown outcome)
            log.info("%s already runs as %s: adopted", tag, existing.submission_id)
            return existing
        with self._lock:
            if tag in self._in_flight:
                raise ClusterUnreachable(f"{tag} is being submitted already")
            self._in_flight.add(tag)
        try:
            return self._submit(request)
        finally:
            with self._lock:
                self._in_flight.discard(tag)

    def _submit(self, request: SubmitRequest) -> Submission:
        spark_submit = self.spark_home / "bin" / "spark-submit"
        if not os.access(spark_submit, os.X_OK):
            raise ClusterUnreachable(f"{spark_submit} is missing or not executable")
        with tempfile.TemporaryDirectory(prefix="drover-yarn-", dir=self._work_dir()) as tmp:
            props = Path(tmp) / "submission.properties"
            fd = os.open(props, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                for key, value in self.properties(request).items():
                    fh.write(f"{_escape(key)}={_escape(value)}\n")
            log4j = Path(tmp) / "log4j2.properties"
            log4j.write_text(SUBMIT_LOG4J2_PROPERTIES, encoding="utf-8")
            command = [
                str(spark_submit),
                "--master",
                "yarn",
                "--deploy-mode",
                "cluster",
                "--name",
                request.app_name,
                "--properties-file",
                str(props),
                "--load-spark-defaults",
            ]
            if request.py_files:
                command += ["--py-files", ",".join(request.py_files)]
            command.append(request.entrypoint)
            command.extend(request.args)
            started = time.monotonic()
            with self._lock:
                self.submissions += 1
            try:
                done = subprocess.run(
                    command,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    cwd=tmp,
                    env=self._environment(log4j),
                    timeout=self.submit_timeout_s,
                    preexec_fn=_set_pdeathsig,  # noqa: PLW1509 - no threads run in the child
                    start_new_session=True,
                    check=False,
                )
            except subprocess.TimeoutExpired as exc:
                raise ClusterUnreachable(
                    f"{request.app_name}: spark-submit did not return within "
                    f"{self.submit_timeout_s:g}s; the application is looked up by its tag"
                ) from exc
            except OSError as exc:
                raise ClusterUnreachable(f"cannot start spark-submit: {exc}") from exc
        output = (done.stdout + done.stderr).decode("utf-8", errors="replace")
        match = _SUBMITTED.search(output)
        seconds = time.monotonic() - started
        if match is not None:
            app_id = match.group(1)
            log.info("submitted %s as %s in %.1fs", request.app_name, app_id, seconds)
            return Submission(app_id, app_id)
        # the client may have died after YARN accepted the application
        found = self._find(request.job_name, request.run_id, request.app_name)
        if found is not None:
            return found
        reason = _last_error(output) or f"spark-submit exited with code {done.returncode}"
        if done.returncode == 0 or not self.probe().ok:
            raise ClusterUnreachable(f"{request.app_name}: no application submitted: {reason}")
        raise SubmissionRejected(f"YARN refused {request.app_name}: {reason}")

    def _work_dir(self) -> str | None:
        if self.work_dir is None:
            return None
        self.work_dir.mkdir(parents=True, exist_ok=True)
        return str(self.work_dir)

    def _environment(self, log4j: Path) -> dict[str, str]:
        """spark-submit's environment: the passthrough variables of the node's (never the rest:
        its settings are secrets), the cluster's Hadoop configuration and Spark's home."""
        env = {k: os.environ[k] for k in self.env_passthrough if k in os.environ}
        opts = env.get("SPARK_SUBMIT_OPTS", os.environ.get("SPARK_SUBMIT_OPTS", ""))
        env.update(
            {
                "HADOOP_CONF_DIR": str(self.hadoop_conf_dir),
                "YARN_CONF_DIR": str(self.hadoop_conf_dir),
                "SPARK_HOME": str(self.spark_home),
                "PYSPARK_ARCHIVES_PATH": self._pyspark_archives(),
                "SPARK_SUBMIT_OPTS": f"{opts} -Dlog4j2.configurationFile=file:{log4j}".strip(),
                "HADOOP_USER_NAME": self.user,
            }
        )
        return env

    def _pyspark_archives(self) -> str:
        """Where the containers' Python finds PySpark, from the nodes' disks (``local:``): a
        Spark distribution's ``python/lib`` zips, or the directory the pyspark package of a pip
        installation lives in (no upload per submission either way)."""
        lib = self.spark_home / "python" / "lib"
        zips = sorted(lib.glob("*.zip")) if lib.is_dir() else []
        if zips:
            return ",".join(f"local:{z}" for z in zips)
        return f"local:{self.spark_home.parent}"

    # ----------------------------------------------------------------------- status

    def status(
        self, submission_id: str, app_name: str | None = None, app_id: str | None = None
    ) -> AppStatus:
        if not _APP_ID.match(submission_id):
            return AppStatus(AppState.NOT_FOUND, reason="not a YARN application id")
        app = self._app(submission_id, f"status of {submission_id}")
        if app is None:
            return AppStatus(AppState.NOT_FOUND, reason="unknown to the ResourceManager")
        status = _app_status(app)
        if status.state is AppState.FAILED:
            status = self._with_failure_detail(status, app)
        return status

    def _with_failure_detail(self, status: AppStatus, app: Mapping[str, Any]) -> AppStatus:
        """``status`` with the last error line of the driver's output (best effort)."""
        line = None
        for kind in ("stdout", "stderr"):
            try:
                page = self._container_log(app, kind, FAILURE_TAIL_BYTES)
            except ClusterUnreachable:
                return status  # the detail is a courtesy: a status never fails over it
            if page is not None and (line := _last_error(page.text)):
                break
        if not line:
            return status
        return AppStatus(status.state, status.app_id, f"{status.reason}; last output: {line}")

    # ----------------------------------------------------------------------- kill

    def kill(self, submission_id: str) -> None:
        if not _APP_ID.match(submission_id):
            return
        what = f"killing {submission_id}"
        response = self._request(
            "PUT",
            f"/ws/v1/cluster/apps/{submission_id}/state",
            what,
            params={"user.name": self.user},
            json={"state": "KILLED"},
        )
        if response.status_code in (200, 202):
            return
        if response.status_code == 404:
            log.info("%s: unknown to the ResourceManager, nothing to kill", what)
            return
        raise ClusterUnreachable(
            f"{what}: the ResourceManager answered {response.status_code}: {response.text[:200]}"
        )

    # ----------------------------------------------------------------------- listing / find

    def list_applications(self) -> list[AppInfo]:
        """Every live application carrying a Drover run tag, with its run's tag as the name."""
        return [info for info, _ in self.list_tagged()]

    def list_tagged(self) -> list[tuple[AppInfo, frozenset[str]]]:
        """:meth:`list_applications` with each application's YARN tags (its fence tag too). An
        application tagged by Drover whose name and tags disagree is listed with an empty name
        (not identified)."""
        apps = self._apps("listing applications", states=",".join(LIVE_STATES))
        listed = []
        for app in apps:
            tags = _tags_of(app)
            if not any(t.startswith(f"{TAG_PREFIX}run-") for t in tags):
                continue
            name = str(app.get("name", ""))
            parsed = parse_app_name(name)
            if parsed is None or {run_tag(parsed[1]), job_tag(parsed[0])} - tags:
                name = ""
            app_id = str(app["id"])
            listed.append((AppInfo(app_id, name, _app_status(app).state, app_id), frozenset(tags)))
        return listed

    def find(self, app_name: str) -> Submission | None:
        """The live application of the run tagged ``app_name`` (by its YARN tags, whatever the
        pipeline calls itself). ClusterUnreachable when this instance is submitting that run
        right now, or when the ResourceManager cannot be asked."""
        parsed = parse_app_name(app_name)
        if parsed is None:
            return None
        job, run_id = parsed
        with self._lock:
            if app_name in self._in_flight:
                raise ClusterUnreachable(f"{app_name} is being submitted right now")
        return self._find(job, run_id, app_name)

    def _find(self, job: str, run_id: int, app_name: str) -> Submission | None:
        apps = self._apps(
            f"looking up {app_name}",
            applicationTags=run_tag(run_id),
            states=",".join(LIVE_STATES),
        )
        mine = [a for a in apps if job_tag(job) in _tags_of(a)]
        if not mine:
            return None
        mine.sort(key=lambda a: int(a.get("startedTime") or 0))
        if len(mine) > 1:
            log.error(
                "%s: %d live applications carry its tags: %s",
                app_name,
                len(mine),
                ", ".join(str(a["id"]) for a in mine),
            )
        app_id = str(mine[0]["id"])
        return Submission(app_id, app_id)

    # ----------------------------------------------------------------------- probe

    def _info(self, what: str) -> dict[str, Any]:
        response = self._request("GET", "/ws/v1/cluster/info", what)
        info = self._json(response, what).get("clusterInfo")
        if response.status_code != 200 or not isinstance(info, dict):
            raise ClusterUnreachable(f"{what}: the ResourceManager answered {response.status_code}")
        if info.get("state") != "STARTED" or info.get("haState") != "ACTIVE":
            raise ClusterUnreachable(
                f"{what}: ResourceManager {info.get('state')}, HA state {info.get('haState')}"
            )
        return info

    def probe(self) -> ProbeResult:
        """The ResourceManager is STARTED and ACTIVE and has an active NodeManager. Lost and
        unhealthy NodeManagers and free memory and vcores are reported, not judged."""
        started = time.monotonic()
        try:
            ok, detail = self._probe()
        except ClusterUnreachable as exc:
            ok, detail = False, str(exc)
        except Exception as exc:  # noqa: BLE001 - a probe never raises
            ok, detail = False, f"probe failed: {exc!r}"
        return ProbeResult(ok=ok, detail=detail, latency_s=time.monotonic() - started)

    def _probe(self) -> tuple[bool, str]:
        self._info("probe")
        what = "probe (metrics)"
        response = self._request("GET", "/ws/v1/cluster/metrics", what)
        metrics = self._json(response, what).get("clusterMetrics")
        if response.status_code != 200 or not isinstance(metrics, dict):
            return False, f"{what}: the ResourceManager answered {response.status_code}"

        def n(key: str) -> int:
            try:
                return int(metrics.get(key) or 0)
            except (TypeError, ValueError):
                return 0

        summary = (
            f"ResourceManager ACTIVE, {n('activeNodes')} NodeManagers active, "
            f"{n('lostNodes')} lost, {n('unhealthyNodes')} unhealthy; "
            f"{n('availableMB')} MB and {n('availableVirtualCores')} vcores free"
        )
        if n("activeNodes") < 1:
            return False, f"no active NodeManager: {summary}"
        return True, summary

    # ----------------------------------------------------------------------- driver log

    def read_driver_log(
        self, submission_id: str, file: str = "stderr", tail_bytes: int = 64 << 10
    ) -> DriverLog | None:
        """The last ``tail_bytes`` of the driver's ``stdout`` or ``stderr`` (the
        ApplicationMaster's container), from its NodeManager; None when the application or its
        container is unknown (an application not launched yet, or forgotten)."""
        if file not in ("stdout", "stderr") or not _APP_ID.match(submission_id):
            return None
        app = self._app(submission_id, f"driver log of {submission_id}")
        if app is None:
            return None
        return self._container_log(app, file, tail_bytes)

    def _container_log(
        self, app: Mapping[str, Any], file: str, tail_bytes: int
    ) -> DriverLog | None:
        node = str(app.get("amHostHttpAddress") or "")
        logs = str(app.get("amContainerLogs") or "")
        container = logs.rstrip("/").split("/")[-2] if logs.count("/") >= 2 else ""
        if not node or not container.startswith("container_"):
            return None
        url = f"http://{node}/ws/v1/node/containers/{container}/logs/{file}"
        response = self._request(
            "GET", url, f"log {file} of {container}", params={"size": str(-tail_bytes)}
        )
        if response.status_code != 200:
            return None
        return DriverLog(str(app.get("id")), file, response.text, node)

    # ----------------------------------------------------------------------- lifecycle

    def close(self) -> None:
        self._http.close()


def _current_user() -> str:
    try:
        import getpass

        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry: YARN's default user
        return "dr.who"


def _app_status(app: Mapping[str, Any]) -> AppStatus:
    """What one application's REST record means (see the module docstring)."""
    app_id = str(app.get("id") or "") or None
    state = str(app.get("state", ""))
    final = str(app.get("finalStatus", ""))
    diagnostics = str(app.get("diagnostics") or "").strip()
    if state in ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED"):
        return AppStatus(AppState.STARTING, app_id, reason=f"YARN {state.lower()}")
    if state == "RUNNING":
        try:
            containers = int(app.get("runningContainers") or 0)
        except (TypeError, ValueError):
            containers = 0
        if containers < 2:
            return AppStatus(AppState.STARTING, app_id, reason="driver up, no executor yet")
        return AppStatus(AppState.RUNNING, app_id)
    if state == "KILLED" or (state == "FINISHED" and final == "KILLED"):
        return AppStatus(AppState.KILLED, app_id, reason=diagnostics or "killed")
    if state == "FAILED" or (state == "FINISHED" and final == "FAILED"):
        return AppStatus(AppState.FAILED, app_id, reason=diagnostics or "failed")
    if state == "FINISHED":
        return AppStatus(AppState.FINISHED, app_id, exit_code=0)
    raise ClusterUnreachable(f"{app_id}: unexpected YARN application state {state!r}")


def _last_error(text: str) -> str | None:
    """The last line of ``text`` that looks like the cause of a failure."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if _PY_EXCEPTION_LINE.match(line.strip()):
            return line.strip()[:300]
    for line in reversed(lines):
        if " ERROR " in line or line.startswith("Exception in thread") or "Exception:" in line:
            return line.strip()[:300]
    return None


def _escape(text: str) -> str:
    """A key or value for a Java properties file."""
    out = []
    for ch in text:
        if ch in "\\=:#!":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif not ch.isascii() or not ch.isprintable():
            out.append(f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else _surrogates(ch))
        else:
            out.append(ch)
    escaped = "".join(out)
    if escaped.startswith(" "):
        escaped = "\\" + escaped
    return escaped


def _surrogates(ch: str) -> str:
    code = ord(ch) - 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
