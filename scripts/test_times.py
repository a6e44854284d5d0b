"""Seconds per test module from pytest's JUnit XML reports, the longest first.

    python scripts/test_times.py var/test-reports/serial.xml [--top 25]

What ``heavy(minutes=N)`` in the e2e modules is set from (tests/conftest.py orders the serial
part by it): a module's time is the sum of its tests' set-up, call and tear-down as pytest
recorded them on the worker that ran it.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path


def module_seconds(report: Path) -> Counter[str]:
    """Module file (``tests/e2e/test_x.py``) -> seconds its tests took in ``report``."""
    seconds: Counter[str] = Counter()
    for case in ET.parse(report).getroot().iter("testcase"):
        # classname is the dotted module path, with a test class name after it if any
        parts = case.get("classname", "").split(".")
        while parts and parts[-1][:1].isupper():
            parts.pop()
        seconds["/".join(parts) + ".py"] += float(case.get("time", "0") or 0)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=25, help="modules to list (default 25)")
    args = parser.parse_args(argv)
    seconds: Counter[str] = Counter()
    for report in args.reports:
        if not report.is_file():
            print(f"test_times: no report {report}", file=sys.stderr)
            return 2
        seconds.update(module_seconds(report))
    total = sum(seconds.values())
    print(f"{total:.0f} s in {len(seconds)} modules; the longest:")
    for module, took in seconds.most_common(args.top):
        print(f"  {took:7.1f} s  {module}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
