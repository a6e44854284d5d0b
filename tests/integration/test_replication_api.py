"""Replication in the REST API (SQLite and MariaDB): the ``replicate`` field of a job, and the
replica with its lag figures in ``GET /v1/jobs/{name}``, ``GET /v1/jobs/{name}/replication`` and
``GET /v1/replication``. The replica is made by a real replicator round over checkpoint
directories written like Spark's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from api.app import create_app
from api.deps import NodeContext
from scheduler.config import Settings
from scheduler.core.clock import utcnow
from scheduler.core.ownership import Claim, Fence
from scheduler.decisions.checkpoints import lag
from scheduler.loops.replication import Replicator
from scheduler.storage.local import LocalStorage
from scheduler.store import jobs as jobs_store
from scheduler.store import replicas as replicas_store
from scheduler.store.db import Store
from scheduler.store.models import Job
from tests.support.checkpoints import Checkpoint

pytestmark = pytest.mark.integration

PIPELINE = "/opt/pipelines/p.py"


@pytest.fixture
def client(store: Store, settings: Settings, admin_headers: dict[str, str]) -> Iterator[TestClient]:
    settings = settings.model_copy(update={"metrics_store_ttl": 0.0})
    app = create_app(NodeContext(settings, store, nudge=lambda group, job=None: None))
    with TestClient(
        app, base_url="http://127.0.0.1", headers=admin_headers, raise_server_exceptions=True
    ) as c:
        yield c


@pytest.fixture
def roots(client: TestClient, tmp_path: Path) -> dict[str, Path]:
    paths = {"a": tmp_path / "ck-a", "b": tmp_path / "ck-b"}
    for name, path in paths.items():
        path.mkdir()
        r = client.post(
            "/v1/clusters", json={"name": name, "kind": "local", "storage_root": str(path)}
        )
        assert r.status_code == 201, r.text
    r = client.post(
        "/v1/groups", json={"name": "g", "primary_cluster": "a", "failover_cluster": "b"}
    )
    assert r.status_code == 201, r.text
    return paths


def create(client: TestClient, name: str, **extra: Any) -> dict[str, Any]:
    r = client.post("/v1/jobs", json={"name": name, "entrypoint": PIPELINE, "group": "g", **extra})
    assert r.status_code == 201, r.text
    return r.json()


def test_the_replicate_setting(client: TestClient, roots: dict[str, Path]) -> None:
    assert create(client, "plain")["replicate"] is None
    job = create(client, "vip", priority="high", replicate=False)
    assert job["replicate"] is False
    view = client.get("/v1/jobs/vip/replication").json()
    assert view["enabled"] is False and view["state"] is None
    r = client.patch("/v1/jobs/vip", json={"replicate": None})  # back to the default
    assert r.status_code == 200 and r.json()["replicate"] is None
    assert client.get("/v1/jobs/vip/replication").json()["enabled"] is True
    r = client.patch("/v1/jobs/plain", json={"replicate": "yes"})
    assert r.status_code == 422
    # a job in a group without a failover cluster says why it has no replica
    solo = client.post(
        "/v1/jobs", json={"name": "solo", "entrypoint": PIPELINE, "replicate": True}
    ).json()
    assert solo["replicate"] is True
    view = client.get("/v1/jobs/solo/replication").json()
    assert view["state"] is None and "no failover cluster" in view["reason"]


def test_lag_figures_in_the_api(client: TestClient, store: Store, roots: dict[str, Path]) -> None:
    create(client, "orders", priority="high", team="ads")
    create(client, "clicks", priority="high", team="web")
    with store.transaction() as session:
        for job in session.query(Job).filter(Job.name.in_(["orders", "clicks"])):
            job.state, job.cluster_name, job.updated_at = "RUNNING", "a", utcnow()
            job.owner = "test-node"  # this node's: its /metrics shows their replicas
    source = Checkpoint(roots["a"] / "orders" / "checkpoint")
    source.run(4)
    replicator = Replicator(store, node_id="test-node", round_seconds=30)
    try:
        replicator.round([Claim("g", Fence("test-node", 1), 0, 1)])
    finally:
        replicator.close()
    source.run(3)  # three batches the replica has not got yet
    view = client.get("/v1/jobs/orders/replication").json()
    assert view["state"] == "CURRENT" and view["enabled"] is True
    assert (view["source_cluster"], view["target_cluster"]) == ("a", "b")
    assert view["location"] == (roots["b"] / "orders" / "checkpoint").as_uri()
    assert (view["source_batch"], view["replica_batch"], view["lag_batches"]) == (3, 3, 0)
    assert view["lag_seconds"] == 0.0 and view["stale"] is False
    assert view["files_copied"] > 0 and view["node"] == "test-node"
    assert client.get("/v1/jobs/orders").json()["replication"] == view
    # a look that found the source three batches ahead (what a round records before copying)
    with store.transaction() as session:
        job = jobs_store.get_job(session, "orders")
        figures = lag(LocalStorage().list(source.url), 3)
        assert replicas_store.record_look(
            session, job, holder="test-node", lag=figures, node_id="test-node"
        )
    view = client.get("/v1/jobs/orders/replication").json()
    assert view["state"] == "LAGGING"
    assert (view["source_batch"], view["replica_batch"], view["lag_batches"]) == (6, 3, 3)
    oldest = figures.oldest_missing_at
    assert oldest is not None and view["lag_seconds"] >= (utcnow() - oldest).total_seconds() - 1
    listing = client.get("/v1/replication", params={"cluster": "b", "count": True}).json()
    assert listing["count"] == 2 and [r["job"] for r in listing["data"]] == ["clicks", "orders"]
    assert client.get("/v1/replication", params={"state": "ERROR"}).json()["data"] == []
    assert len(client.get("/v1/replication", params={"team": "ads"}).json()["data"]) == 1
    assert client.get("/v1/replication", params={"state": "BAD"}).status_code == 422
    assert client.get("/v1/jobs/nope/replication").status_code == 404
    # list responses leave the replica out (one more query per page)
    jobs = client.get("/v1/jobs", params={"group": "g"}).json()["data"]
    assert all(j["replication"] is None for j in jobs)
    # /metrics: aggregates by clusters and state, never a series per job
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(client.get("/metrics").text)
        for sample in family.samples
        if sample.name.startswith("drover_replica")
    }
    pair = (("source_cluster", "a"), ("target_cluster", "b"))

    def replicas(state: str) -> float:
        return samples[("drover_replicas", tuple(sorted((*pair, ("state", state)))))]

    assert replicas("LAGGING") == 1 and replicas("PENDING") == 1  # clicks: no checkpoint yet
    assert replicas("ERROR") == 0 and replicas("CURRENT") == 0
    assert samples[("drover_replica_lag_batches", pair)] == 3
    assert samples[("drover_replica_lag_seconds", pair)] >= view["lag_seconds"]
    assert len(samples) == 5 + 2
