"""``/v1/clusters`` and ``/v1/groups`` on a real store (SQLite and MariaDB): the catalog contract,
the storage-root rule, and bad input that gets a problem document and changes nothing."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from scheduler.config import Settings
from scheduler.store import catalog as catalog_store
from scheduler.store import journal
from scheduler.store.db import Store
from tests.support.problems import STANDALONE, assert_problem, snapshot

pytestmark = pytest.mark.integration

PIPELINE = "/opt/pipelines/p.py"


def create_cluster(client: TestClient, name: str, **fields: Any) -> dict[str, Any]:
    body = {**STANDALONE, "storage_root": f"/data/ck/{name}", **fields}
    response = client.post("/v1/clusters", json={"name": name, **body})
    assert response.status_code == 201, response.text
    return response.json()


def test_cluster_create_read_list_update(client: TestClient, store: Store) -> None:
    created = create_cluster(
        client, "spark-a", storage_root="/data/ck/./a//", az="eu-west-1a", cloud="aws"
    )
    assert created == created | {
        "name": "spark-a",
        "kind": "standalone",
        "master_url": "spark://127.0.0.1:7077",
        "rest_url": "http://127.0.0.1:6066",
        "ui_url": "http://127.0.0.1:8080",
        "az": "eu-west-1a",
        "cloud": "aws",
        "storage_root": "file:///data/ck/a",
        "health": "NORMAL",
        "max_concurrent_submissions": 0,
        "max_running_apps": 0,
        "max_cores": 0,
        "version": 1,
    }
    s3 = create_cluster(
        client,
        "yarn-b",
        kind="spark-submit",
        master_url="yarn",
        rest_url="",
        ui_url="",
        storage_root="s3a://ck-b/drover/",
        max_cores=64,
    )
    assert s3["storage_root"] == "s3a://ck-b/drover" and s3["max_cores"] == 64
    local = create_cluster(client, "laptop", kind="local", master_url="", rest_url="", ui_url="")
    assert local["master_url"] == "" and local["storage_root"] == "file:///data/ck/laptop"

    got = client.get("/v1/clusters/spark-a")
    assert got.status_code == 200 and got.headers["etag"] == '"1"'
    page = client.get("/v1/clusters", params={"count": True}).json()
    assert page["count"] == 4  # with the bootstrap's `local`
    assert [c["name"] for c in page["data"]] == ["laptop", "local", "spark-a", "yarn-b"]
    third = client.get("/v1/clusters", params={"limit": 3}).json()
    assert client.get(third["next"]).json()["data"][0]["name"] == "yarn-b"

    patched = client.patch(
        "/v1/clusters/spark-a",
        json={"max_running_apps": 10, "max_concurrent_submissions": 2, "ui_url": "http://h:8081"},
        headers={"If-Match": '"1"'},
    )
    assert patched.status_code == 200, patched.text
    body = patched.json()
    assert (body["max_running_apps"], body["max_concurrent_submissions"]) == (10, 2)
    assert body["version"] == 2 and patched.headers["etag"] == '"2"'
    moved = client.patch("/v1/clusters/spark-a", json={"storage_root": "s3a://ck-a/x"})
    assert moved.status_code == 200 and moved.json()["storage_root"] == "s3a://ck-a/x"
    same = client.patch("/v1/clusters/spark-a", json={"az": "eu-west-1a"})
    assert same.json()["version"] == 3  # nothing changed: no new version
    with store.session() as s:
        actions = [a.action for a in journal.list_audit(s)][::-1]
    assert actions == ["cluster.create"] * 3 + ["cluster.update"] * 3


def test_group_create_read_list_update(client: TestClient, store: Store) -> None:
    create_cluster(client, "a")
    create_cluster(client, "b")
    response = client.post(
        "/v1/groups", json={"name": "payments", "primary_cluster": "a", "failover_cluster": "b"}
    )
    assert response.status_code == 201, response.text
    assert response.headers["location"] == "/v1/groups/payments"
    group = response.json()
    assert group == group | {
        "name": "payments",
        "primary_cluster": "a",
        "failover_cluster": "b",
        "version": 1,
        "members": None,
        "pool": None,
        "epoch": None,
        "epoch_generation": None,
    }
    assert client.get("/v1/groups/payments").headers["etag"] == '"1"'
    page = client.get("/v1/groups").json()
    assert [g["name"] for g in page["data"]] == ["default", "payments"] and page["next"] is None
    cleared = client.patch(
        "/v1/groups/payments", json={"failover_cluster": None}, headers={"If-Match": '"1"'}
    )
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["failover_cluster"] is None and cleared.json()["version"] == 2
    swapped = client.patch("/v1/groups/payments", json={"primary_cluster": "b"}).json()
    assert swapped["primary_cluster"] == "b" and swapped["version"] == 3
    with store.session() as s:
        actions = [a.action for a in journal.list_audit(s)][::-1]
    assert actions[2:] == ["group.create", "group.update", "group.update"]


def test_storage_root_cannot_change_while_jobs_are_live_on_the_cluster(
    client: TestClient, store: Store
) -> None:
    create_cluster(client, "a")
    client.post("/v1/groups", json={"name": "g", "primary_cluster": "a"})
    job = {"name": "j", "entrypoint": PIPELINE, "group": "g", "desired_state": "RUNNING"}
    assert client.post("/v1/jobs", json=job).status_code == 201  # QUEUED for cluster a
    before = snapshot(store)
    for change in ({"storage_root": "/data/other"}, {"kind": "spark-submit"}):
        refused = client.patch("/v1/clusters/a", json=change)
        assert refused.status_code == 409, refused.text
        assert refused.json()["type"] == "urn:drover:problem:conflict"
        assert "'j'" in refused.json()["detail"]
    moving_primary = client.patch("/v1/groups/g", json={"primary_cluster": "local"})
    assert moving_primary.status_code == 409
    assert snapshot(store) == before
    # other fields may change while jobs run
    assert client.patch("/v1/clusters/a", json={"max_cores": 8}).status_code == 200
    assert client.post("/v1/jobs/j/stop").status_code == 202
    moved = client.patch("/v1/clusters/a", json={"storage_root": "/data/other"})
    assert moved.status_code == 200, moved.text


def test_storage_root_cannot_move_away_from_explicit_checkpoint_locations(
    client: TestClient, store: Store
) -> None:
    create_cluster(client, "a")
    client.post("/v1/groups", json={"name": "g", "primary_cluster": "a"})
    job = {"name": "j", "entrypoint": PIPELINE, "group": "g"}
    job["checkpoint_location"] = "/data/ck/a/pinned/j"
    assert client.post("/v1/jobs", json=job).status_code == 201
    refused = client.patch("/v1/clusters/a", json={"storage_root": "/data/ck/a2"})
    assert refused.status_code == 409 and "checkpoint_location" in refused.json()["detail"]


BAD: list[tuple[str, str, str, Any, int, str]] = [
    # (id, method, path, json body, status, problem kind); cluster `a`, group `ga` exist
    ("unknown field", "POST", "/v1/clusters", {"name": "n", "replicas": 2}, 422, "invalid-input"),
    (
        "health is read-only",
        "POST",
        "/v1/clusters",
        {"name": "n", "health": "NORMAL"},
        422,
        "invalid-input",
    ),
    ("bad kind", "POST", "/v1/clusters", {"name": "n", "kind": "yarn"}, 422, "invalid-input"),
    (
        "missing storage root",
        "POST",
        "/v1/clusters",
        {"name": "n", "storage_root": None},
        422,
        "invalid-input",
    ),
    (
        "standalone without rest_url",
        "POST",
        "/v1/clusters",
        {"name": "n", "rest_url": ""},
        422,
        "invalid-input",
    ),
    (
        "standalone without ui_url",
        "POST",
        "/v1/clusters",
        {"name": "n", "ui_url": ""},
        422,
        "invalid-input",
    ),
    (
        "standalone without master",
        "POST",
        "/v1/clusters",
        {"name": "n", "master_url": ""},
        422,
        "invalid-input",
    ),
    (
        "standalone master not spark://",
        "POST",
        "/v1/clusters",
        {"name": "n", "master_url": "http://h:7077"},
        422,
        "invalid-input",
    ),
    (
        "master without port",
        "POST",
        "/v1/clusters",
        {"name": "n", "master_url": "spark://h"},
        422,
        "invalid-input",
    ),
    (
        "spark-submit without master",
        "POST",
        "/v1/clusters",
        {"name": "n", "kind": "spark-submit", "master_url": ""},
        422,
        "invalid-input",
    ),
    (
        "spark-submit odd master",
        "POST",
        "/v1/clusters",
        {"name": "n", "kind": "spark-submit", "master_url": "somewhere"},
        422,
        "invalid-input",
    ),
    (
        "local with a spark master",
        "POST",
        "/v1/clusters",
        {"name": "n", "kind": "local", "master_url": "spark://h:1"},
        422,
        "invalid-input",
    ),
    (
        "rest_url not http",
        "POST",
        "/v1/clusters",
        {"name": "n", "rest_url": "ftp://h:6066"},
        422,
        "invalid-input",
    ),
    (
        "rest_url with credentials",
        "POST",
        "/v1/clusters",
        {"name": "n", "rest_url": "http://u:p@h:6066"},
        422,
        "invalid-input",
    ),
    (
        "ui_url bad port",
        "POST",
        "/v1/clusters",
        {"name": "n", "ui_url": "http://h:99999"},
        422,
        "invalid-input",
    ),
    (
        "relative storage root",
        "POST",
        "/v1/clusters",
        {"name": "n", "storage_root": "ck/n"},
        422,
        "invalid-input",
    ),
    (
        "s3 instead of s3a",
        "POST",
        "/v1/clusters",
        {"name": "n", "storage_root": "s3://b/x"},
        422,
        "invalid-input",
    ),
    (
        "bad bucket",
        "POST",
        "/v1/clusters",
        {"name": "n", "storage_root": "s3a://B_/x"},
        422,
        "invalid-input",
    ),
    (
        "root climbs with ..",
        "POST",
        "/v1/clusters",
        {"name": "n", "storage_root": "/a/../../x"},
        422,
        "invalid-input",
    ),
    (
        "file system root",
        "POST",
        "/v1/clusters",
        {"name": "n", "storage_root": "file:///"},
        422,
        "invalid-input",
    ),
    (
        "file uri with a host",
        "POST",
        "/v1/clusters",
        {"name": "n", "storage_root": "file://nas/ck"},
        422,
        "invalid-input",
    ),
    (
        "percent in root",
        "POST",
        "/v1/clusters",
        {"name": "n", "storage_root": "/ck/a%20b"},
        422,
        "invalid-input",
    ),
    (
        "root inside another",
        "POST",
        "/v1/clusters",
        {"name": "n", "storage_root": "/data/ck/a/n"},
        409,
        "conflict",
    ),
    (
        "root around another",
        "POST",
        "/v1/clusters",
        {"name": "n", "storage_root": "/data/ck"},
        409,
        "conflict",
    ),
    (
        "same root as another",
        "POST",
        "/v1/clusters",
        {"name": "n", "storage_root": "file:/data/ck/a/"},
        409,
        "conflict",
    ),
    (
        "duplicate name",
        "POST",
        "/v1/clusters",
        {"name": "a", "storage_root": "/data/ck/z"},
        409,
        "already-exists",
    ),
    (
        "negative limit",
        "POST",
        "/v1/clusters",
        {"name": "n", "max_cores": -1},
        422,
        "invalid-input",
    ),
    (
        "limit as a string",
        "POST",
        "/v1/clusters",
        {"name": "n", "max_cores": "3"},
        422,
        "invalid-input",
    ),
    (
        "limit as a bool",
        "POST",
        "/v1/clusters",
        {"name": "n", "max_running_apps": True},
        422,
        "invalid-input",
    ),
    (
        "limit too large",
        "POST",
        "/v1/clusters",
        {"name": "n", "max_cores": 10**9},
        422,
        "invalid-input",
    ),
    ("name with space", "POST", "/v1/clusters", {"name": "a b"}, 422, "invalid-input"),
    ("az with space", "POST", "/v1/clusters", {"name": "n", "az": "eu west"}, 422, "invalid-input"),
    ("body not an object", "POST", "/v1/clusters", [1, 2], 422, "invalid-input"),
    ("unknown cluster get", "GET", "/v1/clusters/nope", None, 404, "not-found"),
    ("invalid cluster name in path", "GET", "/v1/clusters/a%20b", None, 422, "invalid-input"),
    ("unknown cluster patch", "PATCH", "/v1/clusters/nope", {"az": "x"}, 404, "not-found"),
    ("patch nothing", "PATCH", "/v1/clusters/a", {}, 422, "invalid-input"),
    ("patch null", "PATCH", "/v1/clusters/a", {"az": None}, 422, "invalid-input"),
    (
        "patch health",
        "PATCH",
        "/v1/clusters/a",
        {"health": "MANUAL_ABNORMAL"},
        422,
        "invalid-input",
    ),
    ("patch name", "PATCH", "/v1/clusters/a", {"name": "b"}, 422, "invalid-input"),
    ("patch breaks kind rules", "PATCH", "/v1/clusters/a", {"rest_url": ""}, 422, "invalid-input"),
    (
        "patch root onto local's",
        "PATCH",
        "/v1/clusters/a",
        {"storage_root": "LOCAL_ROOT"},
        409,
        "conflict",
    ),
    ("patch stale version", "PATCH", "/v1/clusters/a", {"az": "x"}, 412, "precondition-failed"),
    (
        "group unknown primary",
        "POST",
        "/v1/groups",
        {"name": "g", "primary_cluster": "zz"},
        422,
        "invalid-input",
    ),
    (
        "group unknown failover",
        "POST",
        "/v1/groups",
        {"name": "g", "primary_cluster": "a", "failover_cluster": "zz"},
        422,
        "invalid-input",
    ),
    (
        "group failover is primary",
        "POST",
        "/v1/groups",
        {"name": "g", "primary_cluster": "a", "failover_cluster": "a"},
        422,
        "invalid-input",
    ),
    ("group without primary", "POST", "/v1/groups", {"name": "g"}, 422, "invalid-input"),
    (
        "group unknown field",
        "POST",
        "/v1/groups",
        {"name": "g", "primary_cluster": "a", "epoch": 3},
        422,
        "invalid-input",
    ),
    (
        "group bad name",
        "POST",
        "/v1/groups",
        {"name": "g/h", "primary_cluster": "a"},
        422,
        "invalid-input",
    ),
    (
        "group duplicate",
        "POST",
        "/v1/groups",
        {"name": "ga", "primary_cluster": "a"},
        409,
        "already-exists",
    ),
    ("unknown group get", "GET", "/v1/groups/nope", None, 404, "not-found"),
    (
        "unknown group patch",
        "PATCH",
        "/v1/groups/nope",
        {"failover_cluster": None},
        404,
        "not-found",
    ),
    ("group patch nothing", "PATCH", "/v1/groups/ga", {}, 422, "invalid-input"),
    (
        "group patch primary null",
        "PATCH",
        "/v1/groups/ga",
        {"primary_cluster": None},
        422,
        "invalid-input",
    ),
    (
        "group patch failover is primary",
        "PATCH",
        "/v1/groups/ga",
        {"failover_cluster": "a"},
        422,
        "invalid-input",
    ),
    (
        "group patch unknown cluster",
        "PATCH",
        "/v1/groups/ga",
        {"primary_cluster": "zz"},
        422,
        "invalid-input",
    ),
    (
        "group patch stale version",
        "PATCH",
        "/v1/groups/ga",
        {"failover_cluster": "local"},
        412,
        "precondition-failed",
    ),
]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "kind"), [pytest.param(*c[1:], id=c[0]) for c in BAD]
)
def test_bad_input_gets_a_problem_document_and_changes_nothing(
    client: TestClient,
    store: Store,
    settings: Settings,
    method: str,
    path: str,
    body: Any,
    status: int,
    kind: str,
) -> None:
    create_cluster(client, "a")
    assert client.post("/v1/groups", json={"name": "ga", "primary_cluster": "a"}).status_code == 201
    headers = {"If-Match": '"7"'} if "stale" in kind or status == 412 else {}
    if method == "POST" and path == "/v1/clusters" and isinstance(body, dict):
        body = {**STANDALONE, "storage_root": "/data/ck/n", **body}
        body = {k: v for k, v in body.items() if v is not None}
    if isinstance(body, dict) and body.get("storage_root") == "LOCAL_ROOT":
        with store.session() as s:
            body = {"storage_root": catalog_store.get_cluster(s, "local").storage_root + "/sub"}
    before = snapshot(store)
    assert_problem(client.request(method, path, json=body, headers=headers), status, kind)
    assert snapshot(store) == before


def test_openapi_lists_the_catalog(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/clusters", "/v1/clusters/{name}", "/v1/groups", "/v1/groups/{name}"} <= set(paths)
    assert set(paths["/v1/clusters/{name}"]) == {"get", "patch"}
