"""The bench suite's results: targets, the flat JSON object and the Markdown table."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from bench import suite, targets


def test_targets_compare_with_numbers_and_other_figures() -> None:
    ratio = targets.TARGET_OF["steady_tick_ratio_10k_to_1k"]
    assert ratio.met({"steady_tick_ratio_10k_to_1k": 1.4}) is True
    assert ratio.met({"steady_tick_ratio_10k_to_1k": 2.5}) is False
    assert ratio.met({}) is None  # not measured is not a pass
    assert ratio.met({"steady_tick_ratio_10k_to_1k": math.nan}) is None
    owned = targets.TARGET_OF["takeover_kill9_1k_owned_s"]
    assert owned.text() == "<= session_timeout_s + 2"
    assert owned.met({"takeover_kill9_1k_owned_s": 3.9, "session_timeout_s": 2.0}) is True
    assert owned.met({"takeover_kill9_1k_owned_s": 4.1, "session_timeout_s": 2.0}) is False
    assert owned.met({"takeover_kill9_1k_owned_s": 3.0}) is None  # no session timeout
    restarts = targets.TARGET_OF["rolling_restart_app_restarts"]
    assert restarts.met({"rolling_restart_app_restarts": 0}) is True
    assert restarts.met({"rolling_restart_app_restarts": 1}) is False
    real = targets.TARGET_OF["failover_real_succeeded"]
    assert real.met({"failover_real_succeeded": True}) is True
    assert real.met({"failover_real_succeeded": False}) is False
    get_ratio = targets.TARGET_OF["api_get_ratio_to_bare"]
    assert get_ratio.text() == ">= 0.5"
    assert get_ratio.met({"api_get_ratio_to_bare": 0.5}) is True
    assert get_ratio.met({"api_get_ratio_to_bare": 0.49}) is False


def test_the_api_bench_prints_the_suites_targets() -> None:
    """bench/api.py's "target" columns and its verdict come from the suite's list, so the two
    cannot disagree."""
    from bench import api

    def bounds(endpoint: str) -> tuple[float | str, float | str | None]:
        ratio, p99 = api.targets(endpoint)
        return ratio.bound, None if p99 is None else p99.bound

    assert {e: bounds(e) for e in api.ENDPOINTS} == {
        "get": (0.5, 25.0),
        "list": (0.3, 50.0),
        "create": (0.3, None),
    }


def test_results_are_one_flat_object_and_a_table(tmp_path: Path) -> None:
    figures = {
        "bench_mode": "quick",
        "bench_commit": "abc1234",
        "step_controlplane_at": "2026-11-25T01:00:00+00:00",
        "step_controlplane_s": 12.5,
        "step_controlplane_commit": "abc1234",
        "step_api_error": "RuntimeError: boom | pipe",
        "step_api_at": "2026-11-25T01:01:00+00:00",
        "steady_tick_ratio_10k_to_1k": 1.23456,
        "node_rss_mib": 812.0,
        "scale_50k_full_pass_s": math.inf,
    }
    suite.write_results(figures, tmp_path)
    data = json.loads((tmp_path / "latest.json").read_text())
    assert all(not isinstance(v, dict | list) for v in data.values())
    assert data["steady_tick_ratio_10k_to_1k"] == 1.2346
    assert data["scale_50k_full_pass_s"] is None  # JSON has no infinity
    table = (tmp_path / "latest.md").read_text()
    assert "| `steady_tick_ratio_10k_to_1k` | 1.23 | <= 2 | yes | issue 8 |" in table
    assert "| `node_rss_mib` | 812 | <= 700 | **NO** | issue 8 |" in table
    assert "| `scale_50k_all_running_s` | – | <= 120 | not measured | issue 8 |" in table
    assert "| controlplane | 2026-11-25T01:00:00+00:00 | `abc1234` | – | 12.5 |  |" in table
    assert "RuntimeError: boom / pipe" in table
    assert "`bench_mode`" not in table  # run metadata is in the header, not the figures


def test_step_selection() -> None:
    full = [s.name for s in suite.select_steps("", quick=False)]
    quick = [s.name for s in suite.select_steps("", quick=True)]
    assert full == [s.name for s in suite.STEPS]
    assert set(quick) < set(full) and "scale_50k" not in quick and "takeover_10k" not in quick
    assert [s.name for s in suite.select_steps("submit, controlplane", quick=True)] == [
        "controlplane",
        "submit",
    ]
    with pytest.raises(ValueError, match="unknown steps"):
        suite.select_steps("nope", quick=False)


def test_combine_takes_each_step_from_its_latest_run(tmp_path: Path) -> None:
    first = {
        "bench_commit": "aaa",
        "step_scale_50k_at": "t1",
        "step_scale_50k_error": "interrupted",
        "step_takeover_10k_at": "t1",
        "step_takeover_10k_s": 200.0,
        "takeover_kill9_10k_s": 13.0,
    }
    second = {
        "bench_commit": "bbb",
        "step_scale_50k_at": "t2",
        "step_scale_50k_commit": "bbb",
        "step_scale_50k_s": 300.0,
        "scale_50k_all_running_s": 150.0,
    }
    for name, data in (("1.json", first), ("2.json", second)):
        (tmp_path / name).write_text(json.dumps(data))
    combined = suite.combine([tmp_path / "1.json", tmp_path / "2.json"])
    assert "step_scale_50k_error" not in combined  # the rerun replaced the interrupted run
    assert combined["step_scale_50k_commit"] == "bbb"
    assert combined["step_takeover_10k_commit"] == "aaa"  # from its own run
    assert combined["takeover_kill9_10k_s"] == 13.0 and combined["scale_50k_all_running_s"] == 150.0
    assert combined["bench_total_s"] == 500.0


def test_the_lock_goes_to_a_waiter_between_steps(tmp_path: Path) -> None:
    """Held past ``hold_s``, the suite lets a process waiting for the lock have it first."""
    path = str(tmp_path / "heavy.lock")
    lock = suite.HeavyLock(path, hold_s=0.0)
    lock.before_step()
    other = subprocess.Popen(["flock", "-o", path, "sleep", "0.5"])
    try:
        lock.before_step()  # released, the other one ran, taken again
        # it has let go of the lock; its exit may take a moment more (it cannot run on while
        # the lock is ours, so a wait that ends here means it ran before we took it back)
        assert other.wait(timeout=10) == 0
    finally:
        lock.release()
        other.wait(timeout=30)
