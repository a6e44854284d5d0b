"""Bulk operations against a simulated Spark standalone cluster (``harness/simcluster.py``, the
real standalone backend over HTTP), with the real store, reconciler and executor: a rolling
restart of 24 jobs by label keeps at most ``parallelism`` jobs restarting at once, gives each job
exactly one new application and never two live ones; a bulk stop by name prefix leaves no
application of the selected jobs and the others' untouched."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import NodeContext
from harness.simcluster import SimCluster
from scheduler.config import Settings
from scheduler.decisions.operations import failover as fo
from scheduler.loops.operations import Executor
from scheduler.loops.replication import ReplicaCheckpoints
from scheduler.store.db import Store
from scheduler.store.operations_ledger import SqlOperationsLedger
from tests.support.simulated import claiming_reconciler, fixed_claim, register_sim

pytestmark = pytest.mark.integration

GROUP = "g"
JOBS = 24
PARALLELISM = 4
DEADLINE = 120.0  # seconds for a whole operation on the simulator


SIM_START_DELAY = 0.2  # seconds a simulated application takes to start


def live_per_job(sim: SimCluster) -> Counter[str]:
    """Live drivers per job, from the simulator's own view (the run tag names the job)."""
    return Counter(d["tag"].split(":")[1] for d in sim.drivers() if d["alive"] and d["tag"])


def test_rolling_restart_and_stop_on_a_simulated_cluster(
    store: Store, settings: Settings, admin_headers: dict[str, str], sim: SimCluster, tmp_path: Path
) -> None:
    client = TestClient(
        create_app(NodeContext(settings, store)), base_url="http://127.0.0.1", headers=admin_headers
    )
    register_sim(client, sim, tmp_path / "checkpoints", GROUP)
    names = [f"{'etl' if n % 2 else 'web'}-{n:02d}" for n in range(JOBS)]
    for n, name in enumerate(names):
        body = {
            "name": name,
            "entrypoint": "/opt/pipelines/p.py",
            "group": GROUP,
            "priority": ("high", "normal", "low")[n % 3],
            "labels": {"tier": "gold" if n % 4 == 0 else "silver"},
            "desired_state": "RUNNING",
        }
        assert client.post("/v1/jobs", json=body).status_code == 201
    claim = fixed_claim(settings, GROUP)
    reconciler = claiming_reconciler(store, settings, GROUP)
    executor = Executor(
        SqlOperationsLedger(store, node_id=settings.node_id),
        node_id=settings.node_id,
        timing=fo.Timing(drain_timeout=60, start_timeout=60),
        checkpoints=ReplicaCheckpoints(store),
    )

    def states() -> dict[str, str]:
        page = client.get("/v1/jobs", params={"limit": 1000}).json()["data"]
        return {j["name"]: j["state"] for j in page}

    def run(operation: int) -> tuple[dict[str, Any], int]:
        """Rounds and ticks until ``operation`` ends; the most items WAITING at once."""
        most = 0
        deadline = time.monotonic() + DEADLINE
        while True:
            executor.round({GROUP: claim})
            reconciler.tick()
            op = client.get(f"/v1/operations/{operation}").json()
            most = max(most, op["counts"].get("WAITING", 0))
            assert max(live_per_job(sim).values(), default=0) <= 1, live_per_job(sim)
            if op["state"] in ("SUCCEEDED", "FAILED", "CANCELLED"):
                return op, most
            assert time.monotonic() < deadline, op["counts"]
            time.sleep(0.05)

    try:
        deadline = time.monotonic() + DEADLINE
        while set(states().values()) != {"RUNNING"}:
            reconciler.tick()
            assert time.monotonic() < deadline, Counter(states().values())
            time.sleep(0.05)
        assert sim.creates == JOBS

        silver = [n for i, n in enumerate(names) if i % 4 != 0]
        op = client.post(
            "/v1/operations",
            json={"kind": "restart", "selector": {"labels": ["tier=silver"]},
                  "parallelism": PARALLELISM},
        )  # fmt: skip
        assert op.status_code == 201, op.text
        assert [i["job"] for i in op.json()["items"]][:3] == sorted(
            n for i, n in enumerate(names) if i % 4 != 0 and i % 3 == 0
        )[:3]  # priority high first, then by name
        done, most = run(op.json()["id"])
        assert done["state"] == "SUCCEEDED" and done["counts"] == {"DONE": len(silver)}, done
        assert 1 <= most <= PARALLELISM, most  # a rolling restart
        assert sim.creates == JOBS + len(silver)  # each restarted job: exactly one new submission
        for name in names:
            runs = client.get(f"/v1/jobs/{name}/runs").json()["data"]
            assert len(runs) == (2 if name in silver else 1), (name, runs)
        assert live_per_job(sim) == Counter(dict.fromkeys(names, 1))

        stop = client.post(
            "/v1/operations", json={"kind": "stop", "selector": {"name_prefix": "etl-"}}
        )
        assert stop.status_code == 201, stop.text
        done, _ = run(stop.json()["id"])
        assert done["state"] == "SUCCEEDED", done
        final = states()
        assert {final[n] for n in names if n.startswith("etl-")} == {"STOPPED"}
        assert {final[n] for n in names if n.startswith("web-")} == {"RUNNING"}
        live = live_per_job(sim)
        assert not [n for n in live if n.startswith("etl-")] and len(live) == JOBS // 2
    finally:
        executor.close()
        reconciler.close()
        client.close()
