"""Check a recorded history again: ``python -m chaos.replay var/chaos/history.jsonl [--bound 90]``.

Prints the checker's summary; exits 1 when it finds a violation, 2 when the file is unreadable.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from chaos import history
from chaos.checker import check


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("history")
    parser.add_argument("--bound", type=float, default=90.0, help="convergence bound, seconds")
    args = parser.parse_args(argv)
    try:
        recorded = history.read(Path(args.history))
    except (OSError, ValueError) as exc:
        print(f"chaos.replay: {exc}", file=sys.stderr)
        return 2
    report = check(recorded, args.bound)
    print(report.summary())
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
