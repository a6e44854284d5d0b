"""Stopping what a test or bench started (harness/procs.py), on real child processes."""

from __future__ import annotations

import subprocess
import sys

from harness.procs import kill_groups, stop_session


def session(code: str) -> subprocess.Popen[bytes]:
    """A Python child in a session of its own that prints 'ready' once it runs ``code``'s setup."""
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True
    )
    assert proc.stdout is not None
    with proc.stdout:
        assert proc.stdout.readline() == b"ready\n"
    return proc


def test_stop_session_ends_a_process_that_obeys_sigterm() -> None:
    proc = session("import time; print('ready', flush=True); time.sleep(600)")
    stop_session(proc, grace=60)
    assert proc.returncode == -15


def test_stop_session_kills_the_session_of_one_that_ignores_sigterm() -> None:
    proc = session(
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(600)"
    )
    stop_session(proc, grace=0.2)
    assert proc.returncode == -9


def test_stop_session_of_an_ended_process_does_nothing() -> None:
    proc = session("print('ready', flush=True)")
    proc.wait(timeout=30)
    stop_session(proc)
    assert proc.returncode == 0


def test_kill_groups_kills_each_group_and_ignores_the_gone() -> None:
    proc = session("import time; print('ready', flush=True); time.sleep(600)")
    gone = session("print('ready', flush=True)")
    gone.wait(timeout=30)
    kill_groups([gone.pid, proc.pid])
    assert proc.wait(timeout=30) == -9
