"""Reading /proc: the processes of a session, or those carrying an environment entry or a
command-line fragment. One place for benches and tests (no pytest here)."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Proc:
    pid: int
    #: one letter, as in ``ps``: R, S, D, T (stopped), Z (zombie), ...
    state: str
    session: int

    @property
    def alive(self) -> bool:
        return self.state != "Z"

    def environ(self) -> list[bytes]:
        """``NAME=value`` entries ([] when the process is gone or not readable)."""
        try:
            return Path(f"/proc/{self.pid}/environ").read_bytes().split(b"\0")
        except OSError:
            return []

    def cmdline(self) -> bytes:
        try:
            return Path(f"/proc/{self.pid}/cmdline").read_bytes()
        except OSError:
            return b""


def cpu_seconds(pid: int) -> float:
    """User and system CPU ``pid`` has used so far (0.0 when it is gone)."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return 0.0
    fields = raw[raw.rindex(b")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def processes() -> Iterator[Proc]:
    """Every process in /proc, zombies included."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            raw = Path(entry.path, "stat").read_bytes()
        except OSError:
            continue
        fields = raw[raw.rindex(b")") + 2 :].split()
        yield Proc(int(entry.name), fields[0].decode(), int(fields[3]))


def live_pids(matches: Callable[[Proc], bool]) -> list[int]:
    return [p.pid for p in processes() if p.alive and matches(p)]


def session_pids(sid: int) -> list[int]:
    """Live processes of session ``sid``."""
    return live_pids(lambda p: p.session == sid)


def pids_with_env(entry: bytes) -> list[int]:
    """Live processes whose environment holds ``entry`` (``NAME=value``) exactly."""
    return live_pids(lambda p: entry in p.environ())


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
