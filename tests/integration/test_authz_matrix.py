"""The authorization matrix: every route x {anonymous, viewer, operator, admin of the job's team,
the same of another team, a platform admin} gets the expected outcome, from one table.

The table below is written independently of ``api/security/rules.py``: it states what the
product promises. The test fails when the application has a route without a row here (or
without a rule there). A refused request is a 401 (no credential) or 403 problem document and
changes nothing in the store; an allowed one is neither 401 nor 403 (nor 5xx).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import NodeContext
from api.security.rules import RULES, api_routes
from scheduler.config import Settings
from scheduler.core.records import JobSpec
from scheduler.decisions.alerts import ChannelKind, ChannelRecord
from scheduler.decisions.identity import Role
from scheduler.decisions.operations.model import OperationKind
from scheduler.decisions.quotas import QuotaSpec
from scheduler.store import alerts, identities, operations, quotas
from scheduler.store import jobs as jobs_store
from scheduler.store.bootstrap import ensure_defaults
from scheduler.store.db import Store
from tests.support.auth import (
    CLIENT_HEADERS,
    admin_token,
    auth_headers,
    member_token,
    store_fingerprint,
)

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

OWN, OTHER = "ads", "web"
HOOK = "http://127.0.0.1:9/hook"
JOB = "orders"
PIPELINE = "/opt/pipelines/p.py"

#: who may: public | auth (any credential) | team:<role> (on the job's/team's team) |
#: any:<role> (on some team) | every:<role> (that role on '*': every team) | platform (admin
#: on '*') | internal (deployment secret only)
Need = str


@dataclass(frozen=True)
class Row:
    method: str
    template: str
    need: Need
    path: str = ""
    body: Any = None

    @property
    def url(self) -> str:
        return self.path or self.template


TABLE: list[Row] = [
    Row("GET", "/healthz", "public"),
    Row("GET", "/readyz", "public"),
    Row("GET", "/metrics", "public"),
    Row(
        "POST",
        "/v1/jobs",
        "team:operator",
        body={"name": "new", "entrypoint": PIPELINE, "team": OWN},
    ),
    Row("GET", "/v1/jobs", "any:viewer"),
    Row("GET", "/v1/jobs/{name}", "team:viewer", f"/v1/jobs/{JOB}"),
    Row("PATCH", "/v1/jobs/{name}", "team:operator", f"/v1/jobs/{JOB}", {"business": "b2"}),
    Row("DELETE", "/v1/jobs/{name}", "team:operator", f"/v1/jobs/{JOB}"),
    Row("POST", "/v1/jobs/{name}/start", "team:operator", f"/v1/jobs/{JOB}/start"),
    Row("POST", "/v1/jobs/{name}/stop", "team:operator", f"/v1/jobs/{JOB}/stop"),
    Row("POST", "/v1/jobs/{name}/restart", "team:operator", f"/v1/jobs/{JOB}/restart"),
    Row("GET", "/v1/jobs/{name}/runs", "team:viewer", f"/v1/jobs/{JOB}/runs"),
    Row("GET", "/v1/jobs/{name}/events", "team:viewer", f"/v1/jobs/{JOB}/events"),
    Row("GET", "/v1/jobs/{name}/revisions", "team:viewer", f"/v1/jobs/{JOB}/revisions"),
    Row(
        "GET",
        "/v1/jobs/{name}/revisions/{revision}",
        "team:viewer",
        f"/v1/jobs/{JOB}/revisions/1",
    ),
    Row(
        "GET",
        "/v1/jobs/{name}/revisions/{revision}/diff",
        "team:viewer",
        f"/v1/jobs/{JOB}/revisions/1/diff",
    ),
    Row(
        "POST",
        "/v1/jobs/{name}/rollback",
        "team:operator",
        f"/v1/jobs/{JOB}/rollback",
        {"revision": 1},
    ),
    Row("GET", "/v1/jobs/{name}/fence", "team:viewer", f"/v1/jobs/{JOB}/fence"),
    Row("GET", "/v1/jobs/{name}/replication", "team:viewer", f"/v1/jobs/{JOB}/replication"),
    Row("GET", "/v1/replication", "any:viewer"),
    Row("GET", "/v1/jobs/{name}/progress", "team:viewer", f"/v1/jobs/{JOB}/progress"),
    Row(
        "POST",
        "/v1/clusters",
        "platform",
        body={
            "name": "c2",
            "kind": "spark-submit",
            "master_url": "spark://127.0.0.1:7077",
            "storage_root": "/tmp/drover-matrix-c2",
        },
    ),
    Row("GET", "/v1/clusters", "any:viewer"),
    Row("GET", "/v1/clusters/{name}", "any:viewer", "/v1/clusters/local"),
    Row("PATCH", "/v1/clusters/{name}", "platform", "/v1/clusters/local", {"az": "az-9"}),
    Row("GET", "/v1/clusters/{name}/health", "any:viewer", "/v1/clusters/local/health"),
    Row(
        "POST",
        "/v1/clusters/{name}/mark-abnormal",
        "any:operator",
        "/v1/clusters/local/mark-abnormal",
        {"reason": "maintenance"},
    ),
    Row("POST", "/v1/clusters/{name}/clear", "any:operator", "/v1/clusters/local/clear", {}),
    Row("POST", "/v1/groups", "platform", body={"name": "g2", "primary_cluster": "local"}),
    Row("GET", "/v1/groups", "any:viewer"),
    Row("GET", "/v1/groups/{name}", "any:viewer", "/v1/groups/default"),
    Row(
        "PATCH", "/v1/groups/{name}", "platform", "/v1/groups/default", {"primary_cluster": "local"}
    ),
    Row("DELETE", "/v1/groups/{name}", "platform", "/v1/groups/spare"),
    Row("GET", "/v1/nodes", "any:viewer"),
    Row("POST", "/v1/internal/nudge", "internal", body={"group": "default"}),
    Row("GET", "/v1/nodes/{node_id}", "any:viewer", "/v1/nodes/n9"),
    Row("POST", "/v1/nodes/{node_id}/drain", "platform", "/v1/nodes/n9/drain"),
    Row("POST", "/v1/nodes/{node_id}/undrain", "platform", "/v1/nodes/n9/undrain"),
    Row("POST", "/v1/internal/drain", "internal", body={"draining": False}),
    Row("GET", "/v1/whoami", "auth"),
    Row("POST", "/v1/teams", "platform", body={"name": "newteam"}),
    Row("GET", "/v1/teams", "any:viewer"),
    Row("GET", "/v1/teams/{team}", "team:viewer", f"/v1/teams/{OWN}"),
    Row(
        "PUT",
        "/v1/teams/{team}/members/{identity}",
        "team:admin",
        f"/v1/teams/{OWN}/members/newbie",
        {"role": "viewer"},
    ),
    Row(
        "DELETE",
        "/v1/teams/{team}/members/{identity}",
        "team:admin",
        f"/v1/teams/{OWN}/members/victim",
    ),
    Row("POST", "/v1/tokens", "platform", body={"identity": "victim"}),
    Row("GET", "/v1/tokens", "auth"),
    Row("DELETE", "/v1/tokens/{token_id}", "platform", "/v1/tokens/{victim_token}"),
    Row("GET", "/v1/audit", "any:admin"),
    Row(
        "POST",
        "/v1/failovers",
        "every:operator",
        body={"source": "local", "selector": {"all": True}, "dry_run": True},
    ),
    Row("GET", "/v1/failovers", "every:viewer"),
    Row("GET", "/v1/failovers/{operation_id}", "every:viewer", "/v1/failovers/{failover}"),
    Row(
        "POST",
        "/v1/failovers/{operation_id}/cancel",
        "every:operator",
        "/v1/failovers/{failover}/cancel",
    ),
    # bulk operations: a team's operator acts on its own team's jobs (the selection is limited
    # to them), so any operator may plan one; an operation it may not see is a 404
    Row(
        "POST",
        "/v1/operations",
        "any:operator",
        body={"kind": "stop", "selector": {"all": True}, "dry_run": True},
    ),
    Row("GET", "/v1/operations", "any:viewer"),
    Row("GET", "/v1/operations/{operation_id}", "any:viewer", "/v1/operations/{failover}"),
    Row(
        "POST",
        "/v1/operations/{operation_id}/cancel",
        "any:operator",
        "/v1/operations/{failover}/cancel",
    ),
    Row("GET", "/v1/quotas", "any:viewer"),
    Row("GET", "/v1/quotas/{business}", "any:viewer", "/v1/quotas/ads"),
    Row("PUT", "/v1/quotas/{business}", "platform", "/v1/quotas/ads", {"rate": 5, "burst": 10}),
    Row("DELETE", "/v1/quotas/{business}", "platform", "/v1/quotas/ads"),
    Row("GET", "/v1/groups/{name}/auto-failover", "any:viewer", "/v1/groups/default/auto-failover"),
    Row(
        "PUT",
        "/v1/groups/{name}/auto-failover",
        "platform",
        "/v1/groups/default/auto-failover",
        {"enabled": True, "after_seconds": 60, "min_priority": "high"},
    ),
    # automatic failover platform-wide: a platform operator's switch
    Row("GET", "/v1/auto-failover", "every:viewer"),
    Row("POST", "/v1/auto-failover/pause", "every:operator", body={"reason": "a drill"}),
    Row("POST", "/v1/auto-failover/resume", "every:operator", body={"reason": "drill over"}),
    Row(
        "POST",
        "/v1/auto-failover/clusters/{name}/clear",
        "every:operator",
        "/v1/auto-failover/clusters/local/clear",
        {"reason": "vouched for"},
    ),
    Row("POST", "/v1/alert-channels", "platform", body={"name": "new", "url": HOOK}),
    Row("GET", "/v1/alert-channels", "platform"),
    Row("GET", "/v1/alert-channels/{name}", "platform", "/v1/alert-channels/plat"),
    Row("DELETE", "/v1/alert-channels/{name}", "platform", "/v1/alert-channels/plat"),
    Row("POST", "/v1/alert-channels/{name}/test", "platform", "/v1/alert-channels/plat/test"),
    Row(
        "POST",
        "/v1/teams/{team}/alert-channels",
        "team:admin",
        f"/v1/teams/{OWN}/alert-channels",
        {"name": "new", "url": HOOK},
    ),
    Row("GET", "/v1/teams/{team}/alert-channels", "team:viewer", f"/v1/teams/{OWN}/alert-channels"),
    Row(
        "DELETE",
        "/v1/teams/{team}/alert-channels/{name}",
        "team:admin",
        f"/v1/teams/{OWN}/alert-channels/mine",
    ),
    Row(
        "POST",
        "/v1/teams/{team}/alert-channels/{name}/test",
        "team:admin",
        f"/v1/teams/{OWN}/alert-channels/mine/test",
    ),
    Row("GET", "/v1/alerts", "any:viewer"),
    Row("GET", "/v1/overview", "any:viewer"),
]

#: subject -> (team, role); None = anonymous, "*" = platform admin
SUBJECTS: dict[str, tuple[str, Role] | None] = {
    "anonymous": None,
    "viewer-own": (OWN, Role.VIEWER),
    "operator-own": (OWN, Role.OPERATOR),
    "admin-own": (OWN, Role.ADMIN),
    "viewer-other": (OTHER, Role.VIEWER),
    "operator-other": (OTHER, Role.OPERATOR),
    "admin-other": (OTHER, Role.ADMIN),
    "platform-viewer": ("*", Role.VIEWER),
    "platform-operator": ("*", Role.OPERATOR),
    "platform-admin": ("*", Role.ADMIN),
}


def allowed(need: Need, subject: tuple[str, Role] | None) -> bool:
    if need == "public":
        return True
    if subject is None or need == "internal":
        return False
    team, role = subject
    if need == "auth":
        return True
    if need == "platform":
        return team == "*" and role == Role.ADMIN
    scope, _, least = need.partition(":")
    enough = role >= Role.parse(least)
    if scope == "any":
        return enough
    if scope == "every":
        return enough and team == "*"
    return enough and team in (OWN, "*")


@dataclass
class World:
    db: Path
    tokens: dict[str, str]
    victim_token: int
    settings: Settings
    failover: int


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A template store: job ``orders`` of team ads, teams ads and web, a spare group, the
    subjects' tokens, and ``victim`` (a viewer of ads with a token)."""
    tmp = tmp_path_factory.mktemp("matrix")
    settings = Settings(data_dir=tmp / "data", node_id="matrix", artifact_roots="/opt/pipelines/")
    store = Store(f"sqlite:///{tmp / 'template.db'}")
    store.upgrade()
    ensure_defaults(store, settings)
    with store.transaction() as session:
        jobs_store.create_job(
            session, JobSpec(name=JOB, entrypoint=PIPELINE, team=OWN), cause="test", node_id="t"
        )
        from scheduler.store import catalog

        catalog.create_group(session, "spare", primary_cluster="local", failover_cluster=None)
        quotas.put_quota(session, "ads", QuotaSpec(rate=5.0, burst=10), by="root")
    tokens = {}
    for name, subject in SUBJECTS.items():
        if subject is None:
            continue
        team, role = subject
        if team == "*" and role == Role.ADMIN:
            tokens[name] = admin_token(store, "root")
        else:
            tokens[name] = member_token(store, name, team, role)
    member_token(store, "victim", OWN, Role.VIEWER)
    with store.transaction() as session:
        for name, team in (("plat", "*"), ("mine", OWN)):
            alerts.create_channel(session, ChannelRecord(0, name, ChannelKind.WEBHOOK, HOOK, team))
    with store.session() as session:
        victim = identities.list_tokens(session, identities=frozenset({"victim"}))[0].id
    with store.transaction() as session:  # a failover nobody executes (no node runs here)
        failover = operations.create_operation(
            session,
            kind=OperationKind.FAILOVER,
            home_group="default",
            source_cluster="local",
            target_cluster=None,
            selector={"all": True},
            options={},
            reason="matrix",
            created_by="root",
            plan_digest="00",
            items=[operations.NewItem(None, JOB, "move", "planned", "PENDING")],
        ).id
    store.dispose()
    yield World(tmp / "template.db", tokens, victim, settings, failover)


