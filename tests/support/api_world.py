"""A test world of the API on a real store with the real reconciler of one group on fake
clusters: what the integration tests of operations and failovers drive."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from scheduler.core.backend import app_name_for
from scheduler.core.clock import utcnow
from scheduler.core.ledger import Backends
from scheduler.core.ownership import Claim, Fence
from scheduler.decisions.planning import RestartPolicy
from scheduler.loops.operations import Executor
from scheduler.loops.reconciler import Reconciler
from scheduler.store.db import Store
from scheduler.store.ledger import SqlLedger


class ReconcilerWorld:
    """Calls the API through ``client``; ticks the reconciler of ``group`` of a node under an
    epoch (one a node and epoch, made on first use, on the world's clock :meth:`now`)."""

    store: Store
    client: TestClient
    backends: Backends
    reconcilers: dict[str, Reconciler]
    group = "g"

    def now(self) -> datetime:
        return utcnow()

    def reconciler(self, node: str = "n1", epoch: int = 1) -> Reconciler:
        key = f"{node}/{epoch}"
        if key not in self.reconcilers:
            ledger = SqlLedger(self.store, node_id=node, app_name_for=app_name_for)
            self.reconcilers[key] = Reconciler(
                ledger,
                self.backends,
                node_id=node,
                group=self.group,
                claim=lambda: Claim(self.group, Fence(node, epoch), 0, 1),
                policy=RestartPolicy(),
                unknown_after_polls=1,
                submit_workers=2,
                clock=self.now,
            )
        return self.reconcilers[key]

    def tick(self) -> None:
        self.reconciler().tick()

    def job(self, name: str) -> dict[str, Any]:
        response = self.client.get(f"/v1/jobs/{name}")
        assert response.status_code == 200, response.text
        return dict(response.json())

    def create_running(self, jobs: dict[str, dict[str, Any]], *, ticks: int) -> None:
        """Create ``jobs`` (name: the rest of the body) in the world's group, desired RUNNING,
        and tick (at most ``ticks`` times) until every one of them is RUNNING."""
        for name, fields in jobs.items():
            body = {"name": name, "group": self.group, **fields, "desired_state": "RUNNING"}
            response = self.client.post("/v1/jobs", json=body)
            assert response.status_code == 201, response.text
        for _ in range(ticks):
            self.tick()
            if all(self.job(n)["state"] == "RUNNING" for n in jobs):
                break
        assert {n: self.job(n)["state"] for n in jobs} == dict.fromkeys(jobs, "RUNNING")

    def drive(
        self, executor: Executor, claim: Claim, path: str, *, rounds: int = 30
    ) -> dict[str, Any]:
        """Executor rounds and reconciler ticks until the operation whose document is at
        ``path`` ends (the test fails if it has not after ``rounds``); that document."""
        for _ in range(rounds):
            executor.round({self.group: claim})
            self.tick()
            response = self.client.get(path)
            assert response.status_code == 200, response.text
            if response.json()["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                return dict(response.json())
        pytest.fail(f"{path} did not end: {self.client.get(path).json()}")

    def runs(self, name: str) -> list[dict[str, Any]]:
        return list(self.client.get(f"/v1/jobs/{name}/runs").json()["data"])
