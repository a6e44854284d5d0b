"""The cluster-backend interface (DESIGN §4): submit, status, kill, list applications, probe.

Every backend (local spark-submit, spark-submit to any master, Spark standalone REST -- which
also drives the simulated cluster of ``harness/simcluster.py``) implements :class:`ClusterBackend`.
Calls are synchronous and may block on I/O: callers run them off the event loop. A backend never
guesses: when it cannot tell the state of an application it raises
:class:`~scheduler.errors.ClusterUnreachable`.

Applications are identified twice:
- ``submission_id``: the backend's handle for a submission (driver id, process group, ...);
- ``app_name``: ``drover:<job>:<run_id>`` (see :func:`app_name_for`), which every submission
  carries so that an owner can find and adopt an application after a crash between "submitted"
  and "recorded" instead of submitting a second one (invariant 4).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

APP_NAME_PREFIX = "drover"


def app_name_for(job_name: str, run_id: int) -> str:
    """The Spark application name of one run; carries the job name and run id."""
    return f"{APP_NAME_PREFIX}:{job_name}:{run_id}"


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
    app_name: str
    state: AppState
    app_id: str | None = None


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

    def status(self, submission_id: str, app_name: str | None = None) -> AppStatus:
        """The current state of a submitted application (NOT_FOUND if the cluster forgot it).

        ``app_name``: the name the caller recorded with this submission id (the run's app
        name). A backend that would otherwise have to look the name up on the cluster may
        trust it: the pair was recorded from :meth:`submit` or :meth:`find`.
        """
        ...

    def kill(self, submission_id: str) -> None:
        """Ask the cluster to stop the application. Idempotent; confirmation comes from status()."""
        ...

    def list_applications(self) -> list[AppInfo]:
        """Every Drover application the cluster currently knows about."""
        ...

    def find(self, app_name: str) -> Submission | None:
        """A live application carrying ``app_name``, if any (used to adopt before resubmitting)."""
        ...

    def probe(self) -> ProbeResult:
        """A cheap health check of the cluster; never raises."""
        ...
