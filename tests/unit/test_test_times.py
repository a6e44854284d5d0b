"""scripts/test_times.py: seconds per module from pytest's JUnit XML."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "test_times.py"
REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.e2e.test_a" name="test_one" time="120.5"/>
<testcase classname="tests.e2e.test_a" name="test_two" time="30.0"/>
<testcase classname="tests.integration.test_b.TestGroup" name="test_three" time="4.25"/>
<testcase classname="tests.integration.test_b" name="test_four" time=""/>
</testsuite></testsuites>
"""


def load():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("test_times", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_seconds_are_summed_per_module_file_with_classes_folded_in(tmp_path: Path) -> None:
    report = tmp_path / "serial.xml"
    report.write_text(REPORT)
    seconds = load().module_seconds(report)
    assert seconds == {"tests/e2e/test_a.py": 150.5, "tests/integration/test_b.py": 4.25}


def test_the_longest_modules_print_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "serial.xml"
    report.write_text(REPORT)
    assert load().main([str(report), "--top", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["155 s in 2 modules; the longest:", "    150.5 s  tests/e2e/test_a.py"]


def test_a_missing_report_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert load().main([str(tmp_path / "none.xml")]) == 2
    assert capsys.readouterr().err == f"test_times: no report {tmp_path / 'none.xml'}\n"
