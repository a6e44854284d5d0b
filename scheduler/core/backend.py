"""The cluster-backend interface: submit, status, kill, list applications, find, probe.

Every backend (local spark-submit, spark-submit to any master, Spark standalone REST -- which
also drives the simulated cluster of ``harness/simcluster.py`` --, Spark on YARN through the
ResourceManager's REST API) implements :class:`ClusterBackend`.
Calls are synchronous and may block on I/O: callers run them off the event loop. A backend never
guesses: when it cannot tell the state of an application it raises
:class:`~scheduler.core.errors.ClusterUnreachable`.

A run's application is known by three handles:
- ``submission_id``: the backend's handle for a submission (driver id, process session, ...);
- the run's *tag*, ``app_name`` = ``drover:<job>:<run_id>`` (see :func:`app_name_for`), which
  every submission carries in what Drover itself hands the cluster (the driver's launch command,
  its environment, the backend's run records), so that an owner can find and adopt an
  application after a crash between "submitted" and "recorded" instead of submitting a second
  one (re-attach before resubmitting: a crash between submitting and recording must not make
  a second application). Drover also submits it as ``spark.app.name``, but that is only a default:
  a pipeline that calls ``SparkSession.builder.appName("...")`` registers under its own name, so
  no backend may rely on the name an application registered with (it is at most a hint);
- ``app_id``: Spark's application id, which a backend *links* to the submission from what the
  driver itself reports (its log; see ``driverlog.py``), whatever the application is called.

Callers record ``submission_id`` and ``app_id`` with the run and hand them back to
:meth:`ClusterBackend.status`, so a node that takes over a run (a new backend instance) needs to
learn nothing again from the cluster.

A backend that can read a run's driver log also implements :class:`DriverLogs` (a byte range of
one of the driver's log streams: what ``GET /v1/jobs/{name}/runs/{attempt}/log`` serves). It is a
contract of its own, so a backend that cannot (yet) read logs is still a complete
:class:`ClusterBackend`; the API says so (404) when asked.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

APP_NAME_PREFIX = "drover"


def app_name_for(job_name: str, run_id: int) -> str:
    """The tag of one run (also its default Spark application name): job name and run id."""
    return f"{APP_NAME_PREFIX}:{job_name}:{run_id}"


#: how a run's fence tag begins (``scheduler.backends.yarn.fence_tag``)
FENCE_TAG_PREFIX = f"{APP_NAME_PREFIX}-fence-"


def fence_head(digest: str) -> str:
    """The part of a run's token digest (the SHA-256 the store keeps) that its applications
    carry: the first 16 hex digits. It names the token, never reveals it."""
    return digest[:16]


def fence_tag_of_digest(digest: str) -> str:
    """The fence tag an application of a run carries (a YARN tag; a standalone driver carries
    its :func:`fence_head` in ``spark.drover.fenceTag``), from the run's token digest."""
    return f"{FENCE_TAG_PREFIX}{fence_head(digest)}"


def parse_app_name(tag: str) -> tuple[str, int] | None:
    """(job name, run id) of a run's tag, or None if ``tag`` is not one."""
    prefix, sep, rest = tag.partition(":")
    job, sep2, run_id = rest.rpartition(":")
    if prefix != APP_NAME_PREFIX or not sep or not sep2 or not job or not run_id.isdigit():
        return None
    return job, int(run_id)


class AppState(enum.StrEnum):
    """What a cluster says about one submitted application."""

    #: accepted by the cluster, the application has not registered yet
    STARTING = "STARTING"
    #: the application itself runs (not just a launched driver)
    RUNNING = "RUNNING"
    #: ended with success (exit code 0)
    FINISHED = "FINISHED"
    #: ended with an error
    FAILED = "FAILED"
    #: ended because it was killed
    KILLED = "KILLED"
    #: the cluster has no such application (never existed, or forgotten)
    NOT_FOUND = "NOT_FOUND"

    @property
    def is_terminal(self) -> bool:
        return self in (AppState.FINISHED, AppState.FAILED, AppState.KILLED, AppState.NOT_FOUND)

    @property
    def is_alive(self) -> bool:
        return self in (AppState.STARTING, AppState.RUNNING)


@dataclass(frozen=True)
class SubmitRequest:
    """Everything a backend needs to start one run of a job."""

    job_name: str
    run_id: int
    fencing_token: str
    #: path of the pipeline file (``file://`` already stripped)
    entrypoint: str
    args: Sequence[str] = ()
    #: Spark properties; the backend adds its own (master, app name, drover.* keys)
    conf: Mapping[str, str] = field(default_factory=dict)
    #: extra environment for the driver
    env: Mapping[str, str] = field(default_factory=dict)
    checkpoint_location: str = ""
    #: extra Python files shipped with the driver (``--py-files``; e.g. ``drover_runtime.py``)
    py_files: Sequence[str] = ()
    #: Drover API base URLs the pipeline asks for its fencing check
    #: (Spark property ``spark.drover.fenceUrls`` and env ``DROVER_FENCE_URLS``, comma separated)
    fence_urls: Sequence[str] = ()
    #: the job's team (a backend that runs drivers on the node's host runs them as its user)
    team: str = ""
    #: the job's business (a YARN backend submits to the business's queue)
    business: str = ""

    @property
    def app_name(self) -> str:
        return app_name_for(self.job_name, self.run_id)

    def drover_properties(self) -> dict[str, str]:
        """The ``spark.drover.*`` Spark properties every backend passes to the pipeline.

        Not the fencing token: Spark properties end up on the driver's command line (``ps``),
        in the Spark UI and in event logs. The token travels in the driver's environment only
        (``DROVER_FENCING_TOKEN``, see :meth:`drover_environment`).
        """
        return {
            "spark.drover.job": self.job_name,
            "spark.drover.runId": str(self.run_id),
            "spark.drover.checkpointLocation": self.checkpoint_location,
            "spark.drover.fenceUrls": ",".join(self.fence_urls),
        }

    def drover_environment(self) -> dict[str, str]:
        """The ``DROVER_*`` environment variables every backend gives the driver."""
        return {
            "DROVER_JOB": self.job_name,
            "DROVER_RUN_ID": str(self.run_id),
            "DROVER_FENCING_TOKEN": self.fencing_token,
            "DROVER_CHECKPOINT_LOCATION": self.checkpoint_location,
            "DROVER_FENCE_URLS": ",".join(self.fence_urls),
            "DROVER_APP_NAME": self.app_name,
        }


