"""Spark through ``$SPARK_HOME/bin/spark-submit``: local mode (the embedded default backend) and,
for clusters of kind ``spark-submit``, client deploy mode against any master URL (``spark://``,
``yarn``, ``k8s://``): the driver runs on the Drover host inside the run's session, so everything
below holds unchanged. Only local and loopback masters pin the driver to 127.0.0.1
(``loopback_driver``).

One run = one OS session (``start_new_session=True``) whose leader is a tiny ``/bin/sh`` wrapper
around ``spark-submit``; the driver JVM, the Python driver and PySpark's worker daemon all live in
it. Everything :meth:`LocalSparkSubmitBackend.status` needs is on disk or in ``/proc``, so a new
backend instance in a new process (a restarted node) sees the runs of the previous one.

Layout under ``runs_dir`` (directories 0711: others may pass, never list; files 0600 unless
said)::

    <job>/<run_id>/submission.json    what was started: pid/sid, start time, command (atomic)
    <job>/<run_id>/driver.log         stdout + stderr of spark-submit and the pipeline (the node
                                      opens it and hands the driver the descriptor)
    <job>/<run_id>/kill_requested     time of the first kill() (drives SIGKILL escalation)
    <job>/<run_id>/log4j2.properties  keeps the INFO lines status() reads (0644: for the driver)
    <job>/<run_id>/driver/            the driver's own directory (its user's, 0700): working
                                      directory, HOME, spark.local.dir (``local/``, unless the
                                      request sets it) and ``exit_code``, written by the wrapper
                                      only when spark-submit ends by itself
    @submissions/<submission_id>      "<job>/<run_id>": index from submission id to run dir (0700)

Drivers and their users. With ``driver_user`` (``DROVER_DRIVER_USER``; ``{team}`` in it is the
job's team, so each team's drivers run as the team's user) every process of a run -- the
wrapper, spark-submit, the JVM and the Python driver -- runs as that unprivileged user: the
node (root) switches user in the child between fork and exec (``subprocess``'s ``user``,
``group``, ``extra_groups=[]``: none of the node's groups; umask 077), never through a shell.
The driver can read the pipeline and Spark's install and write only what the node handed it:
its ``driver/`` directory and its checkpoint location (created by the node, parents root-owned
0711, the location and what is in it given to the user, 0700), and its log through the
descriptor. It cannot read the node's environment (``/proc/<pid>/environ`` is its owner's), the
store, the data directory's listing, other runs or another team's checkpoints. The node in
turn never follows a link the driver could have planted: the checkpoint is handed over by
walking descriptors (``O_NOFOLLOW``, no hard-linked files), the exit code is read with
``O_NOFOLLOW``, and a process that claims a run through ``DROVER_RUN_DIR`` counts only when it
runs as the user that run's ``driver/`` belongs to. Without ``driver_user`` drivers run as the
node's own user (development only: the registry refuses it in production).

Submission ids are ``local-<sid>-<starttime>``: the session id (= the wrapper's pid) plus the
wrapper's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22), which defeats pid
reuse.

Liveness is decided on the whole session, not on one pid: PySpark's worker daemon moves itself
into its own process group (``os.setpgid(0, 0)``) but stays in the session, and a SIGTERM to the
JVM alone leaves the Python driver alive for up to 45 s. A pid that is some process's session id
is never handed to a new process while any member of that session lives, so while the leader
lives (same start time) every member of the session is ours; once the leader is gone, members
are also checked for our ``DROVER_RUN_DIR`` environment variable.

State of one run, as :meth:`status` reports it::

    live member in the session, driver log has no start marker yet  -> STARTING
    live member in the session, start marker seen                   -> RUNNING
    no live member, exit_code 0                                     -> FINISHED
    no live member, exit_code N != 0                                -> FAILED ("exit code N: ...")
    no live member, no exit_code (killed, machine rebooted, ...)    -> KILLED ("killed")
    unknown or malformed submission id                              -> NOT_FOUND

The start marker is BlockManager's ``Initialized BlockManager: BlockManagerId(driver, ...)`` INFO
line: SparkContext logs it right after the local scheduler backend has started its executor and
the application id has been assigned -- the local-mode counterpart of "the application registered
with the master". (``SparkContext: Submitted application: <name>`` comes 1-2 s earlier, at the
very beginning of SparkContext's constructor, before anything can run.) The line ``drover-runtime:
started`` printed by :mod:`pipelines.drover_runtime` counts as well.

Driver <-> run <-> application: a run *is* its OS session and run directory, found from the
submission id, the run records (``submission.json``, written from the request) and the
``DROVER_RUN_DIR`` / ``DROVER_APP_NAME`` environment Drover gives every process of the run. None
of it depends on the name the application registers with, so a pipeline that calls
``builder.appName(...)`` is found, adopted and killed like any other. The app id is read from
the driver's own log lines (``scheduler/backends/driverlog.py``: ``Connected to Spark cluster
with app ID`` against a standalone master, ``Submitted application application_...`` on YARN,
drover_runtime's ``drover-runtime: started app_id=...``); local mode's ``local-<millis>`` is
logged by Spark only through drover_runtime, so a plain pipeline in local mode runs without a
known app id (its session is its link).

Kill: SIGTERM to every process group of the session, remembered in ``kill_requested``; a timer
in this process, or any later kill() call (from any instance) after the grace period, sends
SIGKILL to whatever is left. kill() never waits; status() says STARTING/RUNNING until the last
member is gone.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scheduler.backends.driverlog import app_id_in, log4j2_properties
from scheduler.core.backend import (
    AppInfo,
    AppState,
    AppStatus,
    LogChunk,
    ProbeResult,
    Submission,
    SubmitRequest,
    log_window,
)
from scheduler.core.errors import (
    ClusterError,
    ClusterUnreachable,
    InvalidInput,
    NotFound,
    SubmissionRejected,
)
from scheduler.decisions import storage
from scheduler.decisions.submission import OWNED_PROPERTIES, refused_environment

log = logging.getLogger(__name__)

SUBMISSION_PREFIX = "local-"
#: index directory; '@' cannot appear in a job name, so it never collides with a job's directory
INDEX_DIR = "@submissions"
#: the driver's own directory inside a run directory (its user's)
DRIVER_DIR = "driver"
#: a directory on the driver's way: others may pass it, never list it
PASSABLE = 0o711
#: a Unix user name a driver user template may produce (what ``useradd`` takes, at most 32)
_USER_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,31}$")
DEFAULT_KILL_GRACE_S = 10.0

#: a line containing one of these means the application itself runs (see the module docstring)
STARTED_MARKERS: tuple[bytes, ...] = (
    b"Initialized BlockManager: BlockManagerId(driver",
    b"drover-runtime: started",
)
#: how much of the head of driver.log is searched for start markers and the app id
LOG_HEAD_LIMIT = 1 << 20
#: how much of the tail of driver.log is searched for the error behind a failure
LOG_TAIL_LIMIT = 64 << 10

_SUBMISSION_ID = re.compile(r"^local-(\d+)-(\d+)$")
_APP_ID = re.compile(rb"(?<![\w-])(local-\d{10,})(?![\w-])")
_PY_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b(?::.*)?$")

# Spark properties the backend owns: passed as --name/--master, fixed for local mode, or the
# Python every driver runs (the node's ``DROVER_SPARK_PYTHON``: no job chooses an executable).
_OWNED_CONF = frozenset(
    {
        "spark.app.name",
        "spark.master",
        "spark.submit.deployMode",
        "spark.pyspark.python",
        "spark.pyspark.driver.python",
        *OWNED_PROPERTIES,
    }
)
#: the node's environment variables a driver inherits by default (nothing else of it: the
#: node's own settings, e.g. DROVER_DATABASE_URL, are secrets the pipeline must not see)
DEFAULT_ENV_PASSTHROUGH = (
    "PATH",
    "JAVA_HOME",
    "LANG",
    "LC_ALL",
    "TZ",
    "HOME",
    "USER",
    "TMPDIR",
    "HADOOP_CONF_DIR",
)

# Runs spark-submit; records its exit status only when it ends by itself. A signal to the
# session kills this shell too (default disposition), so a killed run leaves no exit_code.
# It runs as the driver's user: it writes into the driver's directory only.
_WRAPPER = (
    'exit_file=$1; shift; "$@"; code=$?; '
    'printf "%s\\n" "$code" > "$exit_file.tmp" && mv -f "$exit_file.tmp" "$exit_file"; '
    'exit "$code"'
)

#: Default driver log configuration. Spark's own default logs everything at INFO (25-40 KB per
#: micro-batch, ~0.5 GB a day for a 5 s trigger); this one keeps WARN and above plus the INFO
#: lines that matter: SparkContext/BlockManager (start markers, app lifecycle) and the streaming
#: query's start/resume/commit lines. A user's ``spark.driver.extraJavaOptions`` with
#: ``-Dlog4j2.configurationFile=...`` still wins (it comes later on the JVM command line).
DEFAULT_LOG4J2_PROPERTIES = log4j2_properties(
    "Written by Drover's local backend: status() reads the SparkContext/BlockManager INFO lines.",
    [
        ("sparkcontext", "org.apache.spark.SparkContext", "info"),
        ("blockmanager", "org.apache.spark.storage.BlockManager", "info"),
        ("standalone", "org.apache.spark.scheduler.cluster.StandaloneSchedulerBackend", "info"),
        ("yarnclient", "org.apache.hadoop.yarn.client.api.impl.YarnClientImpl", "info"),
        (
            "microbatch",
            "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
            "info",
        ),
        ("microbatch40", "org.apache.spark.sql.execution.streaming.MicroBatchExecution", "info"),
        ("jetty", "org.sparkproject.jetty", "warn"),
        ("jetty2", "org.sparkproject.jetty.util.component.AbstractLifeCycle", "error"),
        ("parquet", "org.apache.parquet.CorruptStatistics", "error"),
        ("parquet2", "parquet.CorruptStatistics", "error"),
    ],
)


# --------------------------------------------------------------------------- drivers' users


@dataclass(frozen=True)
class DriverUser:
    """The unprivileged Unix user one run's processes run as."""

    name: str
    uid: int
    gid: int


