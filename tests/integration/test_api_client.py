"""The generated typed client (drover/api_client.py) against the real app on a real store
(SQLite and MariaDB): every call it makes is one the server takes, typed by the same spec; error
answers become ApiError with the problem document; idempotent retries are replays."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import NodeContext
from drover.api_client import ApiError, DroverClient, JobCreate, Unreachable
from scheduler.config import Settings
from scheduler.store.db import Store
from tests.support.auth import admin_token

pytestmark = pytest.mark.integration

PIPELINE = "/opt/pipelines/p.py"
BASE = "http://127.0.0.1"


@pytest.fixture
def client(store: Store, settings: Settings) -> Iterator[DroverClient]:
    app = create_app(NodeContext(settings, store))
    with TestClient(app, base_url=BASE) as http:
        # the client's own headers only: its token and its X-Drover-Client
        with DroverClient(BASE, token=admin_token(store), http=http) as api:
            yield api


def test_the_job_lifecycle_through_the_client(client: DroverClient) -> None:
    name = f"orders-{uuid.uuid4().hex[:8]}"
    body: JobCreate = {"name": name, "entrypoint": PIPELINE, "team": "ads", "labels": {"env": "x"}}
    key = str(uuid.uuid4())
    job = client.create_job(body, idempotency_key=key)
    assert job["name"] == name and job["desired_state"] == "STOPPED"
    assert client.last_response is not None and client.last_response.status_code == 201
    again = client.create_job(body, idempotency_key=key)
    assert again == job and client.last_response.headers["idempotent-replayed"] == "true"

    assert client.get_job(name)["spec_version"] == job["spec_version"]
    started = client.start_job(name, if_match=f'"{job["spec_version"]}"')
    assert started["desired_state"] == "RUNNING"
    changed = client.update_job(name, {"args": ["--window", "5m"]})
    assert changed["args"] == ["--window", "5m"] and changed["spec_version"] > job["spec_version"]

    with pytest.raises(ApiError) as stale:
        client.update_job(name, {"args": []}, if_match=f'"{job["spec_version"]}"')
    assert stale.value.status == 412 and stale.value.kind == "precondition-failed"
    assert stale.value.problem["status"] == 412

    page = client.list_jobs(label=["env=x"], name_prefix=name, limit=1, count=True)
    assert [j["name"] for j in page["data"]] == [name] and page["count"] == 1
    events = client.list_job_events(name, sort="id")
    assert events["data"] and all(e["cause"] for e in events["data"])
    assert client.list_job_runs(name)["data"] == []

    client.stop_job(name, idempotency_key=str(uuid.uuid4()))
    assert client.delete_job(name) is None
    with pytest.raises(ApiError) as gone:
        client.get_job(name)
    assert gone.value.status == 404 and gone.value.kind == "not-found"


def test_pages_follow_next_links(client: DroverClient) -> None:
    prefix = f"page-{uuid.uuid4().hex[:6]}-"
    for i in range(5):
        client.create_job({"name": f"{prefix}{i}", "entrypoint": PIPELINE})
    page = client.list_jobs(name_prefix=prefix, limit=2)
    names = [j["name"] for j in page["data"]]
    while page.get("next"):
        page = client.get_url(page["next"])
        names += [j["name"] for j in page["data"]]
    assert names == [f"{prefix}{i}" for i in range(5)]


def test_catalog_and_identity_calls(client: DroverClient) -> None:
    assert client.get_whoami()["subject"]
    assert any(c["name"] for c in client.list_clusters()["data"])
    assert client.get_group("default")["name"] == "default"
    assert client.check_liveness()["status"] == "ok"
    with pytest.raises(ApiError) as invalid:
        client.create_job({"name": "no spaces allowed", "entrypoint": PIPELINE})
    assert invalid.value.status == 422 and invalid.value.problem["errors"]


def test_an_unreachable_node_is_its_own_error() -> None:
    with DroverClient("http://127.0.0.1:9", timeout=2) as api, pytest.raises(Unreachable):
        api.check_liveness()
