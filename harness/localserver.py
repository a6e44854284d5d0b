"""A private server process on this machine (MariaDB, ZooKeeper): launched in a session of its
own with its output in a log file, awaited until it answers, stopped by signal."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def stop_process(proc: subprocess.Popen[Any], timeout: float = 10.0) -> None:
    """SIGTERM to ``proc``; SIGKILL if it has not exited within ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


class LocalServer:
    """The process part of a private server on 127.0.0.1:``port``; ``name`` is what its errors
    call it."""

    name = "server"

    def __init__(self, port: int, log_path: Path, deadline: float) -> None:
        self.port = port
        self.log_path = log_path
        self.deadline = deadline
        self.proc: subprocess.Popen[bytes] | None = None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _refuse_if_running(self) -> None:
        if self.running():
            raise RuntimeError(f"{self.name} on port {self.port} is already running")

    def _launch(
        self, argv: list[str], answers: Callable[[], bool], *, poll: float, kill_late: bool
    ) -> None:
        """Start ``argv`` and wait until ``answers()``; if it exits first or is not answering
        within the deadline, raise RuntimeError (stopped first: at once with ``kill_late``)."""
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        end = time.monotonic() + self.deadline
        while not answers():
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.proc.returncode}: {self._tail()}"
                )
            if time.monotonic() >= end:
                self._terminate(kill=kill_late)
                raise RuntimeError(
                    f"{self.name} did not answer within {self.deadline}s: {self._tail()}"
                )
            time.sleep(poll)

    def _terminate(self, *, kill: bool = False, timeout: float = 10.0) -> None:
        """SIGTERM (SIGKILL with ``kill``) to the server's session; SIGKILL if it has not exited
        within ``timeout`` seconds."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self.proc = None

    def _tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