def _app_routes() -> set[tuple[str, str]]:
    app = create_app(NodeContext(Settings(node_id="x"), Store("sqlite://")))
    routes = set(api_routes(app.routes))
    assert ("GET", "/v1/jobs/{name}") in routes  # the walk sees through included routers
    return routes


def test_every_route_has_a_row_and_a_rule() -> None:
    routes = _app_routes()
    rows = {(r.method, r.template) for r in TABLE}
    assert routes - rows == set(), "routes without a row in the authorization matrix"
    assert rows - routes == set(), "rows in the authorization matrix for routes that do not exist"
    assert routes - set(RULES) == set(), "routes without an authorization rule"


@pytest.mark.parametrize("row", TABLE, ids=lambda r: f"{r.method} {r.template}")
def test_authorization_matrix(row: Row, world: World, tmp_path: Path) -> None:
    # every subject calls on a fresh copy of the template store; one app serves them all (its
    # first request builds every route's dependencies, the costly part of a test app), each copy
    # put in place of the last while the store holds no connection
    db = tmp_path / "matrix.db"
    store = Store(f"sqlite:///{db}")
    app = create_app(NodeContext(world.settings, store))
    url = row.url.replace("{victim_token}", str(world.victim_token)).replace(
        "{failover}", str(world.failover)
    )
    try:
        for name, subject in SUBJECTS.items():
            store.dispose()
            for leftover in (db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
                leftover.unlink(missing_ok=True)  # the last copy's, if its close left them
            shutil.copyfile(world.db, db)
            headers = dict(CLIENT_HEADERS) if subject is None else auth_headers(world.tokens[name])
            before = store_fingerprint(store)
            with TestClient(app, base_url="http://127.0.0.1") as client:
                response = client.request(
                    row.method,
                    url,
                    headers=headers,
                    **({"json": row.body} if row.body is not None else {}),
                )
            what = f"{name}: {row.method} {url} -> {response.status_code} {response.text[:200]}"
            assert response.status_code < 500, what
            if allowed(row.need, subject):
                assert response.status_code not in (401, 403), what
            else:
                assert response.status_code == (401 if subject is None else 403), what
                assert response.headers["content-type"] == "application/problem+json", what
                assert response.json()["status"] == response.status_code
                assert store_fingerprint(store) == before, f"{what}: the store changed"
    finally:
        store.dispose()


def test_listings_show_only_the_callers_teams(world: World, tmp_path: Path) -> None:
    db = tmp_path / "list.db"
    shutil.copyfile(world.db, db)
    store = Store(f"sqlite:///{db}")
    app = create_app(NodeContext(world.settings, store))
    try:
        with TestClient(app, base_url="http://127.0.0.1") as client:

            def names(who: str) -> list[str]:
                page = client.get("/v1/jobs", headers=auth_headers(world.tokens[who])).json()
                return [j["name"] for j in page["data"]]

            assert names("viewer-own") == [JOB]
            assert names("operator-other") == []
            assert names("platform-admin") == [JOB]
            teams = client.get("/v1/teams", headers=auth_headers(world.tokens["admin-other"]))
            assert [t["name"] for t in teams.json()["data"]] == [OTHER]
    finally:
        store.dispose()
