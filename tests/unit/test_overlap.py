"""The double-run checkers of the real-Spark tests: two live applications of one job across the
masters, a failed poll counted (never taken for "nothing live"), and a batch two runs committed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.overlap import MasterChecker, commits_by_run, double_commits
from pipelines.drover_runtime import record_commit


def _state(*apps: tuple[str, str]) -> dict[str, Any]:
    return {"activeapps": [{"id": app_id, "name": name} for app_id, name in apps]}


def test_two_live_applications_of_one_job_on_two_masters_are_an_overlap() -> None:
    states: dict[str, dict[str, Any]] = {
        "a": _state(("app-1", "job-app"), ("app-9", "someone-else")),
        "b": _state(),
    }
    checker = MasterChecker({"A": "a", "B": "b"}, {"job-app"}, read=lambda url: states[url])
    checker.poll_once()
    assert checker.overlaps == [] and checker.most == {"job-app": 1}
    states["b"] = _state(("app-2", "job-app"))
    checker.poll_once()
    assert [(o.name, sorted(o.apps)) for o in checker.overlaps] == [
        ("job-app", [("A", "app-1"), ("B", "app-2")])
    ]
    assert checker.most == {"job-app": 2} and checker.polls == 2
    assert len(checker.apps("job-app", "A")) == 1 and checker.live_now("job-app", "B")
    assert checker.apps("someone-else", "A") == []  # not watched


def test_a_failed_poll_is_counted_per_master_and_sees_nothing() -> None:
    def read(url: str) -> dict[str, Any]:
        if url == "a":
            raise ConnectionError("refused")
        return _state(("app-2", "job-app"))

    checker = MasterChecker({"A": "a", "B": "b"}, {"job-app"}, read=read)
    checker.poll_once()
    assert checker.failed == 1 and checker.failures == {"A": 1}
    assert "refused" in checker.last_error
    assert checker.overlaps == [] and checker.most == {"job-app": 1}


def test_a_batch_committed_by_two_runs_of_one_job_is_named(tmp_path: Path) -> None:
    log = str(tmp_path / "job")
    for batch, run in [(0, "1"), (1, "1"), (2, "1"), (2, "2"), (3, "2")]:
        record_commit(log, batch, run)
    assert double_commits([log]) == {2: {"1", "2"}}
    assert commits_by_run(log) == {"1": [0, 1, 2], "2": [2, 3]}
    assert double_commits([str(tmp_path / "missing")]) == {}
