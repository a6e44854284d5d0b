"""Request ids (``api.metrics.new_request_id``): 32 hex digits like a UUID's, never repeated in a
process, different between processes (a random half)."""

from __future__ import annotations

import re
import subprocess
import sys

from api.metrics import new_request_id


def test_request_ids_are_unique_hex() -> None:
    ids = [new_request_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)


def test_processes_have_their_own_ids() -> None:
    code = "from api.metrics import new_request_id; print(new_request_id())"
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert other[:16] != new_request_id()[:16]
