"""The authorization matrix: every route x every kind of caller gets the expected outcome, from
one table.

Callers: nobody; a viewer, operator and admin of the job's team and of another team; a platform
viewer, operator and admin; a read-only token and a short-lived token of the job's team's
operator; a JWT of the platform's issuer (operator of the job's team); a pipeline's fencing
token (of a run of the job); and another node (the deployment secret).

The table below is written independently of ``api/security/rules.py``: it states what the
product promises. The test fails when the application has a route without a row here (or
without a rule there). A refused request is a 401 (no valid credential for it) or 403 problem
document and changes nothing in the store; an allowed one answers the success status the
OpenAPI document gives for its operation.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import NodeContext
from api.security.rules import RULES, api_routes
from scheduler.config import DEVELOPMENT_SECRET, Settings
from scheduler.coordination.zookeeper import GroupView, MemberInfo
from scheduler.core.records import JobSpec
from scheduler.core.states import DesiredState
from scheduler.decisions.alerts import ChannelKind, ChannelRecord
from scheduler.decisions.catalog import ClusterSpec
from scheduler.decisions.health import ClusterHealth
from scheduler.decisions.identity import Role, Scope
from scheduler.decisions.membership import MembershipSnapshot, Mode, NodeCard
from scheduler.decisions.operations.model import OperationKind
from scheduler.decisions.quotas import QuotaSpec
from scheduler.store import alerts, catalog, identities, operations, quotas
from scheduler.store import health as health_store
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
from tests.support.runs import record_run

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

OWN, OTHER = "ads", "web"
RUNNING = DesiredState.RUNNING
HOOK = "http://127.0.0.1:9/hook"
JOB = "orders"
#: a job of the same team that runs (stop, restart)
LIVE = "orders-live"
#: the node the matrix's app is (its membership is stubbed: it and one other live member)
NODE = "matrix"
PIPELINE = "/opt/pipelines/p.py"

#: who may: public | auth (any credential) | team:<role> (on the job's/team's team) |
#: any:<role> (on some team) | every:<role> (that role on '*': every team) | platform (admin
#: on '*') | internal (deployment secret only) | seen:<role> (the role on some team lets the
#: call through, but only the team's members and '*' see the resource: 404 for the others)
Need = str


@dataclass(frozen=True)
class Row:
    method: str
    template: str
    need: Need
    path: str = ""
    body: Any = None
    #: the success status of an allowed caller, when the operation documents more than one
    #: (a dry run's 200 beside an execution's 201) or none (the internal routes)
    success: int | None = None

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
    Row("POST", "/v1/jobs/{name}/stop", "team:operator", f"/v1/jobs/{LIVE}/stop"),
    Row("POST", "/v1/jobs/{name}/restart", "team:operator", f"/v1/jobs/{LIVE}/restart"),
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
    # a driver log may hold the pipeline's data: the job's team only, never anonymous; the
    # run was never submitted, so an allowed caller learns that (404) and nothing more
    Row(
        "GET",
        "/v1/jobs/{name}/runs/{attempt}/log",
        "team:viewer",
        f"/v1/jobs/{JOB}/runs/1/log",
        success=404,
    ),
    Row(
        "GET",
        "/v1/internal/jobs/{name}/runs/{attempt}/log",
        "internal",
        f"/v1/internal/jobs/{JOB}/runs/1/log",
        success=404,
    ),
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
    Row("POST", "/v1/clusters/{name}/clear", "any:operator", "/v1/clusters/marked/clear", {}),
    Row("POST", "/v1/groups", "platform", body={"name": "g2", "primary_cluster": "local"}),
    Row("GET", "/v1/groups", "any:viewer"),
    Row("GET", "/v1/groups/{name}", "any:viewer", "/v1/groups/default"),
    Row(
        "PATCH", "/v1/groups/{name}", "platform", "/v1/groups/default", {"primary_cluster": "local"}
    ),
    Row("DELETE", "/v1/groups/{name}", "platform", "/v1/groups/spare"),
    Row("GET", "/v1/nodes", "any:viewer"),
    Row("POST", "/v1/internal/nudge", "internal", body={"group": "default"}, success=202),
    Row("GET", "/v1/nodes/{node_id}", "any:viewer", f"/v1/nodes/{NODE}"),
    Row("POST", "/v1/nodes/{node_id}/drain", "platform", f"/v1/nodes/{NODE}/drain"),
    Row("POST", "/v1/nodes/{node_id}/undrain", "platform", f"/v1/nodes/{NODE}/undrain"),
    Row("POST", "/v1/internal/drain", "internal", body={"draining": False}, success=202),
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
        success=200,
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
    # to them), so any operator may plan one; an operation it may not see is a 404 (``seen``)
    Row(
        "POST",
        "/v1/operations",
        "any:operator",
        body={"kind": "stop", "selector": {"all": True}, "dry_run": True},
        success=200,
    ),
    Row("GET", "/v1/operations", "any:viewer"),
    Row("GET", "/v1/operations/{operation_id}", "seen:viewer", "/v1/operations/{bulk}"),
    Row(
        "POST",
        "/v1/operations/{operation_id}/cancel",
        "seen:operator",
        "/v1/operations/{bulk}/cancel",
    ),
    Row("GET", "/v1/quotas", "any:viewer"),
    Row("GET", "/v1/quotas/{business}", "any:viewer", "/v1/quotas/ads"),
    Row(
        "PUT",
        "/v1/quotas/{business}",
        "platform",
        "/v1/quotas/ads",
        {"rate": 5, "burst": 10},
        success=200,  # it exists: replaced
    ),
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
    Row("GET", "/v1/overview/history", "any:viewer"),
]


@dataclass(frozen=True)
class Subject:
    """A kind of caller: its credential and what it holds."""

    #: ``token`` (an API token), ``jwt``, ``fencing`` (a run's token), ``node`` (the deployment
    #: secret), ``anonymous``
    kind: str
    team: str = ""
    role: Role = Role.VIEWER
    #: a token of the read scope only
    read_only: bool = False
    #: the token expires soon (its rights are no different)
    short_lived: bool = False


SUBJECTS: dict[str, Subject] = {
    "anonymous": Subject("anonymous"),
    "viewer-own": Subject("token", OWN, Role.VIEWER),
    "operator-own": Subject("token", OWN, Role.OPERATOR),
    "admin-own": Subject("token", OWN, Role.ADMIN),
    "viewer-other": Subject("token", OTHER, Role.VIEWER),
    "operator-other": Subject("token", OTHER, Role.OPERATOR),
    "admin-other": Subject("token", OTHER, Role.ADMIN),
    "platform-viewer": Subject("token", "*", Role.VIEWER),
    "platform-operator": Subject("token", "*", Role.OPERATOR),
    "platform-admin": Subject("token", "*", Role.ADMIN),
    "read-only": Subject("token", OWN, Role.OPERATOR, read_only=True),
    "short-lived": Subject("token", OWN, Role.OPERATOR, short_lived=True),
    "jwt": Subject("jwt", OWN, Role.OPERATOR),
    "fencing-token": Subject("fencing"),
    "deployment-secret": Subject("node"),
}


def allowed(row: Row, subject: Subject) -> bool:
    need = row.need
    if need == "public":
        return True
    if subject.kind == "anonymous":
        return False
    if subject.kind == "fencing":  # its own job's fence check, nothing else
        return (row.method, row.template) == ("GET", "/v1/jobs/{name}/fence")
    if subject.kind == "node" or need == "internal":
        return subject.kind == "node" and need == "internal"
    if subject.read_only and row.method != "GET":
        return False
    team, role = subject.team, subject.role
    if need == "auth":
        return True
    if need == "platform":
        return team == "*" and role == Role.ADMIN
    scope, _, least = need.partition(":")
    enough = role >= Role.parse(least)
    if scope == "any" or (scope == "seen" and not hidden(row, subject)):
        return enough and (scope == "any" or team in (OWN, "*"))
    if scope == "every":
        return enough and team == "*"
    return enough and team in (OWN, "*")


def hidden(row: Row, subject: Subject) -> bool:
    """An allowed call whose resource the subject does not see (its team's only): a 404."""
    scope, _, least = row.need.partition(":")
    return (
        scope == "seen"
        and subject.kind in ("token", "jwt")
        and subject.team not in (OWN, "*")
        and subject.role >= Role.parse(least)
        and not (subject.read_only and row.method != "GET")
    )


def refusal(subject: Subject) -> int:
    """What a refused subject is answered: 401 when its credential proves nothing there."""
    return 401 if subject.kind in ("anonymous", "fencing") else 403


@dataclass
class World:
    db: Path
    #: subject -> the headers of its credential
    headers: dict[str, dict[str, str]]
    victim_token: int
    settings: Settings
    failover: int
    #: a bulk operation of the job's team
    bulk: int


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A template store: job ``orders`` of team ads, teams ads and web, a spare group, the
    subjects' tokens, and ``victim`` (a viewer of ads with a token)."""
    tmp = tmp_path_factory.mktemp("matrix")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": "k1", "use": "sig", "alg": "RS256"})
    jwks = tmp / "jwks.json"
    jwks.write_text(json.dumps({"keys": [jwk]}))
    settings = Settings(
        data_dir=tmp / "data",
        node_id=NODE,
        artifact_roots="/opt/pipelines/",
        jwt_issuer="https://sso.example",
        jwt_audience="drover",
        jwt_jwks_file=jwks,
        alert_allowed_hosts="127.0.0.1",  # the channels' receiver (never called here)
    )
    store = Store(f"sqlite:///{tmp / 'template.db'}")
    store.upgrade()
    ensure_defaults(store, settings)
    with store.transaction() as session:
        jobs_store.create_job(
            session, JobSpec(name=JOB, entrypoint=PIPELINE, team=OWN), cause="test", node_id="t"
        )

        catalog.create_group(session, "spare", primary_cluster="local", failover_cluster=None)
        quotas.put_quota(session, "ads", QuotaSpec(rate=5.0, burst=10), by="root")
        run = record_run(session, JOB, node_id=NODE)  # the fencing token's run, this node's
        # a revision to roll back to
        jobs_store.update_job_spec(
            session, JOB, {"business": "b1"}, expected_version=None, cause="test", node_id="t"
        )
        # a job that runs
        wanted = JobSpec(name=LIVE, entrypoint=PIPELINE, team=OWN, desired_state=RUNNING)
        jobs_store.create_job(session, wanted, cause="test", node_id="t")
        record_run(session, LIVE, started=True)
        # a cluster marked abnormal by hand (clear)
        catalog.create_cluster(
            session,
            "marked",
            ClusterSpec(
                kind="spark-submit",
                master_url="spark://127.0.0.1:7077",
                storage_root="/tmp/drover-matrix-marked",
            ),
        )
        health_store.operator_change(
            session,
            "marked",
            ClusterHealth.MANUAL_ABNORMAL,
            reason="maintenance",
            actor="root",
            node_id="t",
        )
    headers: dict[str, dict[str, str]] = {}
    soon = datetime.now(UTC) + timedelta(hours=1)
    for name, subject in SUBJECTS.items():
        if subject.kind == "anonymous":
            headers[name] = dict(CLIENT_HEADERS)
        elif subject.kind == "fencing":
            headers[name] = {**CLIENT_HEADERS, "X-Drover-Fencing-Token": run.fencing_secret or ""}
        elif subject.kind == "node":
            headers[name] = {**CLIENT_HEADERS, "X-Drover-Node-Secret": DEVELOPMENT_SECRET}
        elif subject.kind == "jwt":
            claims = {
                "iss": "https://sso.example",
                "aud": "drover",
                "sub": "sso-user",
                "exp": int(time.time()) + 86400,
                "drover_roles": {subject.team: str(subject.role)},
            }
            signed = jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})
            headers[name] = auth_headers(signed)
        elif subject.team == "*" and subject.role == Role.ADMIN:
            headers[name] = auth_headers(admin_token(store, "root"))
        else:
            secret = member_token(store, name, subject.team, subject.role)
            if subject.read_only or subject.short_lived:
                with store.transaction() as session:
                    secret, _ = identities.create_token(
                        session,
                        name,
                        scopes=frozenset({Scope.READ})
                        if subject.read_only
                        else frozenset({Scope.READ, Scope.WRITE}),
                        expires_at=soon if subject.short_lived else None,
                    )
                    secret = secret.secret
            headers[name] = auth_headers(secret)
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
        bulk = operations.create_operation(  # a bulk stop of the team's jobs, under way
            session,
            kind=OperationKind.STOP,
            home_group="default",
            source_cluster=None,
            target_cluster=None,
            selector={"teams": [OWN]},
            options={},
            reason="matrix",
            created_by="root",
            plan_digest="00",
            items=[operations.NewItem(None, LIVE, "stop", "planned", "PENDING")],
            team=OWN,
        ).id
    store.dispose()
    yield World(tmp / "template.db", headers, victim, settings, failover, bulk)


