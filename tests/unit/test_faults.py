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


def test_a_hold_holds_while_its_file_exists(tmp_path: Path, monkeypatch: Any) -> None:
    from scheduler.core import faults

    assert not faults.held("failover-checkpoint", "orders")  # no holds configured
    monkeypatch.setenv(faults.HOLDS_ENV, str(tmp_path))
    assert not faults.held("failover-checkpoint", "orders")  # no file
    (tmp_path / "failover-checkpoint@orders").touch()
    assert faults.held("failover-checkpoint", "orders")
    assert not faults.held("failover-checkpoint", "other")  # another job's hold
    (tmp_path / "failover-checkpoint@orders").unlink()
    assert not faults.held("failover-checkpoint", "orders")