@dataclass(frozen=True)
class Submission:
    """The backend's handle for a submitted application."""

    submission_id: str
    app_id: str | None = None


@dataclass(frozen=True)
class AppStatus:
    state: AppState
    app_id: str | None = None
    #: human-readable cause for terminal states ("exit code 1", "killed", ...)
    reason: str | None = None
    exit_code: int | None = None


@dataclass(frozen=True)
class AppInfo:
    """One application a cluster knows about (for listing and adoption)."""

    submission_id: str
    #: the run's tag (``drover:<job>:<run_id>``), empty for a driver not identified yet
    app_name: str
    state: AppState
    app_id: str | None = None

    @property
    def job(self) -> str | None:
        """The job the tag names, or None (not a Drover tag)."""
        parsed = parse_app_name(self.app_name)
        return parsed[0] if parsed is not None else None


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    detail: str
    latency_s: float


@runtime_checkable
class ClusterBackend(Protocol):
    """One Spark cluster, as Drover drives it."""

    def submit(self, request: SubmitRequest) -> Submission:
        """Start one application. Raises SubmissionRejected or ClusterUnreachable."""
        ...

    def status(
        self, submission_id: str, app_name: str | None = None, app_id: str | None = None
    ) -> AppStatus:
        """The current state of a submitted application (NOT_FOUND if the cluster forgot it).

        ``app_name`` (the run's tag) and ``app_id``: what the caller recorded with this
        submission id, from :meth:`submit`, :meth:`find` or an earlier :meth:`status`. A backend
        that would otherwise have to learn them from the cluster may trust them. The returned
        ``app_id`` is the linked application's, never one found by its registered name alone
        when the driver itself can tell.
        """
        ...

    def kill(self, submission_id: str) -> None:
        """Ask the cluster to stop the application. Idempotent; confirmation comes from status()
        (terminal only once the application itself is gone)."""
        ...

    def list_applications(self) -> list[AppInfo]:
        """Every Drover application the cluster currently knows about, with its run's tag.

        No loop of the node calls it (a tick asks about its own runs with :meth:`status` and
        :meth:`find`); it is how the no-double-run checks see a whole cluster (the end-to-end
        tests, ``bench/failover.py``'s leftover sweep), and what a check after a cluster
        manager's own recovery (a YARN ResourceManager restart) would list."""
        ...

    def find(self, app_name: str) -> Submission | None:
        """The live application of the run tagged ``app_name``, if any (used to adopt before
        resubmitting): None only when the backend is sure there is none; ClusterUnreachable
        when it cannot tell. Found by the tag Drover submitted, never by the name the
        application registered with."""
        ...

    def probe(self) -> ProbeResult:
        """A cheap health check of the cluster; never raises."""
        ...


#: the log streams a driver may have: its stdout and stderr (a Spark standalone worker, a YARN
#: container keep them apart), or both in one file (``combined``: a local spark-submit's log)
LOG_STREAMS = ("stdout", "stderr", "combined")


@dataclass(frozen=True)
class LogChunk:
    """A byte range of one of a driver's log streams, as read now."""

    #: which stream (one of :data:`LOG_STREAMS`)
    stream: str
    #: the bytes from ``start`` on (may end inside a line, or inside a UTF-8 character)
    data: bytes
    #: the offset of ``data``'s first byte in the stream
    start: int
    #: the stream's length when it was read (it may grow while the driver runs)
    size: int

    @property
    def end(self) -> int:
        """Where the next read of the stream goes on from."""
        return self.start + len(self.data)


@runtime_checkable
class DriverLogs(Protocol):
    """Reading a run's driver log (see the module docstring)."""

    #: the streams this backend's drivers have, the one read by default first
    log_streams: tuple[str, ...]

    def driver_log(
        self, submission_id: str, stream: str, offset: int | None, limit: int
    ) -> LogChunk:
        """At most ``limit`` bytes of the driver's ``stream`` from ``offset`` (None: the last
        ``limit`` bytes; past the end: none). An ended driver's log can still be read as long
        as the cluster keeps it. Raises NotFound when the cluster has no log for the submission
        (never launched, cleaned up, an unknown id), InvalidInput for a stream it does not keep,
        ClusterUnreachable when it cannot be asked."""
        ...


def logs_of(backend: object) -> DriverLogs | None:
    """``backend`` as a :class:`DriverLogs`, or None when it cannot read driver logs."""
    return backend if isinstance(backend, DriverLogs) else None


def log_window(size: int, offset: int | None, limit: int) -> tuple[int, int]:
    """The byte range ``[start, end)`` of a stream of ``size`` bytes that a read of ``limit``
    bytes from ``offset`` covers (None: its last ``limit`` bytes), clamped to the stream."""
    start = max(0, size - limit) if offset is None else min(max(0, offset), size)
    return start, min(size, start + max(0, limit))