def documented_success(app: Any, row: Row) -> int:
    """The success status the OpenAPI document gives ``row``'s operation (its one 2xx)."""
    operation = app.openapi()["paths"][row.template][row.method.lower()]
    codes = sorted(int(c) for c in operation["responses"] if str(c).startswith("2"))
    assert len(codes) == 1, (row, codes)
    return codes[0]


def two_members() -> MembershipSnapshot:
    """The matrix's node and one more, live in the default group (drains may go through)."""

    def member(node_id: str) -> MemberInfo:
        return MemberInfo(node_id, "active", "az-1", "test", f"http://{node_id}", 1.0)

    group = GroupView("default", (member(NODE), member("n2")), 7, 1)
    card = NodeCard(NODE, f"http://{NODE}", "az-1", "test", None, {"default": "active"})
    return MembershipSnapshot(Mode.ZOOKEEPER, "CONNECTED", card, {"default": group})


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
    app = create_app(
        NodeContext(world.settings, store, views=two_members, set_draining=lambda on: {})
    )
    url = (
        row.url.replace("{victim_token}", str(world.victim_token))
        .replace("{failover}", str(world.failover))
        .replace("{bulk}", str(world.bulk))
    )
    success = row.success or documented_success(app, row)
    try:
        for name, subject in SUBJECTS.items():
            store.dispose()
            for leftover in (db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
                leftover.unlink(missing_ok=True)  # the last copy's, if its close left them
            shutil.copyfile(world.db, db)
            headers = world.headers[name]
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
            if hidden(row, subject):
                assert response.status_code == 404, what
                assert store_fingerprint(store) == before, f"{what}: the store changed"
            elif allowed(row, subject):
                assert response.status_code == success, f"{what} (documented: {success})"
            else:
                assert response.status_code == refusal(subject), what
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
                page = client.get("/v1/jobs", headers=world.headers[who]).json()
                return [j["name"] for j in page["data"]]

            assert names("viewer-own") == [JOB, LIVE]
            assert names("operator-other") == []
            assert names("platform-admin") == [JOB, LIVE]
            assert names("jwt") == [JOB, LIVE] and names("read-only") == [JOB, LIVE]
            teams = client.get("/v1/teams", headers=world.headers["admin-other"])
            assert [t["name"] for t in teams.json()["data"]] == [OTHER]
    finally:
        store.dispose()
