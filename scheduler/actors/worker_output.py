"""The actors' output, read from Ray's log directory by a thread of the node process.

Ray redirects each worker process's stdout and stderr to files in the session's log directory
(``worker-<id>-<job>-<pid>.out`` / ``.err``) and, by default, runs a *log monitor* process that
tails them and publishes their lines through the GCS to the driver, which prints them. That
process is a Python interpreter with Ray loaded (about 50 MiB resident) doing what one thread
of the node process does here: :class:`WorkerOutputTail` follows the same files (the workers',
and the raylet's and GCS's ``.err`` files, where their crashes land) and hands every complete
line, in order per file, to ``emit`` in the shape Ray's log monitor publishes
(``{"pid", "is_err", "lines", "actor_name", "task_name", "job"}``), which
:func:`scheduler.core.logs.worker_output_printer` prints as the node's records.

Reading is by polling: a ``stat`` per followed file every ``interval`` (0.2 s), a listing of the
directory every ``scan_every`` (1 s); nothing is held open between polls. A file is read from
its start (the tail starts before the actors do), a line without its newline yet is held until
it is completed or the file stays unchanged for a poll, and a file that shrinks or is replaced
(rotation) is read again from its start. A dead worker's file is dropped once read to its end.
On :meth:`WorkerOutputTail.stop` one last poll prints what the actors wrote before they stopped.

This module knows nothing of Ray beyond its file names and the marker lines its workers write
(``:actor_name:Name`` when an actor starts, ``:task_name:``, ``:job_id:``), which name the
lines that follow and are not printed.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["WorkerOutputTail", "follows"]

log = logging.getLogger("drover.worker_output")

#: what Ray's workers print to name the lines after them (ray._private.ray_constants)
ACTOR_NAME_MARKER = ":actor_name:"
TASK_NAME_MARKER = ":task_name:"
JOB_ID_MARKER = ":job_id:"

#: the files followed: every worker's stdout and stderr, and the raylet's and the GCS's stderr
_FOLLOWED = re.compile(r"^(?:worker-.*-(?P<pid>\d+)\.(?:out|err)|(?:raylet|gcs_server).*\.err)$")
#: at most this much of one file is read per poll (the rest at the next one)
READ_LIMIT = 4 * 1024 * 1024
#: a line longer than this is printed in pieces rather than held for its newline
PENDING_LIMIT = 64 * 1024


def follows(name: str) -> bool:
    """Whether a file of Ray's log directory carries output the node prints."""
    return _FOLLOWED.match(name) is not None


def _worker_pid(name: str) -> int | None:
    match = _FOLLOWED.match(name)
    if match is None or match.group("pid") is None:
        return None
    return int(match.group("pid"))


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


@dataclass
class _Followed:
    path: Path
    pid: int | str | None
    is_err: bool
    position: int = 0
    inode: int | None = None
    pending: bytes = b""
    actor_name: str | None = None
    task_name: str | None = None
    job: str | None = None
    lines: list[str] = field(default_factory=list)