def driver_user_for(template: str, team: str) -> DriverUser:
    """The user ``template`` names for ``team`` (``{team}`` replaced), which must exist and must
    not be root; SubmissionRejected otherwise (the job's team has no user: fail closed)."""
    name = template.replace("{team}", team)
    if not _USER_NAME.match(name):
        raise SubmissionRejected(
            f"team {team!r} names no possible Unix user for its drivers ({template!r} gives "
            f"{name!r}): user names are up to 32 letters, digits and '._-'"
        )
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise SubmissionRejected(
            f"no Unix user {name!r} to run the drivers of team {team!r} as: create it "
            f"(useradd --system --no-create-home {name}) or change DROVER_DRIVER_USER"
        ) from None
    if entry.pw_uid == 0:
        raise SubmissionRejected(f"drivers never run as root, and user {name!r} is root")
    if os.geteuid() != 0 and entry.pw_uid != os.geteuid():
        raise ClusterError(
            f"this node runs as uid {os.geteuid()}, so it cannot start drivers as {name!r}: run "
            "the node as root (it switches each driver to its user) or unset DROVER_DRIVER_USER"
        )
    return DriverUser(name, entry.pw_uid, entry.pw_gid)


def _make_passable(path: Path) -> None:
    """``path`` and its missing parents, made by the node, others may pass (0711)."""
    missing: list[Path] = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=PASSABLE)
        except FileExistsError:
            continue  # made meanwhile by a concurrent submission
        directory.chmod(PASSABLE)  # whatever the umask


