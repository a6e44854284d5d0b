"""Fault injection is inert by default, fires where named, and only once with a once-file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

CODE = "from scheduler.core import faults; faults.hit('after-submit'); print('went on')"


def _run(env_value: str | None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin"}
    if env_value is not None:
        env["DROVER_FAULTS"] = env_value
    return subprocess.run(
        [sys.executable, "-c", CODE],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )


def test_inert_unless_named() -> None:
    assert _run(None).stdout.strip() == "went on"
    assert _run("other-point").stdout.strip() == "went on"


def test_fires_once_with_a_once_file(tmp_path: Path) -> None:
    once = tmp_path / "once"
    first = _run(f"after-submit:{once}")
    assert first.returncode == 97 and first.stdout == ""
    assert once.exists()
    assert _run(f"after-submit:{once}").stdout.strip() == "went on"


def test_a_hold_blocks_while_its_file_exists(tmp_path: Path, monkeypatch: Any) -> None:
    import threading
    import time

    from scheduler.core import faults

    assert faults.hold("failover-checkpoint", "orders") == 0.0  # no holds configured
    monkeypatch.setenv(faults.HOLDS_ENV, str(tmp_path))
    assert faults.hold("failover-checkpoint", "orders") < 0.05  # no file: goes on
    (tmp_path / "failover-checkpoint@orders").touch()
    assert faults.hold("failover-checkpoint", "other") < 0.05  # another job's hold
    threading.Timer(0.3, (tmp_path / "failover-checkpoint@orders").unlink).start()
    started = time.monotonic()
    held = faults.hold("failover-checkpoint", "orders")
    assert 0.25 < held < 2 and time.monotonic() - started < 2
