"""Reading what the test pipelines leave behind (harness/pipelines.py)."""

from __future__ import annotations

from pathlib import Path

from harness.pipelines import batch_files


def test_batch_files_maps_each_batch_to_the_run_that_committed_it(tmp_path: Path) -> None:
    assert batch_files(tmp_path / "not-yet") == {}
    (tmp_path / "000000").write_text("7 2\n")
    (tmp_path / "000001").write_text("9 2\n")
    (tmp_path / "000002").write_text("")  # being written: left for the next look
    (tmp_path / ".000003.tmp").write_text("9 2\n")
    assert batch_files(tmp_path) == {0: 7, 1: 9}
