"""A PATCH with the ETag just read succeeds while the job moves through its states: state
changes never move the spec version (SQLite and MariaDB).

The reconciler (in process, with a fixed claim) drives a job on the simulated standalone cluster
(``harness/simcluster.py``: the Spark REST submission server and master ``/json/`` on a loopback
port) from QUEUED to RUNNING; between every read of the job through the API and the PATCH with
the ETag that read returned, the reconciler ticks and moves the job. The ETag is the spec
version, which those moves never touch, so every PATCH lands; before ``spec_version`` existed
each of them failed with 412.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from harness.simcluster import SimCluster
from scheduler.config import Settings
from scheduler.store import journal
from scheduler.store.db import Store
from tests.support.simulated import claiming_reconciler, register_sim

pytestmark = pytest.mark.integration

DEADLINE = 30.0  # seconds for the simulated application to reach RUNNING


def test_a_patch_with_the_etag_just_read_succeeds_while_the_job_starts(
    store: Store, settings: Settings, client: TestClient, sim: SimCluster, tmp_path: Path
) -> None:
    register_sim(client, sim, tmp_path / "checkpoints")
    job = {
        "name": "orders",
        "entrypoint": "/opt/pipelines/p.py",
        "group": "g",
        "desired_state": "RUNNING",
    }
    created = client.post("/v1/jobs", json=job)
    assert created.status_code == 201 and created.headers["etag"] == '"1"'
    reconciler = claiming_reconciler(store, settings)

    states: list[str] = []
    moved_under_the_etag = 0
    deadline = time.monotonic() + DEADLINE
    while True:
        read = client.get("/v1/jobs/orders")
        seen = read.json()
        if not states or states[-1] != seen["state"]:
            states.append(seen["state"])
        if seen["state"] == "RUNNING" and moved_under_the_etag >= 2:
            break
        assert time.monotonic() < deadline, f"the job did not start: {states}"
        assert read.headers["etag"] == f'"{seen["spec_version"]}"'
        reconciler.tick()  # the scheduler moves the job between the operator's read and write
        moved = client.get("/v1/jobs/orders").json()
        patch = client.patch(
            "/v1/jobs/orders",
            # labels: a change that does not touch the running application (args would be an
            # upgrade, which replaces the run: tests/integration/test_upgrades.py)
            json={"labels": {"read-at": seen["state"].lower(), "version": str(seen["version"])}},
            headers={"If-Match": read.headers["etag"]},
        )
        assert patch.status_code == 200, (states, patch.text)
        after = patch.json()
        assert after["spec_version"] == seen["spec_version"] + 1
        assert after["state"] == moved["state"]  # the PATCH changed the spec, not the state
        if moved["version"] != seen["version"]:
            moved_under_the_etag += 1  # the row moved: an If-Match on `version` would be a 412
        if seen["state"] != "RUNNING":
            time.sleep(0.05)  # pace the ticks while the simulated application starts

    print(f"\nstates seen: {states}; the row moved under the ETag {moved_under_the_etag} times")
    assert states[0] == "QUEUED" and states[-1] == "RUNNING"
    assert "STARTING" in states or "SUBMITTING" in states, states
    # the spec changes wait for the next run: still one run, one application
    runs = client.get("/v1/jobs/orders/runs").json()
    assert len(runs["data"]) == 1 and len(sim.live_apps()) == 1
    # an ETag from before a spec change is still refused
    stale = client.patch("/v1/jobs/orders", json={"team": "x"}, headers={"If-Match": '"1"'})
    assert stale.status_code == 412
    assert stale.headers["content-type"] == "application/problem+json"
    # commands check the spec version too, and do not move it
    final = client.get("/v1/jobs/orders")
    stopped = client.post("/v1/jobs/orders/stop", headers={"If-Match": final.headers["etag"]})
    assert stopped.status_code == 202, stopped.text
    assert stopped.json()["spec_version"] == final.json()["spec_version"]
    assert stopped.json()["version"] > final.json()["version"]
    assert stopped.headers["etag"] == final.headers["etag"]
    with store.session() as s:
        events, _ = journal.list_events(s, "orders", limit=1000)
    assert sum("spec changed" in e.message for e in events) == len(
        [e for e in events if e.cause.startswith("api:update")]
    )