def _local_checkpoint(location: str) -> Path | None:
    """The directory of a ``file://`` checkpoint location (None: another scheme, or none)."""
    if not location:
        return None
    parsed = storage.parse_location(location, "checkpoint location")
    return Path("/", *parsed.parts) if parsed.scheme == "file" else None


def hand_over(location: Path, user: DriverUser) -> None:
    """Give the checkpoint directory ``location`` (made if missing, its missing parents the
    node's and passable) and everything in it to ``user``, mode 0700 for the directory.

    A checkpoint may hold files the node wrote (a failover's copy, a replica made available):
    the driver must own them to go on. The walk goes through descriptors and never follows a
    link (``O_NOFOLLOW`` at every step; a link itself is re-owned, never its target), and it
    leaves a regular file with several hard links alone: a driver could have linked a file it
    does not own into its checkpoint for the node to hand it over."""
    _make_passable(location.parent)
    try:
        location.mkdir(mode=0o700)
    except FileExistsError:
        pass
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    top = os.open(location, flags)
    try:
        os.fchown(top, user.uid, user.gid)
        os.fchmod(top, 0o700)
        _hand_over_entries(top, user, flags)
    finally:
        os.close(top)


def _hand_over_entries(directory: int, user: DriverUser, flags: int) -> None:
    for name in os.listdir(directory):
        try:
            info = os.stat(name, dir_fd=directory, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                child = os.open(name, flags, dir_fd=directory)
                try:
                    if os.fstat(child).st_ino != info.st_ino:
                        continue  # replaced between the two looks: leave it
                    os.fchown(child, user.uid, user.gid)
                    _hand_over_entries(child, user, flags)
                finally:
                    os.close(child)
            elif stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
                log.warning("not handing over %s: it has %d hard links", name, info.st_nlink)
            elif info.st_uid != user.uid or info.st_gid != user.gid:
                os.chown(name, user.uid, user.gid, dir_fd=directory, follow_symlinks=False)
        except FileNotFoundError:
            continue  # removed meanwhile


def _read_small(path: Path, limit: int = 64) -> str | None:
    """The first ``limit`` bytes of a regular file, never through a link nor from a FIFO (a
    driver may have planted either); None when there is no such file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "<a link>"
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "<not a file>"
        return os.read(fd, limit).decode("utf-8", errors="replace")
    finally:
        os.close(fd)


def _process_uid(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _runs_as_its_user(pid: int, run_dir: Path) -> bool:
    """Whether process ``pid`` runs as the user the run's ``driver/`` directory belongs to. A
    run directory without one is an older node's and takes any user; a run directory that does
    not exist was never submitted, and nobody runs it."""
    try:
        owner = os.stat(run_dir / DRIVER_DIR, follow_symlinks=False).st_uid
    except FileNotFoundError:
        return run_dir.is_dir()
    except OSError:
        return False
    return _process_uid(pid) == owner


# --------------------------------------------------------------------------- /proc helpers


@dataclass(frozen=True)
class _Proc:
    pid: int
    state: str
    pgrp: int
    session: int
    starttime: int

    @property
    def alive(self) -> bool:
        return self.state not in ("Z", "X", "x")


def _read_stat(pid: int) -> _Proc | None:
    """One process from /proc/<pid>/stat, or None when it does not exist (any more)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # comm (field 2) may hold spaces and parentheses: split after the last ')'
    fields = raw[raw.rindex(b")") + 2 :].split()
    return _Proc(
        pid=pid,
        state=fields[0].decode(),
        pgrp=int(fields[2]),
        session=int(fields[3]),
        starttime=int(fields[19]),  # field 22
    )


def _iter_procs() -> Iterator[_Proc]:
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                proc = _read_stat(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue  # vanished or unreadable mid-scan
            if proc is not None:
                yield proc


def _environ(pid: int) -> dict[str, str] | None:
    """The environment a process was started with; None if it cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode(errors="replace")] = value.decode(errors="replace")
    return env


def _parse_submission_id(submission_id: str) -> tuple[int, int] | None:
    match = _SUBMISSION_ID.match(submission_id)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def _write_atomic(path: Path, data: str) -> None:
    """Write a file of the node's (0600) that readers see whole or not at all."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _describe_exit(code: int) -> str:
    if code > 128:
        try:
            return f"exit code {code} ({signal.Signals(code - 128).name})"
        except ValueError:
            pass
    return f"exit code {code}"


def _last_error_line(log_path: Path) -> str | None:
    """The last line of the driver log that looks like the cause of a failure (cheap: tail only)."""
    try:
        with open(log_path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - LOG_TAIL_LIMIT))
            tail = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    lines = [line.rstrip() for line in tail.splitlines()]
    for line in reversed(lines):
        if _PY_EXCEPTION_LINE.match(line):
            return line[:300]
    for line in reversed(lines):
        if " ERROR " in line or line.startswith("Exception in thread"):
            return line[:300]
    return None


@dataclass
class _LogScan:
    """What has been learnt from the head of one driver log (read incrementally)."""

    offset: int = 0
    carry: bytes = b""
    started: bool = False
    app_id: str | None = None

    @property
    def done(self) -> bool:
        return (self.started and self.app_id is not None) or self.offset >= LOG_HEAD_LIMIT

    def feed(self, log_path: Path) -> None:
        if self.done:
            return
        try:
            with open(log_path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read(LOG_HEAD_LIMIT - self.offset)
        except FileNotFoundError:
            return
        self.offset += len(chunk)
        data = self.carry + chunk
        lines = data.split(b"\n")
        self.carry = lines.pop()
        if self.offset >= LOG_HEAD_LIMIT:
            lines.append(self.carry)
            self.carry = b""
        for line in lines:
            if not self.started and any(marker in line for marker in STARTED_MARKERS):
                self.started = True
            if self.app_id is None:
                self.app_id = app_id_in(line)
            if self.app_id is None:
                match = _APP_ID.search(line)
                if match is not None:
                    self.app_id = match.group(1).decode()


# --------------------------------------------------------------------------- the backend


class LocalSparkSubmitBackend:
    """:class:`~scheduler.core.backend.ClusterBackend` for Spark local mode via spark-submit.

    Thread-safe. Calls block only briefly (a /proc scan, small file reads); :meth:`kill` returns
    at once and escalates to SIGKILL in the background after ``kill_grace_s``.
    """

    def __init__(
        self,
        spark_home: Path,
        runs_dir: Path,
        master: str = "local[2]",
        python: str = sys.executable,
        base_conf: Mapping[str, str] | None = None,
        *,
        kill_grace_s: float = DEFAULT_KILL_GRACE_S,
        log4j2_properties: str = DEFAULT_LOG4J2_PROPERTIES,
        loopback_driver: bool = True,
        env_passthrough: Sequence[str] = DEFAULT_ENV_PASSTHROUGH,
        driver_user: str = "",
    ) -> None:
        self.spark_home = Path(spark_home)
        # resolved: DROVER_RUN_DIR values are compared as strings across instances
        self.runs_dir = Path(runs_dir).resolve()
        self.master = master
        self.python = python
        self.base_conf: dict[str, str] = dict(base_conf or {})
        self.kill_grace_s = kill_grace_s
        self.log4j2_properties = log4j2_properties
        #: bind the driver to 127.0.0.1 (local mode, single-host setups); off for remote masters
        self.loopback_driver = loopback_driver
        #: the node environment variables a driver inherits (see :meth:`_environment`)
        self.env_passthrough = tuple(env_passthrough)
        #: the user drivers run as (``{team}``: the job's team); "" = this process's own user
        self.driver_user = driver_user
        self._lock = threading.Lock()
        # in-memory only as a cache / for reaping: status() never depends on these
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self._scans: dict[str, _LogScan] = {}
        self._timers: dict[str, threading.Timer] = {}

    @property
    def spark_submit(self) -> Path:
        return self.spark_home / "bin" / "spark-submit"

    # ----------------------------------------------------------------------- submit

    def submit(self, request: SubmitRequest) -> Submission:
        job = request.job_name
        if not job or "/" in job or "\0" in job or job in (".", "..") or job.startswith("@"):
            raise SubmissionRejected(f"job name {job!r} cannot be used as a directory name")
        entrypoint = Path(request.entrypoint)
        if not entrypoint.is_file():
            raise SubmissionRejected(f"entrypoint {request.entrypoint!r} is not a file")
        if not os.access(self.spark_submit, os.X_OK):
            raise ClusterUnreachable(f"{self.spark_submit} is missing or not executable")
        refused = refused_environment(request.env)
        if refused:
            raise SubmissionRejected(
                f"the driver's environment may not set {', '.join(refused)}: these choose the "
                "executables and code it runs"
            )
        user = driver_user_for(self.driver_user, request.team) if self.driver_user else None

        run_dir = self.runs_dir / job / str(request.run_id)
        try:
            _make_passable(self.runs_dir)
            (self.runs_dir / INDEX_DIR).mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:  # e.g. runs_dir is not a directory: not "already submitted"
            raise ClusterUnreachable(f"cannot use run directory {self.runs_dir}: {exc}") from exc
        try:
            self._claim_run_dir(run_dir)
        except FileExistsError as exc:
            raise SubmissionRejected(
                f"run {request.run_id} of job {job!r} was already submitted ({run_dir})"
            ) from exc
        except OSError as exc:
            raise ClusterUnreachable(f"cannot create run directory {run_dir}: {exc}") from exc

        try:
            work = run_dir / DRIVER_DIR
            work.mkdir(mode=0o700)
            log4j = run_dir / "log4j2.properties"
            log4j.write_text(self.log4j2_properties, encoding="utf-8")
            log4j.chmod(0o644)
            if user is not None:
                os.chown(work, user.uid, user.gid)
                location = _local_checkpoint(request.checkpoint_location)
                if location is not None:
                    hand_over(location, user)
            command = self._command(request, entrypoint.absolute(), run_dir)
            env = self._environment(request, run_dir, log4j, user)
            argv = ["/bin/sh", "-c", _WRAPPER, "drover-run", str(work / "exit_code"), *command]
            log_fd = os.open(run_dir / "driver.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            # the switch to the driver's user happens in the child, between fork and exec
            switch: dict[str, Any] = (
                {}
                if user is None
                else {"user": user.uid, "group": user.gid, "extra_groups": [], "umask": 0o077}
            )
            with os.fdopen(log_fd, "wb") as log_file:
                proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    cwd=work,
                    env=env,
                    start_new_session=True,
                    close_fds=True,
                    **switch,
                )
        except OSError as exc:
            shutil.rmtree(run_dir, ignore_errors=True)  # nothing started: the run id may be retried
            raise ClusterUnreachable(
                f"cannot start spark-submit for {request.app_name}: {exc}"
            ) from exc

        # the child is not reaped yet, so its /proc entry exists even if it already ended
        stat = _read_stat(proc.pid)
        if stat is None:  # pragma: no cover - impossible for an unreaped child
            raise ClusterError(f"spark-submit wrapper {proc.pid} vanished before it was recorded")
        submission_id = f"{SUBMISSION_PREFIX}{proc.pid}-{stat.starttime}"
        self._adopt_child(proc)

        record = {
            "submission_id": submission_id,
            "app_name": request.app_name,
            "job": job,
            "run_id": request.run_id,
            "pid": proc.pid,
            "pgid": proc.pid,
            "sid": proc.pid,
            "start_time": stat.starttime,
            "submitted_at": datetime.now(UTC).isoformat(),
            "master": self.master,
            "run_dir": str(run_dir),
            "command": command,
        }
        try:
            _write_atomic(run_dir / "submission.json", json.dumps(record, indent=2) + "\n")
            _write_atomic(
                self.runs_dir / INDEX_DIR / submission_id,
                str(run_dir.relative_to(self.runs_dir)) + "\n",
            )
        except OSError as exc:
            # the application runs; find(app_name) still sees it through the process table
            raise ClusterError(
                f"{request.app_name} started as {submission_id} but could not be recorded: {exc}"
            ) from exc
        log.info("submitted %s as %s (%s)", request.app_name, submission_id, run_dir)
        return Submission(submission_id=submission_id)

    def _claim_run_dir(self, run_dir: Path) -> None:
        """Create the run directory; FileExistsError if this run was submitted already.

        A directory left by a submit that died before starting anything (no submission.json,
        no live process of that run) is cleared and reused.
        """
        _make_passable(run_dir.parent)
        try:
            run_dir.mkdir(mode=PASSABLE)
            run_dir.chmod(PASSABLE)
            return
        except FileExistsError:
            if (run_dir / "submission.json").exists() or any(
                self._own_run_dir(_environ(p.pid), p.pid) == run_dir
                for p in _iter_procs()
                if p.alive
            ):
                raise
        log.warning("reusing %s left by a submission that never started", run_dir)
        shutil.rmtree(run_dir)
        run_dir.mkdir(mode=PASSABLE)
        run_dir.chmod(PASSABLE)

    def _command(self, request: SubmitRequest, entrypoint: Path, run_dir: Path) -> list[str]:
        conf = {**self.base_conf, **request.conf}
        for key in _OWNED_CONF:
            conf.pop(key, None)
        # scratch space (spark-*/blockmgr-* dirs) inside the run directory instead of /tmp,
        # where a killed driver would leave it behind
        conf.setdefault("spark.local.dir", str(run_dir / DRIVER_DIR / "local"))
        conf.update(request.drover_properties())
        conf["spark.pyspark.python"] = conf["spark.pyspark.driver.python"] = self.python
        if self.loopback_driver:
            conf.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
        command = [str(self.spark_submit), "--master", self.master, "--name", request.app_name]
        if request.py_files:
            command += ["--py-files", ",".join(request.py_files)]
        for key, value in conf.items():
            command += ["--conf", f"{key}={value}"]
        command.append(str(entrypoint))
        command.extend(request.args)
        return command

    def _environment(
        self, request: SubmitRequest, run_dir: Path, log4j: Path, user: DriverUser | None = None
    ) -> dict[str, str]:
        """The driver's whole environment, declared: the passthrough variables of the node's
        environment (PATH, JAVA_HOME, locale...), the job's own variables, what Spark needs and
        the run's ``DROVER_*`` identity. Never the rest of the node's environment. A driver
        running as its own user has its directory as HOME and its name as USER."""
        env = {k: os.environ[k] for k in self.env_passthrough if k in os.environ}
        env.update(request.env)
        if user is not None:
            home = str(run_dir / DRIVER_DIR)
            env.update({"HOME": home, "USER": user.name, "LOGNAME": user.name})
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        env.setdefault("SPARK_LOCAL_HOSTNAME", "127.0.0.1")
        submit_opts = env.get("SPARK_SUBMIT_OPTS", "")
        env["SPARK_SUBMIT_OPTS"] = f"{submit_opts} -Dlog4j2.configurationFile=file:{log4j}".strip()
        env.update(
            {
                "SPARK_HOME": str(self.spark_home),
                "PYSPARK_PYTHON": self.python,
                "PYSPARK_DRIVER_PYTHON": self.python,
                **request.drover_environment(),
                # marks every process of the run (checked once the session leader is gone)
                "DROVER_RUN_DIR": str(run_dir),
            }
        )
        return env

    def _adopt_child(self, proc: subprocess.Popen[bytes]) -> None:
        """Reap the wrapper when it ends, so it never lingers as a zombie of this process."""
        with self._lock:
            self._children[proc.pid] = proc

        def reap() -> None:
            proc.wait()
            with self._lock:
                self._children.pop(proc.pid, None)

        threading.Thread(target=reap, name=f"drover-reap-{proc.pid}", daemon=True).start()

    # ----------------------------------------------------------------------- status

    def status(
        self, submission_id: str, app_name: str | None = None, app_id: str | None = None
    ) -> AppStatus:
        status = self._status(submission_id, None)
        if app_id and status.app_id is None and status.state is not AppState.NOT_FOUND:
            status = AppStatus(status.state, app_id, status.reason, status.exit_code)
        return status

    def _status(self, submission_id: str, procs: list[_Proc] | None) -> AppStatus:
        """status(), optionally against a process snapshot taken after the run was recorded."""
        try:
            run_dir, members = self._locate(submission_id, procs)
            if run_dir is None:
                return AppStatus(AppState.NOT_FOUND, reason="not a run of this backend")
            if members:
                scan = self._scan_log(submission_id, run_dir)
                state = AppState.RUNNING if scan.started else AppState.STARTING
                return AppStatus(state, app_id=scan.app_id)
            return self._ended_status(submission_id, run_dir)
        except OSError as exc:
            raise ClusterUnreachable(f"cannot read the state of {submission_id}: {exc}") from exc

    def _locate(
        self, submission_id: str, procs: list[_Proc] | None = None
    ) -> tuple[Path | None, list[_Proc]]:
        """The run directory and live processes of one of our runs; (None, []) if not ours."""
        parsed = _parse_submission_id(submission_id)
        if parsed is None:
            return None, []
        sid, starttime = parsed
        run_dir = self._run_dir(submission_id, sid, starttime)
        members = self._members(sid, starttime, run_dir, procs)
        if members and run_dir is None:
            # not indexed (crash between spawn and record) and the leader is gone
            for proc in members:
                run_dir = self._own_run_dir(_environ(proc.pid), proc.pid)
                if run_dir is not None:
                    break
        if run_dir is None:
            return None, []  # never signal or report processes we did not start
        return run_dir, members

    def _ended_status(self, submission_id: str, run_dir: Path) -> AppStatus:
        app_id = self._scan_log(submission_id, run_dir).app_id
        text = _read_small(run_dir / DRIVER_DIR / "exit_code")
        if text is None:  # a run of a node before the driver's own directory
            text = _read_small(run_dir / "exit_code")
        if text is None:
            return AppStatus(AppState.KILLED, app_id=app_id, reason="killed")
        raw = text.strip()
        try:
            code = int(raw)
        except ValueError:
            return AppStatus(AppState.FAILED, app_id=app_id, reason=f"unreadable exit code {raw!r}")
        if code == 0:
            return AppStatus(AppState.FINISHED, app_id=app_id, exit_code=0)
        reason = _describe_exit(code)
        error = _last_error_line(run_dir / "driver.log")
        if error:
            reason = f"{reason}: {error}"
        return AppStatus(AppState.FAILED, app_id=app_id, reason=reason, exit_code=code)

    def _run_dir(self, submission_id: str, sid: int, starttime: int) -> Path | None:
        """The run directory of a submission: from the index, else from the live leader's env."""
        try:
            rel = (self.runs_dir / INDEX_DIR / submission_id).read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            pass
        else:
            return self.runs_dir / rel
        leader = _read_stat(sid)
        if leader is None or leader.starttime != starttime or not leader.alive:
            return None
        return self._own_run_dir(_environ(sid), sid)

    def _own_run_dir(self, env: dict[str, str] | None, pid: int) -> Path | None:
        """The run directory process ``pid`` claims (its ``DROVER_RUN_DIR``), if it is one of
        ours and the process runs as that run's user (a driver may start processes that claim
        another run's directory: they never pass for it)."""
        value = (env or {}).get("DROVER_RUN_DIR")
        if not value:
            return None
        path = Path(value)
        if path.parent.parent != self.runs_dir or not _runs_as_its_user(pid, path):
            return None
        return path

    def _members(
        self, sid: int, starttime: int, run_dir: Path | None, snapshot: list[_Proc] | None = None
    ) -> list[_Proc]:
        """Live processes of the run's session (see the module docstring for the identity rules)."""
        leader = _read_stat(sid)
        if leader is not None and leader.starttime != starttime:
            return []  # the pid was reused: our session is empty
        source = _iter_procs() if snapshot is None else snapshot
        procs = [p for p in source if p.session == sid and p.alive]
        if leader is not None or not procs:
            return procs  # the leader (maybe a zombie) pins the session id
        own = []
        for proc in procs:
            env = _environ(proc.pid)
            if env is None:  # cannot tell: assume ours rather than declare the run gone
                own.append(proc)
            elif (
                run_dir is not None
                and env.get("DROVER_RUN_DIR") == str(run_dir)
                and _runs_as_its_user(proc.pid, run_dir)
            ):
                own.append(proc)
            elif run_dir is None and self._own_run_dir(env, proc.pid) is not None:
                own.append(proc)
        return own

    def _scan_log(self, submission_id: str, run_dir: Path) -> _LogScan:
        with self._lock:
            scan = self._scans.setdefault(submission_id, _LogScan())
            scan.feed(run_dir / "driver.log")
            return scan

    # ----------------------------------------------------------------------- driver log

    #: ``driver.log`` holds spark-submit's and the pipeline's stdout and stderr together
    log_streams: tuple[str, ...] = ("combined",)

    def driver_log(
        self, submission_id: str, stream: str, offset: int | None, limit: int
    ) -> LogChunk:
        """A byte range of the run's ``driver.log`` (:class:`~scheduler.core.backend.DriverLogs`).
        The run directory is on the node that started the run: another node's backend finds
        no such run."""
        if stream not in self.log_streams:
            raise InvalidInput(f"a local run has one log stream, 'combined', not {stream!r}")
        parsed = _parse_submission_id(submission_id)
        run_dir = None if parsed is None else self._run_dir(submission_id, *parsed)
        if run_dir is None:
            raise NotFound(f"no local run {submission_id!r} on this node")
        try:
            with open(run_dir / "driver.log", "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                start, end = log_window(size, offset, limit)
                fh.seek(start)
                data = fh.read(end - start)
        except FileNotFoundError as exc:
            raise NotFound(f"the driver log of {submission_id!r} is gone") from exc
        except OSError as exc:
            raise ClusterUnreachable(
                f"cannot read the driver log of {submission_id}: {exc}"
            ) from exc
        return LogChunk(stream, data, start, size)

    # ----------------------------------------------------------------------- kill

    def kill(self, submission_id: str) -> None:
        try:
            run_dir, members = self._locate(submission_id)
            if run_dir is None or not members:
                return
            requested_at = self._record_kill(run_dir)
        except OSError as exc:
            raise ClusterUnreachable(f"cannot kill {submission_id}: {exc}") from exc
        overdue = time.time() - requested_at >= self.kill_grace_s
        sig = signal.SIGKILL if overdue else signal.SIGTERM
        self._signal(submission_id, members, sig)
        if not overdue:
            self._schedule_escalation(submission_id, requested_at + self.kill_grace_s)

    def _record_kill(self, run_dir: Path) -> float:
        """When the first kill of this run was asked for (persisted, so escalation survives us)."""
        now = time.time()
        path = run_dir / "kill_requested"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            try:
                return float(path.read_text(encoding="utf-8").strip())
            except ValueError:
                return now  # half-written by a concurrent caller: it is (about) now anyway
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(f"{now}\n")
        return now

    def _signal(self, submission_id: str, members: list[_Proc], sig: signal.Signals) -> None:
        groups = sorted({p.pgrp for p in members})
        log.info("sending %s to %s (process groups %s)", sig.name, submission_id, groups)
        for pgrp in groups:
            try:
                os.killpg(pgrp, sig)
            except ProcessLookupError:
                pass
            except PermissionError as exc:
                raise ClusterError(f"not allowed to signal {submission_id}: {exc}") from exc

    def _schedule_escalation(self, submission_id: str, at: float) -> None:
        with self._lock:
            if submission_id in self._timers:
                return
            timer = threading.Timer(max(0.0, at - time.time()), self._escalate, (submission_id,))
            timer.daemon = True
            timer.name = f"drover-kill-{submission_id}"
            self._timers[submission_id] = timer
        timer.start()

    def _escalate(self, submission_id: str) -> None:
        with self._lock:
            self._timers.pop(submission_id, None)
        try:
            self.kill(submission_id)  # past the grace now: SIGKILL for whatever is left
        except Exception:  # a timer thread has nobody to report to
            log.exception("SIGKILL escalation for %s failed", submission_id)

    # ----------------------------------------------------------------------- listing

    def list_applications(self) -> list[AppInfo]:
        """Every run under ``runs_dir`` (live or ended) plus live unrecorded ones from /proc."""
        try:
            records = list(self._records())
            procs = list(_iter_procs())  # after reading the records: every recorded run is in it
            apps: dict[str, AppInfo] = {}
            for record in records:
                submission_id = record["submission_id"]
                status = self._status(submission_id, procs)
                apps[submission_id] = AppInfo(
                    submission_id, record["app_name"], status.state, status.app_id
                )
            for submission_id, app_name in self._live_leaders(procs):
                if submission_id not in apps:
                    status = self._status(submission_id, procs)
                    apps[submission_id] = AppInfo(
                        submission_id, app_name, status.state, status.app_id
                    )
            return list(apps.values())
        except OSError as exc:
            raise ClusterUnreachable(f"cannot list runs in {self.runs_dir}: {exc}") from exc

    def find(self, app_name: str) -> Submission | None:
        """A live run named ``app_name``: from the run records, then from the process table."""
        try:
            candidates = [r["submission_id"] for r in self._records() if r["app_name"] == app_name]
            procs = list(_iter_procs())
            candidates += [sid for sid, name in self._live_leaders(procs) if name == app_name]
            for submission_id in dict.fromkeys(candidates):
                status = self._status(submission_id, procs)
                if status.state.is_alive:
                    return Submission(submission_id, status.app_id)
            return None
        except OSError as exc:
            raise ClusterUnreachable(
                f"cannot look for {app_name} in {self.runs_dir}: {exc}"
            ) from exc

    def _records(self) -> Iterator[dict[str, str]]:
        if not self.runs_dir.exists():
            return  # nothing submitted yet
        if not self.runs_dir.is_dir():
            raise NotADirectoryError(f"{self.runs_dir} is not a directory")
        for path in sorted(self.runs_dir.glob("*/*/submission.json")):
            if path.parent.parent.name == INDEX_DIR:
                continue
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                continue
            except ValueError:
                log.warning("ignoring unreadable %s", path)
                continue
            yield record

    def _live_leaders(self, procs: list[_Proc]) -> Iterator[tuple[str, str]]:
        """(submission_id, app_name) of every live session leader started by this backend."""
        for proc in procs:
            if proc.pid != proc.session or not proc.alive:
                continue
            env = _environ(proc.pid)
            if env is not None and self._own_run_dir(env, proc.pid) is not None:
                yield (
                    f"{SUBMISSION_PREFIX}{proc.pid}-{proc.starttime}",
                    env.get("DROVER_APP_NAME", ""),
                )

    # ----------------------------------------------------------------------- probe

    def probe(self) -> ProbeResult:
        started = time.monotonic()
        try:
            if not self.spark_submit.is_file():
                ok, detail = False, f"{self.spark_submit} does not exist"
            elif not os.access(self.spark_submit, os.X_OK):
                ok, detail = False, f"{self.spark_submit} is not executable"
            else:
                ok, detail = True, f"{self.spark_submit} ({self.master})"
        except OSError as exc:
            ok, detail = False, f"cannot check {self.spark_submit}: {exc}"
        return ProbeResult(ok=ok, detail=detail, latency_s=time.monotonic() - started)

    # ----------------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Forget pending SIGKILL escalations (runs are left alone; a later kill() escalates)."""
        with self._lock:
            timers = list(self._timers.values())
            self._timers.clear()
        for timer in timers:
            timer.cancel()
