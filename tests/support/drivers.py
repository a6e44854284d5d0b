"""The Python drivers of pipelines a test keeps in its own folder, as the test ends; the tail of a
local run's driver log, for a failure message."""

from __future__ import annotations

from pathlib import Path

from harness.nodes import poll
from harness.procs import pids_with_cmdline, signal_all


def reap_drivers(folder: Path, *, timeout: float) -> None:
    """Wait until no process's command line names ``folder`` (a Python driver of a pipeline kept
    there exits by itself once Spark's kill stopped its driver JVM); whatever is left at the
    deadline is killed, and the TimeoutError fails the test."""
    fragment = str(folder).encode()
    try:
        poll(
            lambda: not pids_with_cmdline(fragment),
            timeout=timeout,
            interval=0.1,
            what="the Python drivers to exit after the kill",
        )
    finally:
        signal_all(pids_with_cmdline(fragment))


def log_tail(run_dir: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of the ``driver.log`` in a local run's folder ``run_dir``."""
    try:
        text = (run_dir / "driver.log").read_text(errors="replace")
    except FileNotFoundError:
        return f"(no driver.log in {run_dir})"
    return "driver.log tail:\n" + "\n".join(text.splitlines()[-lines:])
