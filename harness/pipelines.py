"""What the test pipelines (``tests/e2e/pipelines``) leave behind, read by tests and benches alike
(no pytest here)."""

from __future__ import annotations

from pathlib import Path


def batch_files(out: Path) -> dict[int, int]:
    """batch id -> id of the run that committed it: the files ``batch_ids.py`` writes in ``out``
    (none yet: empty). A file being written is left for the next look."""
    found = {}
    for path in out.iterdir() if out.is_dir() else ():
        if path.name.isdigit():
            try:
                found[int(path.name)] = int(path.read_text().split()[0])
            except (IndexError, ValueError):
                continue
    return found
