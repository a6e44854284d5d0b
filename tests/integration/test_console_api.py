"""The console as the API serves it (no browser): its files at /ui without a credential, its own
Content-Security-Policy, the API's still closed, and ``/v1/whoami``'s permissions that the
console hides its buttons by (each role gets exactly what the API then lets it do)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from api.app import create_app
from api.console import CONSOLE_CSP, STATIC_DIR
from api.deps import NodeContext
from scheduler.config import Settings
from scheduler.core.clock import utcnow
from scheduler.decisions.identity import Role, Scope
from scheduler.store import identities, models
from scheduler.store.db import Store
from tests.support.auth import admin_token, auth_headers, member_token

pytestmark = pytest.mark.integration


@pytest.fixture
def api(store: Store, settings: Settings) -> Iterator[TestClient]:
    app = create_app(NodeContext(settings, store))
    with TestClient(app, base_url="http://127.0.0.1", follow_redirects=False) as client:
        yield client


def test_the_console_is_served_without_credentials_with_its_own_policy(api: TestClient) -> None:
    root = api.get("/ui")
    assert root.status_code == 308 and root.headers["location"] == "/ui/"
    page = api.get("/ui/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == CONSOLE_CSP
    assert "'unsafe-inline'" not in CONSOLE_CSP and "'unsafe-eval'" not in CONSOLE_CSP
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["cache-control"] == "no-cache"
    # every script and stylesheet the page names is served, as the type a browser requires
    refs = re.findall(r'(?:src|href)="([^"#:]+)"', page.text)
    assert "js/app.js" in refs and "css/console.css" in refs
    for ref in refs:
        asset = api.get(f"/ui/{ref}")
        assert asset.status_code == 200, ref
        assert asset.headers["content-security-policy"] == CONSOLE_CSP
        if ref.endswith(".js"):
            assert asset.headers["content-type"].startswith("text/javascript")
    # revalidation: the ETag of an unchanged file answers 304
    etag = api.get("/ui/js/app.js").headers["etag"]
    assert api.get("/ui/js/app.js", headers={"If-None-Match": etag}).status_code == 304
    # every module the console has is reachable
    for path in STATIC_DIR.rglob("*.js"):
        rel = path.relative_to(STATIC_DIR).as_posix()
        assert api.get(f"/ui/{rel}").status_code == 200, rel


def test_the_console_opens_nothing_else(api: TestClient, store: Store) -> None:
    assert api.get("/ui/../v1/jobs").status_code in (401, 404)
    assert api.get("/ui/%2e%2e/%2e%2e/pyproject.toml").status_code == 404
    assert api.get("/ui/nothing-here.js").status_code == 404
    assert api.get("/v1/jobs").status_code == 401  # the API still needs a credential
    assert api.post("/ui/", headers={"X-Drover-Client": "t"}).status_code == 405
    # the console's files are not API routes: not in the OpenAPI document
    paths = api.get("/openapi.json").json()["paths"]
    assert not any(p.startswith("/ui") for p in paths)
    # an untrusted Host gets nothing, console included (DNS rebinding)
    assert api.get("/ui/", headers={"Host": "evil.example"}).status_code == 400


def test_whoami_says_what_each_role_may_do(api: TestClient, store: Store) -> None:
    def perms(token: str) -> dict[str, list[str]]:
        answer = api.get("/v1/whoami", headers=auth_headers(token))
        assert answer.status_code == 200, answer.text
        return dict(answer.json()["permissions"])

    viewer = perms(member_token(store, "vera", "orders", Role.VIEWER))
    assert viewer == {
        "job.read": ["orders"],
        "catalog.read": ["*"],
        "team.read": ["orders"],
        "token.own": ["*"],  # its own tokens (none stronger nor longer-lived than this one)
    }
    operator = perms(member_token(store, "otto", "orders", Role.OPERATOR))
    assert operator["job.write"] == ["orders"] and operator["cluster.mark"] == ["*"]
    assert "catalog.write" not in operator and "team.admin" not in operator
    admin = perms(admin_token(store, "root"))
    assert admin["job.write"] == ["*"] and admin["catalog.write"] == ["*"]
    assert admin["platform.admin"] == ["*"]
    assert "internal" not in admin and "job.fence" not in admin
    # two bindings: each team listed where the role allows
    member_token(store, "otto", "ads", Role.VIEWER)
    with store.transaction() as session:
        secret = identities.create_token(session, "otto")[0].secret
    both = perms(secret)
    assert both["job.read"] == ["ads", "orders"] and both["job.write"] == ["orders"]
    # a read-only token narrows: nothing that writes
    with store.transaction() as session:
        made, _ = identities.create_token(session, "otto", scopes=frozenset({Scope.READ}))
        read_only = made.secret
    assert set(perms(read_only)) == {"job.read", "catalog.read", "team.read"}
    # what whoami says is what the API does: the viewer's start is refused
    api.post(
        "/v1/jobs",
        json={"name": "j1", "entrypoint": "/opt/pipelines/p.py", "team": "orders"},
        headers=auth_headers(admin_token(store, "root2")),
    )
    refused = api.post("/v1/jobs/j1/start", headers=auth_headers(read_only))
    assert refused.status_code == 403


def test_search_finds_jobs_by_part_of_their_name(api: TestClient, store: Store) -> None:
    admin = auth_headers(admin_token(store, "root"))
    for name in ("Orders-Enrich", "orders_x", "ads-orders", "done.100", "web"):
        created = api.post(
            "/v1/jobs", json={"name": name, "entrypoint": "/opt/pipelines/p.py"}, headers=admin
        )
        assert created.status_code == 201, created.text

    def found(q: str, **extra: str) -> list[str]:
        page = api.get("/v1/jobs", params={"q": q, **extra}, headers=admin)
        assert page.status_code == 200, page.text
        return [j["name"] for j in page.json()["data"]]

    assert found("orders") == ["Orders-Enrich", "ads-orders", "orders_x"]
    assert found("ORDERS", limit="1") == ["Orders-Enrich"]
    assert found("%") == [] and found("_") == ["orders_x"]  # LIKE wildcards are literal
    assert found("nothing") == []
    # the viewer of a team finds only its team's jobs
    viewer = auth_headers(member_token(store, "vera", "web-team", Role.VIEWER))
    assert api.get("/v1/jobs", params={"q": "orders"}, headers=viewer).json()["data"] == []
    assert api.get("/v1/jobs", params={"q": ""}, headers=admin).status_code == 422
    assert api.get("/v1/jobs", params={"q": "a\x01"}, headers=admin).status_code == 422


def test_overview_counts_the_callers_jobs_by_state(api: TestClient, store: Store) -> None:
    admin = auth_headers(admin_token(store, "root"))
    for name, team in (("a1", "ads"), ("a2", "ads"), ("w1", "web")):
        created = api.post(
            "/v1/jobs",
            json={"name": name, "entrypoint": "/opt/pipelines/p.py", "team": team},
            headers=admin,
        )
        assert created.status_code == 201, created.text
    assert api.post("/v1/jobs/a1/start", headers=admin).status_code == 202
    everything = api.get("/v1/overview", headers=admin).json()
    assert everything["jobs"]["total"] == 3
    assert everything["jobs"]["by_state"]["QUEUED"] == 1
    assert everything["jobs"]["by_state"]["STOPPED"] == 2
    assert everything["jobs"]["by_state"]["RUNNING"] == 0  # every state is present
    assert everything["jobs"]["by_desired_state"] == {"RUNNING": 1, "STOPPED": 2}
    assert everything["jobs"]["not_running_as_desired"] == 1
    assert everything["clusters"]["by_health"]["NORMAL"] == 1  # the local cluster
    assert everything["clusters"]["abnormal"] == []
    # filters as GET /v1/jobs takes them; a team's viewer counts its own team's jobs only
    assert api.get("/v1/overview", params={"q": "a"}, headers=admin).json()["jobs"]["total"] == 2
    viewer = auth_headers(member_token(store, "vera", "web", Role.VIEWER))
    assert api.get("/v1/overview", headers=viewer).json()["jobs"]["total"] == 1
    assert api.get("/v1/overview", params={"bogus": "1"}, headers=admin).status_code == 400


def test_overview_history_counts_runs_restarts_failures_and_failovers(
    api: TestClient, store: Store
) -> None:
    """What the console's overview charts draw: per time bucket, the runs started (a run after
    a job's first is a restart), the runs that ended as failures and the failovers begun; a
    team's viewer counts its team's runs only and gets no failover counts."""
    admin = auth_headers(admin_token(store, "root"))
    for name, team in (("a1", "ads"), ("w1", "web")):
        created = api.post(
            "/v1/jobs",
            json={"name": name, "entrypoint": "/opt/pipelines/p.py", "team": team},
            headers=admin,
        )
        assert created.status_code == 201, created.text
    now = utcnow()
    ago = lambda minutes: now - timedelta(minutes=minutes)  # noqa: E731
    with store.transaction() as session:
        ids = dict(session.execute(select(models.Job.name, models.Job.id)).tuples().all())
        for job, attempt, created, ended, failed in (
            ("a1", 1, ago(85), ago(75), True),
            ("a1", 2, ago(25), None, False),
            ("w1", 1, ago(10), None, False),
        ):
            session.add(
                models.Run(
                    job_id=ids[job],
                    attempt=attempt,
                    cluster_name="local",
                    node_id="n1",
                    fencing_token=f"{job}-{attempt}",
                    app_name=f"drover:{job}:{attempt}",
                    state="FAILED" if ended else "RUNNING",
                    counts_as_failure=failed,
                    created_at=created,
                    ended_at=ended,
                )
            )
        session.add(
            models.Operation(
                kind="failover",
                state="SUCCEEDED",
                home_group="default",
                created_by="user:root",
                created_at=ago(20),
            )
        )
    answer = api.get("/v1/overview/history", params={"hours": 2, "buckets": 4}, headers=admin)
    assert answer.status_code == 200, answer.text
    history = answer.json()
    assert history["bucket_seconds"] == 1800
    column = lambda key, doc=history: [b[key] for b in doc["buckets"]]  # noqa: E731
    assert column("runs_started") == [0, 1, 0, 2]
    assert column("restarts") == [0, 0, 0, 1]
    assert column("failures") == [0, 1, 0, 0]
    assert column("failovers") == [0, 0, 0, 1]
    viewer = auth_headers(member_token(store, "vera", "web", Role.VIEWER))
    mine = api.get("/v1/overview/history", params={"hours": 2, "buckets": 4}, headers=viewer)
    assert column("runs_started", mine.json()) == [0, 0, 0, 1]
    assert column("failovers", mine.json()) == [None] * 4
    too_far = api.get("/v1/overview/history", params={"hours": 169}, headers=admin)
    assert too_far.status_code == 422
