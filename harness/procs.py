"""Processes through psutil: those of a session, or those carrying an environment entry or a
command-line fragment, and the CPU they spend. One place for benches and tests (no pytest
here)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class Proc:
    pid: int
    #: psutil's status: ``running``, ``sleeping``, ``stopped``, ``zombie``, ...
    state: str
    session: int

    @property
    def alive(self) -> bool:
        return self.state != psutil.STATUS_ZOMBIE

    def environ(self) -> list[bytes]:
        """``NAME=value`` entries ([] when the process is gone or not readable)."""
        try:
            env = psutil.Process(self.pid).environ()
        except (psutil.Error, OSError):
            return []
        return [f"{k}={v}".encode() for k, v in env.items()]

    def cmdline(self) -> bytes:
        """The command line, its arguments separated by NUL bytes (b"" when gone)."""
        try:
            return "\0".join(psutil.Process(self.pid).cmdline()).encode()
        except (psutil.Error, OSError):
            return b""


def parent_pid(pid: int) -> int | None:
    """The parent of ``pid`` (None when it is gone)."""
    try:
        return int(psutil.Process(pid).ppid())
    except (psutil.Error, OSError):
        return None


def command_line(pid: int) -> list[str]:
    """The non-empty arguments of ``pid``'s command line ([] when it is gone, not ours to read,
    or has none: a kernel thread)."""
    try:
        return [a for a in psutil.Process(pid).cmdline() if a]
    except (psutil.Error, OSError):
        return []


def cpu_seconds(pid: int) -> float:
    """User and system CPU ``pid`` has used so far (0.0 when it is gone)."""
    try:
        times = psutil.Process(pid).cpu_times()
    except (psutil.Error, OSError):
        return 0.0
    return float(times.user + times.system)


class CpuMeter:
    """CPU seconds spent by groups of processes between :meth:`start` and :meth:`stop`. Each
    group is a function listing its processes, called at both ends: a process that exits in
    between is missed, one born in between counts in full."""

    def __init__(self) -> None:
        self._groups: dict[str, Callable[[], Iterable[int]]] = {}
        self._before: dict[tuple[str, int], float] = {}
        self._started = 0.0
        #: seconds between the last start and stop
        self.wall = 0.0

    def add(self, group: str, pids: Callable[[], Iterable[int]]) -> None:
        self._groups[group] = pids

    def _sample(self) -> dict[tuple[str, int], float]:
        return {(g, pid): cpu_seconds(pid) for g, pids in self._groups.items() for pid in pids()}

    def start(self) -> None:
        self._before = self._sample()
        self._started = time.monotonic()

    def stop(self) -> dict[str, dict[int, float]]:
        """Per group (every group added, even one with no process), per process: CPU seconds
        since :meth:`start`."""
        after = self._sample()
        self.wall = time.monotonic() - self._started
        spent: dict[str, dict[int, float]] = {group: {} for group in self._groups}
        for (group, pid), cpu in after.items():
            spent[group][pid] = cpu - self._before.get((group, pid), 0.0)
        return spent


def processes() -> Iterator[Proc]:
    """Every process, zombies included."""
    for proc in psutil.process_iter(["status"]):
        try:
            yield Proc(proc.pid, proc.info["status"], os.getsid(proc.pid))
        except (ProcessLookupError, PermissionError):
            continue  # gone since the listing


def live_pids(matches: Callable[[Proc], bool]) -> list[int]:
    return [p.pid for p in processes() if p.alive and matches(p)]


def session_pids(sid: int) -> list[int]:
    """Live processes of session ``sid``."""
    return live_pids(lambda p: p.session == sid)


def pids_with_env(entry: bytes) -> list[int]:
    """Live processes whose environment holds ``entry`` (``NAME=value``) exactly."""
    return live_pids(lambda p: entry in p.environ())


def pids_of_run(job: str, run_id: int) -> list[int]:
    """Live processes of one run of a job (its driver and what it started): those whose
    environment names the run (``DROVER_JOB``, ``DROVER_RUN_ID``, as every backend gives it)."""
    return [p.pid for p in _run_processes(job, run_id)]


def fencing_token_of_run(job: str, run_id: int) -> str | None:
    """The fencing token a run's driver holds (``DROVER_FENCING_TOKEN`` in its environment):
    what a test presents to a fence check, since the store keeps only its digest. None while no
    process of the run is alive (or readable)."""
    for proc in _run_processes(job, run_id):
        for entry in proc.environ():
            if entry.startswith(b"DROVER_FENCING_TOKEN="):
                return entry.split(b"=", 1)[1].decode()
    return None


def _run_processes(job: str, run_id: int) -> list[Proc]:
    entries = (f"DROVER_JOB={job}".encode(), f"DROVER_RUN_ID={run_id}".encode())
    found = []
    for proc in processes():
        if proc.alive:
            environ = proc.environ()
            if all(entry in environ for entry in entries):
                found.append(proc)
    return found


def pids_with_env_prefix(prefix: bytes) -> list[int]:
    """Live processes with an environment entry starting with ``prefix``."""
    return live_pids(lambda p: any(e.startswith(prefix) for e in p.environ()))


def pids_with_cmdline(fragment: bytes) -> list[int]:
    """Live processes whose command line contains ``fragment``."""
    return live_pids(lambda p: fragment in p.cmdline())


def signal_all(pids: Iterable[int], sig: signal.Signals = signal.SIGKILL) -> None:
    """Send ``sig`` to each of ``pids``; one already gone is no error (killing a driver's JVM
    can take its Python child with it before its own turn comes)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def kill_groups(pids: Iterable[int]) -> None:
    """SIGKILL the process group of each of ``pids`` (a Spark run and everything it forked); one
    already gone is no error."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)


def stop_session(proc: subprocess.Popen[bytes], grace: float = 60.0) -> None:
    """Stop a process started with ``start_new_session``: SIGTERM (a graceful stop), then SIGKILL
    to its whole session when it has not exited within ``grace`` seconds."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def terminate_like_interrupt() -> None:
    """From now on a SIGTERM to this process raises KeyboardInterrupt, as Ctrl-C does: a bench
    stopped by a timeout or ``kill`` runs its ``finally`` blocks and stops what it started (node
    processes, jobs on the clusters) instead of leaving them running."""
    signal.signal(signal.SIGTERM, _raise_interrupt)
