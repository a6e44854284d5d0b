"""Starting a node's Ray: tried again when Ray gives up waiting for its raylet (a busy machine),
with the failed start's processes stopped first; any other error is the caller's at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest

from scheduler.actors import runtime
from scheduler.config import Settings

TIMED_OUT = (
    "The current node timed out during startup. This could happen because some of the raylet "
    "failed to startup or the GCS has become overloaded."
)


class FakeRay:
    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.inits = 0
        self.shutdowns = 0

    def init(self, **kwargs: Any) -> None:
        self.inits += 1
        assert kwargs["address"] == "local"
        if self.failures:
            raise self.failures.pop(0)

    def shutdown(self) -> None:
        self.shutdowns += 1


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(failures: list[Exception]) -> tuple[FakeRay, list[int]]:
        ray = FakeRay(failures)
        stopped: list[int] = []
        monkeypatch.setattr(runtime, "ray", ray)
        monkeypatch.setattr(runtime, "_stop_children", lambda: stopped.append(1))
        return ray, stopped

    return install


def test_a_raylet_that_registers_late_gets_another_start(fake: Any) -> None:
    ray, stopped = fake([Exception(TIMED_OUT), Exception(TIMED_OUT)])
    runtime.NodeRuntime(Settings(node_id="n1"))._start_ray()
    assert (ray.inits, ray.shutdowns, len(stopped)) == (3, 2, 2)


def test_the_last_attempt_fails_with_rays_own_error(fake: Any) -> None:
    ray, _ = fake([Exception(TIMED_OUT)] * runtime.RAY_START_ATTEMPTS)
    with pytest.raises(Exception, match="timed out during startup"):
        runtime.NodeRuntime(Settings(node_id="n1"))._start_ray()
    assert ray.inits == runtime.RAY_START_ATTEMPTS


def test_another_error_is_not_tried_again(fake: Any) -> None:
    ray, stopped = fake([ValueError("bad option")])
    with pytest.raises(ValueError, match="bad option"):
        runtime.NodeRuntime(Settings(node_id="n1"))._start_ray()
    assert (ray.inits, ray.shutdowns, stopped) == (1, 0, [])


def test_stop_children_stops_and_reaps_every_child_and_nothing_else() -> None:
    """In a process of its own: two children (one ignoring SIGTERM) are gone and reaped; the
    grandchild of an unrelated process is not touched."""
    script = textwrap.dedent(
        """
        import os, signal, subprocess, sys
        from scheduler.actors.runtime import _stop_children
        stubborn = subprocess.Popen(
            [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
             "signal.SIG_IGN); print('ready', flush=True); time.sleep(300)"],
            stdout=subprocess.PIPE)
        assert stubborn.stdout.readline().strip() == b"ready"
        plain = subprocess.Popen(["sleep", "300"])
        _stop_children(grace=1.0)
        for pid in (stubborn.pid, plain.pid):
            try:
                os.waitpid(pid, os.WNOHANG)
                raise SystemExit(f"{pid} was not reaped")
            except ChildProcessError:
                pass
        print("ok")
        """
    )
    outsider = subprocess.Popen(["sleep", "300"])
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr
        assert outsider.poll() is None
    finally:
        outsider.kill()
        outsider.wait(timeout=10)
