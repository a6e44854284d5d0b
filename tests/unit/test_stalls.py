"""Streaming progress and stalls, the pure decisions (scheduler/decisions/stalls.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.core.states import OnStall
from scheduler.decisions.stalls import (
    START_CHECK,
    ProgressReport,
    ProgressStatus,
    StallPolicy,
    decide_stall,
    effective_stall_after,
    merge,
    parse_report,
    progress_status,
    shown_status,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_parse_a_runtime_report() -> None:
    raw = json.dumps(
        {"v": 1, "batch": 12, "id": 11, "rows": 500, "in": 250.0, "proc": 410.5, "dur": 1210,
         "ts": "2026-11-24T21:48:31.643Z", "gap": 2000, "new": "ignored"}
    )  # fmt: skip
    report = parse_report(raw)
    assert report == ProgressReport(
        12, 11, 500, 250.0, 410.5, 1210, "2026-11-24T21:48:31.643Z", 2000
    )
    assert report.committed == 11


@pytest.mark.parametrize(
    "raw",
    [
        "not json",
        "[]",
        "{}",
        '{"batch": "x"}',
        '{"batch": -3}',
        '{"batch": 1, "rows": -1}',
        '{"batch": 1, "in": 1e400}',
        '{"batch": 1, "v": 2}',
        '{"batch": true}',
        "{" + '"batch": 1, "ts": "' + "x" * 50 + '"}',
        '{"batch": 1, "pad": "' + "x" * 2000 + '"}',
    ],
)
def test_malformed_reports_are_refused(raw: str) -> None:
    with pytest.raises(ValueError):
        parse_report(raw)


def test_merge_moves_the_heartbeat_only_on_progress() -> None:
    start = merge(None, ProgressReport(START_CHECK), run_id=1, job_id=2, now=at(0))
    assert (start.batch_id, start.declared_at, start.heartbeat_at) == (None, at(0), at(0))
    first = merge(start, ProgressReport(1, 0, 10, 5.0, 9.0, 800, "ts0"), run_id=1, job_id=2,
                  now=at(3))  # fmt: skip
    assert (first.batch_id, first.heartbeat_at, first.rows) == (0, at(3), 10)
    same = merge(first, ProgressReport(1, 0, 10, 5.0, 9.0, 800, "ts0"), run_id=1, job_id=2,
                 now=at(9))  # fmt: skip
    assert same.heartbeat_at == at(3) and same.reported_at == at(9) and same.reports == 3
    idle = merge(same, ProgressReport(-1, 0, 0, 0.0, 0.0, 5, "ts1"), run_id=1, job_id=2,
                 now=at(20))  # fmt: skip
    assert idle.heartbeat_at == at(20) and idle.rows == 0  # an idle trigger is movement
    late = merge(idle, ProgressReport(0), run_id=1, job_id=2, now=at(21))
    assert late.batch_id == 0 and late.heartbeat_at == at(20)


@given(st.lists(st.integers(min_value=0, max_value=50), min_size=1, max_size=30))
def test_the_committed_batch_never_goes_back(batches: list[int]) -> None:
    record = None
    seen = -1
    for i, batch in enumerate(batches):
        record = merge(record, ProgressReport(batch), run_id=1, job_id=1, now=at(i))
        if batch > 0:
            seen = max(seen, batch - 1)
        assert record.batch_id == (seen if seen >= 0 else None)


def test_effective_threshold() -> None:
    policy = StallPolicy(minimum=60, triggers=5)
    assert effective_stall_after(30, 2000, policy) == 30
    assert effective_stall_after(None, None, policy) == 60
    assert effective_stall_after(None, 2000, policy) == 60
    assert effective_stall_after(None, 30_000, policy) == 150


def test_stall_and_recovery() -> None:
    record = merge(None, ProgressReport(3, 2, 7), run_id=1, job_id=1, now=at(0))
    kwargs = {"stall_after": 10.0, "run_started_at": at(-5)}
    assert progress_status(True, record, now=at(9), **kwargs) == ProgressStatus.PROGRESSING
    assert progress_status(True, record, now=at(11), **kwargs) == ProgressStatus.STALLED
    assert progress_status(False, record, now=at(11), **kwargs) == ProgressStatus.PROGRESSING
    change = decide_stall(running=True, progress=record, now=at(11), **kwargs)
    assert change is not None and change.kind == "stalled" and not change.restart
    assert "no progress for 11 s" in change.reason
    marked = record.__class__(**{**record.__dict__, "stalled_since": at(11)})
    assert decide_stall(running=True, progress=marked, now=at(12), **kwargs) is None
    assert shown_status(marked) == ProgressStatus.STALLED
    moved = merge(marked, ProgressReport(4, 3, 7), run_id=1, job_id=1, now=at(13))
    back = decide_stall(running=True, progress=moved, now=at(13), **kwargs)
    assert back is not None and back.kind == "recovered"
    stopped = decide_stall(running=False, progress=marked, now=at(30), **kwargs)
    assert stopped is not None and stopped.kind == "recovered"


def test_a_slow_start_is_not_a_stall() -> None:
    record = merge(None, ProgressReport(START_CHECK), run_id=1, job_id=1, now=at(0))
    # RUNNING only since 100 s: the quiet time counts from then
    assert decide_stall(running=True, progress=record, stall_after=10, run_started_at=at(100),
                        now=at(105)) is None  # fmt: skip
    assert progress_status(True, record, stall_after=10, run_started_at=at(100), now=at(105)) == (
        ProgressStatus.STARTING
    )


def test_no_reports_is_never_a_stall() -> None:
    assert progress_status(True, None, stall_after=1, run_started_at=at(0), now=at(999)) == (
        ProgressStatus.NO_REPORTS
    )
    assert decide_stall(running=True, progress=None, stall_after=1, run_started_at=at(0),
                        now=at(999)) is None  # fmt: skip


def test_restart_by_policy_within_its_budget() -> None:
    record = merge(None, ProgressReport(3), run_id=1, job_id=1, now=at(0))
    common = {"running": True, "progress": record, "stall_after": 5.0, "run_started_at": None,
              "now": at(60), "on_stall": OnStall.RESTART, "max_restarts": 2}  # fmt: skip
    assert decide_stall(restarts_in_window=1, **common).restart  # type: ignore[arg-type, union-attr]
    spent = decide_stall(restarts_in_window=2, **common)  # type: ignore[arg-type]
    assert spent is not None and not spent.restart and "not restarted" in spent.reason