class WorkerOutputTail:
    """Follows the output files in ``logs_dir`` and hands their lines to ``emit``.

    ``emit`` is called from the tail's thread (or the caller of :meth:`poll`/:meth:`stop`) and
    must not raise; an exception from it is logged and the lines are dropped."""

    def __init__(
        self,
        logs_dir: str | Path,
        emit: Callable[[dict[str, Any]], None],
        *,
        interval: float = 0.2,
        scan_every: float = 1.0,
        alive: Callable[[int], bool] = _process_alive,
    ) -> None:
        self._dir = Path(logs_dir)
        self._emit = emit
        self._interval = interval
        self._scan_every = max(1, round(scan_every / interval)) if interval > 0 else 1
        self._alive = alive
        self._files: dict[str, _Followed] = {}
        #: dead workers' files read to their end: never followed again
        self._finished: set[str] = set()
        self._polls = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # one poll at a time (the thread's, stop's last one)

    # -- the thread -----------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="ray-worker-output", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop following; the lines written until now are printed first."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self.poll(final=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - the tail never dies; the next poll tries again
                log.exception("reading the actors' output failed")
            self._stop.wait(self._interval)

    # -- one poll -------------------------------------------------------------------------

    def poll(self, *, final: bool = False) -> None:
        """Read what the followed files gained since the last poll and emit it."""
        with self._lock:
            if final or self._polls % self._scan_every == 0:
                self._scan()
            self._polls += 1
            for name, followed in list(self._files.items()):
                if self._read(followed, final) is None:
                    del self._files[name]
                    self._finished.add(name)

    def _scan(self) -> None:
        try:
            names = os.listdir(self._dir)
        except OSError:
            return  # not there (yet, or any more)
        for name in sorted(names):
            if name in self._files or name in self._finished or not follows(name):
                continue
            pid: int | str | None = _worker_pid(name)
            if pid is None:
                pid = "raylet" if name.startswith("raylet") else "gcs_server"
            self._files[name] = _Followed(self._dir / name, pid, name.endswith(".err"))

    def _read(self, followed: _Followed, final: bool) -> bool | None:
        """Emit what ``followed`` gained; None when it is done with (gone, or a dead worker's
        file read to its end)."""
        try:
            stat = followed.path.stat()
        except FileNotFoundError:
            self._flush_pending(followed)
            return None
        except OSError:
            return False
        if followed.inode is not None and (
            stat.st_ino != followed.inode or stat.st_size < followed.position
        ):
            self._flush_pending(followed)  # rotated or truncated: the new content from its start
            followed.position = 0
        followed.inode = stat.st_ino
        if stat.st_size > followed.position:
            try:
                with followed.path.open("rb") as handle:
                    handle.seek(followed.position)
                    chunk = handle.read(READ_LIMIT)
            except FileNotFoundError:
                self._flush_pending(followed)
                return None
            except OSError:
                return False
            followed.position += len(chunk)
            self._take(followed, chunk, final)
            return True
        # unchanged since the last poll: a held partial line is complete as far as anyone knows
        self._flush_pending(followed)
        pid = followed.pid
        if isinstance(pid, int) and not self._alive(pid):
            return None
        return False

    def _take(self, followed: _Followed, chunk: bytes, final: bool) -> None:
        data = followed.pending + chunk
        complete, newline, rest = data.rpartition(b"\n")
        if not newline:
            complete, rest = b"", data
        if final or len(rest) > PENDING_LIMIT:
            complete, rest = data, b""
        followed.pending = rest
        if complete:
            for raw in complete.split(b"\n"):
                self._line(followed, raw.decode("utf-8", "replace").rstrip("\r"))
        self._publish(followed)

    def _flush_pending(self, followed: _Followed) -> None:
        if followed.pending:
            raw, followed.pending = followed.pending, b""
            self._line(followed, raw.decode("utf-8", "replace").rstrip("\r"))
            self._publish(followed)

    def _line(self, followed: _Followed, line: str) -> None:
        if line.startswith(ACTOR_NAME_MARKER):
            self._publish(followed)  # the lines before it were someone else's
            followed.actor_name = line[len(ACTOR_NAME_MARKER) :]
            followed.task_name = None
        elif line.startswith(TASK_NAME_MARKER):
            self._publish(followed)
            followed.task_name = line[len(TASK_NAME_MARKER) :]
        elif line.startswith(JOB_ID_MARKER):
            followed.job = line[len(JOB_ID_MARKER) :]
        else:
            followed.lines.append(line)

    def _publish(self, followed: _Followed) -> None:
        if not followed.lines:
            return
        lines, followed.lines = followed.lines, []
        data = {
            "pid": followed.pid,
            "job": followed.job,
            "is_err": followed.is_err,
            "lines": lines,
            "actor_name": followed.actor_name,
            "task_name": followed.task_name,
        }
        try:
            self._emit(data)
        except Exception:  # noqa: BLE001 - a printer's failure must not stop the tail
            log.exception("printing %d line(s) of %s failed", len(lines), followed.path.name)
