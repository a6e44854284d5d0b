"""``GET /v1/jobs/{name}`` runs its authorization check in the route's own thread
(``api/deferred.py``): the answers are those of a check made before everything else, on SQLite
and MariaDB, and a deferring route that never runs its check answers 500, never the job."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import NodeContext
from api.security import rules
from scheduler.config import Settings
from scheduler.decisions.identity import Role
from scheduler.store.db import Store
from tests.support.auth import auth_headers, member_token

pytestmark = pytest.mark.integration


@pytest.fixture
def client(store: Store, settings: Settings, admin_headers: dict[str, str]) -> Iterator[TestClient]:
    app = create_app(NodeContext(settings, store))
    with TestClient(
        app, base_url="http://127.0.0.1", headers=admin_headers, raise_server_exceptions=False
    ) as c:
        r = c.post(
            "/v1/jobs", json={"name": "ads-job", "entrypoint": "/opt/pipelines/p.py", "team": "ads"}
        )
        assert r.status_code == 201, r.text
        yield c


def test_answers_as_if_checked_first(client: TestClient, store: Store) -> None:
    outsider = auth_headers(member_token(store, "bob", "web", Role.VIEWER))
    reader = auth_headers(member_token(store, "carol", "ads", Role.VIEWER))
    # allowed: the job, with its ETag
    r = client.get("/v1/jobs/ads-job", headers=reader)
    assert r.status_code == 200 and r.json()["name"] == "ads-job"
    assert r.headers["ETag"] == '"1"'
    # not allowed: 403, also when the request is otherwise malformed (the check comes first)
    assert client.get("/v1/jobs/ads-job", headers=outsider).status_code == 403
    r = client.get("/v1/jobs/ads-job", params={"stat": "x"}, headers=outsider)
    assert r.status_code == 403 and r.headers["content-type"] == "application/problem+json"
    # no such job: 404 before the unknown query parameter's 400
    r = client.get("/v1/jobs/nope", params={"stat": "x"})
    assert r.status_code == 404 and r.json()["type"] == "urn:drover:problem:not-found"
    # a name the store could never hold: the check's own 422, not the path parameter's
    r = client.get("/v1/jobs/" + "x" * 200)
    assert r.status_code == 422 and "job name" in r.json()["detail"]
    # an unknown query parameter on a job the caller may read: 400
    r = client.get("/v1/jobs/ads-job", params={"stat": "x"}, headers=reader)
    assert r.status_code == 400


def test_a_deferring_route_that_skips_its_check_answers_500(
    client: TestClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GET /v1/jobs/{name}/runs does not run a deferred check: deferring it must fail closed
    monkeypatch.setattr(rules, "DEFERRED", rules.DEFERRED | {("GET", "/v1/jobs/{name}/runs")})
    outsider = auth_headers(member_token(store, "bob", "web", Role.VIEWER))
    reader = auth_headers(member_token(store, "carol", "ads", Role.VIEWER))
    # the edge refuses the success answer; the error path runs the check: its 403
    assert client.get("/v1/jobs/ads-job/runs", headers=outsider).status_code == 403
    # a caller the check allows gets a 500, never an answer no check stood before
    r = client.get("/v1/jobs/ads-job/runs", headers=reader)
    assert r.status_code == 500 and "data" not in r.json()
