"""Real Drover node processes for end-to-end tests: ``harness/nodes.py``'s NodeProcess (start,
stop, kill -9, freeze, thaw, get/post), failing the test instead of raising on a deadline."""

from __future__ import annotations

from typing import Any

import pytest

from harness.nodes import DROVER, free_port, session_pids
from harness.nodes import NodeProcess as _NodeProcess

__all__ = ["DROVER", "NodeProcess", "free_port", "owners", "session_pids"]


class NodeProcess(_NodeProcess):
    def wait_ready(self, timeout: float = 120.0) -> None:
        try:
            super().wait_ready(timeout)
        except (TimeoutError, RuntimeError) as exc:
            pytest.fail(str(exc), pytrace=False)


def owners(node: NodeProcess, group: str | None = None) -> dict[str, str | None]:
    """job name -> owner, as the store says (read through any node's API)."""
    params: dict[str, Any] = {"limit": 1000}
    if group is not None:
        params["group"] = group
    page = node.get("/v1/jobs", **params)
    return {job["name"]: job["owner"] for job in page["data"]}
