"""What the failover e2e tests look at through the API, whatever the clusters (standalone or
YARN): an automatic failover created by a group's policy, every job RUNNING on the target, the
steps an item went through."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol


class ApiWorld(Protocol):
    """A test module's world as these helpers use it: the API of a live node, and a wait that
    fails the test (with the nodes' logs) at its deadline."""

    def get(self, path: str, **params: Any) -> Any: ...

    def job(self, name: str) -> dict[str, Any]: ...

    def wait(self, condition: Callable[[], Any], timeout: float, what: str) -> Any: ...


def steps_of(item: dict[str, Any]) -> list[str]:
    """The steps an item went through (a note within a step is not another step)."""
    steps: list[str] = []
    for entry in item["history"]:
        if not steps or steps[-1] != entry["step"]:
            steps.append(entry["step"])
    return steps


def running_on(w: ApiWorld, name: str, cluster: str) -> bool:
    """The job is RUNNING on ``cluster``, with its current run there."""
    job = w.job(name)
    run = job["current_run"] or {}
    return bool(
        job["cluster"] == cluster and job["state"] == "RUNNING" and run.get("cluster") == cluster
    )


def automatic_failover(
    w: ApiWorld, source: str, since: float, seen: set[int], timeout: float = 90.0
) -> dict[str, Any]:
    """The automatic failover of ``source`` created by drover:auto-failover and not in ``seen``
    (waits for it; adds it to ``seen``)."""

    def created() -> dict[str, Any] | None:
        for op in w.get("/v1/failovers", limit=50)["data"]:
            if op["created_by"] == "drover:auto-failover" and op["source"] == source:
                if op["id"] not in seen:
                    return dict(op)
        return None

    found = w.wait(created, timeout, f"an automatic failover of {source}")
    op: dict[str, Any] = w.get(f"/v1/failovers/{found['id']}")
    seen.add(op["id"])
    print(f"automatic failover {op['id']} created {time.monotonic() - since:.1f} s after")
    return op


def wait_all_running(
    w: ApiWorld, names: list[str], cluster: str, since: float, timeout: float
) -> dict[str, float]:
    """Seconds from ``since`` until each job was RUNNING on ``cluster`` (polled every 0.25 s)."""
    seen: dict[str, float] = {}

    def all_there() -> bool:
        for name in names:
            if name not in seen and running_on(w, name, cluster):
                seen[name] = time.monotonic() - since
        return len(seen) == len(names)

    w.wait(all_there, timeout, f"every job RUNNING on {cluster}")
    return seen
