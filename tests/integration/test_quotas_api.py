"""``/v1/quotas`` on the real store (SQLite and MariaDB): create, read, list in pages, replace,
delete; strict bodies and problem documents; audit; dedicated groups refused while jobs sit
elsewhere, and job placement checked against them; a queued job's position and reason in
``GET /v1/jobs/{name}`` and the job list."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from scheduler.core.clock import utcnow
from scheduler.decisions.gate import QueueRow
from scheduler.decisions.identity import Role
from scheduler.store import quotas as quotas_store
from scheduler.store.db import Store
from tests.support.auth import auth_headers, member_token

pytestmark = pytest.mark.integration

PIPELINE = "/opt/pipelines/p.py"


def test_quota_create_read_list_replace_delete(client: TestClient, store: Store) -> None:
    created = client.put("/v1/quotas/ads", json={"rate": 5, "burst": 10})
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["business"] == "ads" and body["rate"] == 5.0 and body["burst"] == 10
    assert body["tokens"] == pytest.approx(10, abs=0.5) and body["dedicated_group"] is None
    assert created.headers["etag"] == '"1"' and created.headers["location"] == "/v1/quotas/ads"
    for name in ("zeta", "bank", "mail"):
        assert client.put(f"/v1/quotas/{name}", json={"rate": 1.5}).status_code == 201
    page = client.get("/v1/quotas", params={"limit": 2, "count": True}).json()
    assert [q["business"] for q in page["data"]] == ["ads", "bank"] and page["count"] == 4
    rest = client.get(page["next"]).json()
    assert [q["business"] for q in rest["data"]] == ["mail", "zeta"] and rest["next"] is None

    replaced = client.put(
        "/v1/quotas/ads", json={"rate": 2, "burst": 4}, headers={"If-Match": '"1"'}
    )
    assert replaced.status_code == 200 and replaced.json()["version"] == 2
    assert replaced.json()["tokens"] <= 4  # never more than the new burst
    stale = client.put("/v1/quotas/ads", json={"rate": 3}, headers={"If-Match": '"1"'})
    assert stale.status_code == 412
    assert stale.headers["content-type"] == "application/problem+json"
    got = client.get("/v1/quotas/ads")
    assert got.json()["rate"] == 2.0 and got.headers["etag"] == '"2"'

    assert client.delete("/v1/quotas/ads").status_code == 204
    missing = client.get("/v1/quotas/ads")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/problem+json"
    assert client.delete("/v1/quotas/ads").status_code == 404

    audit = client.get("/v1/audit", params={"target_kind": "quota"}).json()["data"]
    actions = [(a["action"], a["target_name"]) for a in audit if a["target_name"] == "ads"]
    assert actions == [("quota.delete", "ads"), ("quota.update", "ads"), ("quota.create", "ads")]


@pytest.mark.parametrize(
    "body",
    [
        {"rate": "5"},
        {"rate": True},
        {"rate": 0},
        {"rate": -1},
        {"rate": 5, "burst": 0},
        {"rate": 5, "burst": 2.5},
        {"rate": 5, "extra": 1},
        {},  # neither a rate nor a group
        {"dedicated_group": "no such group"},
    ],
)
def test_quota_bodies_are_strict(client: TestClient, body: dict[str, object]) -> None:
    response = client.put("/v1/quotas/ads", json=body)
    assert response.status_code == 422, (body, response.text)
    assert response.headers["content-type"] == "application/problem+json"


def test_a_bad_business_name_is_a_problem(client: TestClient) -> None:
    response = client.put("/v1/quotas/a%20b", json={"rate": 1})
    assert response.status_code == 422


def test_members_read_quotas_and_only_platform_admins_change_them(
    client: TestClient, store: Store
) -> None:
    assert client.put("/v1/quotas/ads", json={"rate": 5}).status_code == 201
    viewer = auth_headers(member_token(store, "val", "ads", Role.ADMIN))
    assert client.get("/v1/quotas/ads", headers=viewer).status_code == 200
    refused = client.put("/v1/quotas/ads", json={"rate": 50}, headers=viewer)
    assert refused.status_code == 403
    assert client.delete("/v1/quotas/ads", headers=viewer).status_code == 403
    assert client.get("/v1/quotas/ads").json()["rate"] == 5.0


def create_job(client: TestClient, name: str, group: str, business: str) -> int:
    response = client.post(
        "/v1/jobs",
        json={"name": name, "entrypoint": PIPELINE, "group": group, "business": business},
    )
    return response.status_code


def test_dedicated_groups_keep_their_business_and_only_it(client: TestClient) -> None:
    for group in ("crit", "crit2"):
        made = client.post("/v1/groups", json={"name": group, "primary_cluster": "local"})
        assert made.status_code == 201, made.text
    assert create_job(client, "bank-1", "default", "bank") == 201
    refused = client.put("/v1/quotas/bank", json={"dedicated_group": "crit"})
    assert refused.status_code == 409 and "outside group 'crit'" in refused.json()["detail"]
    assert client.delete("/v1/jobs/bank-1").status_code in (200, 202, 204)
    assert create_job(client, "shop-1", "crit", "shop") == 201
    crowded = client.put("/v1/quotas/bank", json={"dedicated_group": "crit"})
    assert crowded.status_code == 409 and "other businesses" in crowded.json()["detail"]

    bound = client.put("/v1/quotas/bank", json={"dedicated_group": "crit2", "rate": 10})
    assert bound.status_code == 201 and bound.json()["dedicated_group"] == "crit2"
    assert create_job(client, "bank-2", "crit2", "bank") == 201
    assert create_job(client, "bank-3", "default", "bank") == 422  # its jobs go to crit2
    assert create_job(client, "shop-2", "crit2", "shop") == 422  # crit2 is bank's
    moved = client.patch("/v1/jobs/shop-1", json={"business": "bank"})
    assert moved.status_code == 422  # a bank job cannot sit in crit
    # unbinding lets the business go anywhere again
    assert client.put("/v1/quotas/bank", json={"rate": 10}).status_code == 200
    assert create_job(client, "bank-3", "default", "bank") == 201


def test_a_queued_job_shows_its_place_and_why(client: TestClient, store: Store) -> None:
    assert create_job(client, "orders", "default", "ads") == 201
    assert client.post("/v1/jobs/orders/start").status_code == 202
    job_id = store_job_id(store, "orders")
    reason = "business ads is at its rate (5/s, burst 10)"
    with store.transaction() as s:
        quotas_store.write_queue(s, "n1", {job_id: QueueRow(3, "rate", reason, utcnow())}, [])
    got = client.get("/v1/jobs/orders").json()
    assert got["state"] == "QUEUED"
    assert got["queue"]["position"] == 3 and got["queue"]["reason"] == reason
    assert got["queue"]["kind"] == "rate"
    listed = client.get("/v1/jobs", params={"state": "QUEUED"}).json()["data"]
    assert [j["queue"]["position"] for j in listed if j["name"] == "orders"] == [3]
    # a stopped job is not waiting, whatever row is left
    assert client.post("/v1/jobs/orders/stop").status_code == 202
    assert client.get("/v1/jobs/orders").json()["queue"] is None


def store_job_id(store: Store, name: str) -> int:
    from scheduler.store import jobs as jobs_store

    with store.session() as s:
        return jobs_store.get_job(s, name).id
