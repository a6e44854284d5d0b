"""Identity, permissions and safe submission through the real API on a real store.

Tokens (shown once, hashed, expiry, revocation), the hostile tenant at the API, JWTs from a
configured issuer (keys generated here), the external permission center (a small HTTP service
started here), the audit trail, the browser-safety edge, secrets from files, and the CLI's
bootstrap and login.
"""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi.testclient import TestClient
from sqlalchemy import update
from typer.testing import CliRunner

from api.app import create_app
from api.deps import NodeContext
from scheduler.config import DEVELOPMENT_SECRET, Settings, load_settings
from scheduler.core.errors import InvalidInput
from scheduler.decisions.identity import token_digest
from scheduler.store import models
from scheduler.store.db import Store
from tests.conftest import wait_until
from tests.support.auth import (
    admin_token,
    auth_headers,
    member_token,
    store_fingerprint,
)

pytestmark = pytest.mark.integration

PIPELINE = "/opt/pipelines/p.py"


def client_for(settings: Settings, store: Store, **kw: Any) -> TestClient:
    return TestClient(create_app(NodeContext(settings, store)), base_url="http://127.0.0.1", **kw)


@pytest.fixture
def api(store: Store, settings: Settings) -> Iterator[TestClient]:
    with client_for(settings, store) as c:
        yield c


def job(api: TestClient, token: str, name: str, team: str, **extra: Any) -> Any:
    body = {"name": name, "entrypoint": PIPELINE, "team": team, **extra}
    return api.post("/v1/jobs", json=body, headers=auth_headers(token))


# --------------------------------------------------------------------------- tokens


def test_token_shown_once_stored_hashed_expires_and_revokes(api: TestClient, store: Store) -> None:
    root = admin_token(store)
    created = api.post("/v1/tokens", json={"identity": "admin"}, headers=auth_headers(root))
    assert created.status_code == 201, created.text
    secret = created.json()["token"]
    assert api.get("/v1/whoami", headers=auth_headers(secret)).json()["subject"] == "user:admin"
    listing = api.get("/v1/tokens", headers=auth_headers(root)).text
    assert secret not in listing and created.json()["prefix"] in listing
    with store.session() as s:
        digests = [t.digest for t in s.query(models.ApiToken)]
    assert token_digest(secret) in digests and secret not in json.dumps(digests)

    # revoked: refused from the next request on
    token_id = created.json()["id"]
    assert api.delete(f"/v1/tokens/{token_id}", headers=auth_headers(root)).status_code == 200
    refused = api.get("/v1/whoami", headers=auth_headers(secret))
    assert refused.status_code == 401
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.headers["www-authenticate"].startswith("Bearer")
    assert secret not in refused.text

    # expired (moved in the store behind the node's back: that applies once the node's cache of
    # verified tokens no longer holds it, within DROVER_TOKEN_CACHE_SECONDS; emptied here)
    other = member_token(store, "carol", "ads", "viewer")
    assert api.get("/v1/whoami", headers=auth_headers(other)).status_code == 200
    with store.transaction() as s:
        s.execute(
            update(models.ApiToken)
            .where(models.ApiToken.digest == token_digest(other))
            .values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
        )
    api.app.state.token_cache.clear()  # type: ignore[attr-defined]
    assert api.get("/v1/whoami", headers=auth_headers(other)).status_code == 401


def test_read_only_token_and_own_tokens(api: TestClient, store: Store) -> None:
    op = member_token(store, "olga", "ads", "operator")
    ro = api.post("/v1/tokens", json={"scopes": ["read"]}, headers=auth_headers(op))
    assert ro.status_code == 201, ro.text  # one's own token needs no admin
    reader = ro.json()["token"]
    assert job(api, op, "mine", "ads").status_code == 201
    assert api.get("/v1/jobs/mine", headers=auth_headers(reader)).status_code == 200
    assert api.post("/v1/jobs/mine/start", headers=auth_headers(reader)).status_code == 403
    # somebody else's token: platform admins only
    theirs = api.post("/v1/tokens", json={"identity": "admin"}, headers=auth_headers(op))
    assert theirs.status_code == 403


def test_garbage_credentials_are_401_problems(api: TestClient) -> None:
    for value in ("Bearer drv_" + "x" * 40, "Bearer a.b.c", "Basic dXNlcjpwdw==", "Bearer"):
        r = api.get("/v1/jobs", headers={"Authorization": value})
        assert r.status_code == 401, value
        assert r.json()["type"] == "urn:drover:problem:unauthenticated"


# --------------------------------------------------------------------------- hostile tenant


def test_hostile_tenant_at_the_api(api: TestClient, store: Store) -> None:
    a_op = member_token(store, "alice", "team-a", "operator")
    b_op = member_token(store, "bob", "team-b", "operator")
    assert job(api, b_op, "b-job", "team-b").status_code == 201
    before = store_fingerprint(store)
    h = auth_headers(a_op)
    assert api.get("/v1/jobs/b-job", headers=h).status_code == 403
    assert api.get("/v1/jobs/b-job/runs", headers=h).status_code == 403
    assert api.get("/v1/jobs/b-job/fence", headers=h).status_code == 403
    assert api.patch("/v1/jobs/b-job", json={"args": ["x"]}, headers=h).status_code == 403
    for command in ("start", "stop", "restart"):
        assert api.post(f"/v1/jobs/b-job/{command}", headers=h).status_code == 403
    assert api.delete("/v1/jobs/b-job", headers=h).status_code == 403
    assert api.get("/v1/jobs", headers=h).json()["data"] == []
    # cannot take the job over by moving it into team A either, nor create in team B
    assert api.patch("/v1/jobs/b-job", json={"team": "team-a"}, headers=h).status_code == 403
    assert job(api, a_op, "sneaky", "team-b").status_code == 403
    assert store_fingerprint(store) == before

    outside = job(api, a_op, "escape", "team-a", entrypoint="/etc/evil.py")
    assert outside.status_code == 422
    assert outside.json()["type"] == "urn:drover:problem:refused-submission"
    traversal = job(api, a_op, "escape", "team-a", entrypoint="/opt/pipelines/../../tmp/x.py")
    assert traversal.status_code == 422
    for key, value in (
        ("spark.driver.extraJavaOptions", "-javaagent:/tmp/x.jar"),
        ("spark.jars", "https://attacker.example/x.jar"),
        ("spark.drover.fencingToken", "forged"),
    ):
        refused = job(api, a_op, "conf", "team-a", conf={key: value})
        assert refused.status_code == 422, key
        assert refused.json()["properties"] == [key]
    assert store_fingerprint(store) == before
    assert (
        job(api, a_op, "fine", "team-a", conf={"spark.sql.shuffle.partitions": "4"}).status_code
        == 201
    )
    # a team admin may set what the allow-list does not name
    a_admin = member_token(store, "ann", "team-a", "admin")
    extra = {"spark.driver.extraJavaOptions": "-Dx=1"}
    assert job(api, a_admin, "tuned", "team-a", conf=extra).status_code == 201


def test_cluster_artifact_roots(api: TestClient, store: Store, tmp_path: Path) -> None:
    root = auth_headers(admin_token(store))
    roots = {"artifact_roots": ["s3a://bucket/pipelines/"]}
    assert api.patch("/v1/clusters/local", json=roots, headers=root).status_code == 200
    assert job(api, admin_token(store, "a2"), "x", "", entrypoint=PIPELINE).status_code == 422
    ok = api.post(
        "/v1/jobs",
        json={"name": "x", "entrypoint": "file:///opt/pipelines/p.py"},
        headers=root,
    )
    assert ok.status_code == 422  # the cluster's own roots replace the node's default
    cluster = api.get("/v1/clusters/local", headers=root).json()
    assert cluster["artifact_roots"] == ["s3a://bucket/pipelines/"]


# --------------------------------------------------------------------------- JWT


@pytest.fixture
def issuer(tmp_path: Path) -> dict[str, Any]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    jwk.update({"kid": "k1", "use": "sig", "alg": "RS256"})
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps({"keys": [jwk]}))
    return {"key": key, "jwks": jwks, "iss": "https://sso.example", "aud": "drover"}


def sign(issuer: dict[str, Any], **claims: Any) -> str:
    now = int(time.time())
    body = {
        "iss": issuer["iss"],
        "aud": issuer["aud"],
        "sub": "dana",
        "iat": now,
        "exp": now + 300,
        "drover_roles": {"ads": "operator"},
        **claims,
    }
    return jwt.encode(
        body, issuer.pop("_key", issuer["key"]), algorithm="RS256", headers={"kid": "k1"}
    )


def test_jwt_from_the_configured_issuer(
    store: Store, tmp_path: Path, issuer: dict[str, Any]
) -> None:
    settings = Settings(
        data_dir=tmp_path / "d",
        node_id="jwt",
        artifact_roots="/opt/pipelines/",
        jwt_issuer=issuer["iss"],
        jwt_audience=issuer["aud"],
        jwt_jwks_file=issuer["jwks"],
    )
    with client_for(settings, store) as api:
        good = sign(issuer)
        me = api.get("/v1/whoami", headers=auth_headers(good)).json()
        permissions = me.pop("permissions")
        assert me == {
            "subject": "jwt:dana",
            "identity": None,
            "roles": {"ads": "operator"},
            "scopes": ["read", "write"],
        }
        assert permissions["job.write"] == ["ads"] and "catalog.write" not in permissions
        assert job(api, good, "sso-job", "ads").status_code == 201
        assert job(api, good, "sso-job-2", "web").status_code == 403

        now = int(time.time())
        other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        bad = {
            "expired": sign(issuer, exp=now - 120, iat=now - 600),
            "wrong audience": sign(issuer, aud="someone-else"),
            "wrong issuer": sign(issuer, iss="https://evil.example"),
            "unsigned": jwt.encode(
                {
                    "iss": issuer["iss"],
                    "aud": issuer["aud"],
                    "sub": "x",
                    "exp": now + 60,
                    "drover_roles": {"*": "admin"},
                },
                key=None,
                algorithm="none",
            ),
            "forged": jwt.encode(
                {
                    "iss": issuer["iss"],
                    "aud": issuer["aud"],
                    "sub": "x",
                    "exp": now + 60,
                    "drover_roles": {"*": "admin"},
                },
                other_key,
                algorithm="RS256",
                headers={"kid": "k1"},
            ),
        }
        for what, credential in bad.items():
            r = api.get("/v1/jobs", headers=auth_headers(credential))
            assert r.status_code == 401, what
            assert r.headers["content-type"] == "application/problem+json", what
            assert r.json()["type"] == "urn:drover:problem:unauthenticated", what


# --------------------------------------------------------------------------- permission center


class Center:
    """A tiny permission center: allows what ``allow`` says, counts the questions."""

    def __init__(self) -> None:
        self.allow: set[str] = set()
        self.calls: list[dict[str, Any]] = []
        center = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                center.calls.append(body)
                answer = json.dumps({"allow": body["action"] in center.allow}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/decide"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def test_external_permission_center(store: Store, tmp_path: Path) -> None:
    center = Center()
    try:
        settings = Settings(
            data_dir=tmp_path / "d",
            node_id="pc",
            artifact_roots="/opt/pipelines/",
            authz_url=center.url,
            authz_cache_seconds=2.0,
        )
        # the center decides, whatever the built-in bindings would say
        token = member_token(store, "pat", "ads", "viewer")
        with client_for(settings, store) as api:
            center.allow = {"job.read", "job.write"}
            assert job(api, token, "pc-job", "ads").status_code == 201  # a viewer, allowed
            assert api.get("/v1/jobs/pc-job", headers=auth_headers(token)).status_code == 200
            asked = [c for c in center.calls if c["action"] == "job.read"]
            assert asked[-1] == {
                "subject": "user:pat",
                "action": "job.read",
                "resource": "job/pc-job",
                "team": "ads",
                "roles": {"ads": "viewer"},
            }
            # cached: the same question within the cache window is not asked again
            calls = len(center.calls)
            assert api.get("/v1/jobs/pc-job", headers=auth_headers(token)).status_code == 200
            assert len(center.calls) == calls
            # a denial is followed (a viewer the built-in bindings would never let mark)...
            mark = {"reason": "maintenance"}
            r = api.post("/v1/clusters/local/mark-abnormal", json=mark, headers=auth_headers(token))
            assert r.status_code == 403
            # ...and so is a change of mind, once the cached answer expires
            center.allow.add("cluster.mark")
            wait_until(
                lambda: (
                    api.post(
                        "/v1/clusters/local/mark-abnormal", json=mark, headers=auth_headers(token)
                    ).status_code
                    == 200
                ),
                timeout=10,
                what="the permission center's new answer",
            )
            # down: fail closed with a 503 problem (after the cache expires)
            center.stop()
            before = store_fingerprint(store)
            deadline = time.monotonic() + 10
            while True:
                r = api.get("/v1/jobs/pc-job", headers=auth_headers(token))
                if r.status_code != 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert r.status_code == 503, r.text
            assert r.json()["type"] == "urn:drover:problem:permission-center-unavailable"
            r = api.post("/v1/jobs/pc-job/stop", headers=auth_headers(token))
            assert r.status_code == 503
            assert store_fingerprint(store) == before
    finally:
        center.server.server_close()


# --------------------------------------------------------------------------- audit


def test_audit_before_after_filters_and_cursor(api: TestClient, store: Store) -> None:
    root_token = admin_token(store)
    root = auth_headers(root_token)
    assert job(api, root_token, "audited", "ads").status_code == 201
    assert api.patch("/v1/jobs/audited", json={"business": "b2"}, headers=root).status_code == 200
    mark = api.post("/v1/clusters/local/mark-abnormal", json={"reason": "maint"}, headers=root)
    assert mark.status_code == 200, mark.text
    victim = api.post("/v1/tokens", json={"identity": "admin"}, headers=root).json()
    assert api.delete(f"/v1/tokens/{victim['id']}", headers=root).status_code == 200

    def entries(**params: Any) -> list[dict[str, Any]]:
        r = api.get("/v1/audit", params=params, headers=root)
        assert r.status_code == 200, r.text
        return list(r.json()["data"])

    (update_,) = entries(action="job.update")
    assert update_["before"]["business"] == "" and update_["after"]["business"] == "b2"
    assert update_["actor"] == "user:admin" and update_["team"] == "ads"
    (marked,) = entries(action="cluster.mark-abnormal", target_name="local")
    assert marked["before"]["health"] == "NORMAL"
    assert marked["after"]["health"] == "MANUAL_ABNORMAL"
    (revoked,) = entries(action="token.revoke")
    assert revoked["before"]["revoked_at"] is None and revoked["after"]["revoked_at"]
    assert victim["token"] not in json.dumps(entries())  # secrets never reach the audit log

    # cursor pagination: pages of 2 cover everything once, newest first
    seen: list[int] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = api.get("/v1/audit", params=params, headers=root).json()
        seen += [e["id"] for e in page["data"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(seen, reverse=True) and len(seen) == len(set(seen))
    assert seen == [e["id"] for e in entries(limit=1000)]

    # a team admin sees their team's entries only; an operator none
    ads_admin = member_token(store, "adam", "ads", "admin")
    theirs = api.get("/v1/audit", headers=auth_headers(ads_admin)).json()["data"]
    assert theirs and {e["team"] for e in theirs} == {"ads"}
    op = member_token(store, "otto", "ads", "operator")
    assert api.get("/v1/audit", headers=auth_headers(op)).status_code == 403


def test_audit_row_commits_with_the_change(api: TestClient, store: Store) -> None:
    """A change that fails leaves no audit row (the row is in the change's transaction)."""
    root = auth_headers(admin_token(store))
    assert job(api, admin_token(store, "r2"), "tx", "").status_code == 201
    with store.session() as s:
        count = s.query(models.AuditEntry).count()
    stale = api.patch("/v1/jobs/tx", json={"business": "x"}, headers={**root, "If-Match": '"99"'})
    assert stale.status_code == 412
    with store.session() as s:
        assert s.query(models.AuditEntry).count() == count


# --------------------------------------------------------------------------- browser safety


def test_browser_safety(store: Store, tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "d", node_id="b", cors_origins="https://ui.example")
    token = admin_token(store)
    with client_for(settings, store) as api:
        r = api.get("/v1/jobs", headers={**auth_headers(token), "Host": "attacker.example"})
        assert r.status_code == 400 and r.json()["type"] == "urn:drover:problem:untrusted-host"
        assert api.get("/healthz", headers={"Host": "10.0.0.7:8000"}).status_code == 200
        # a bearer credential cannot be forged cross-site: a bodiless mutation needs nothing
        # more (404: no such job); a body in another media type (a form post) is a 415
        r = api.post("/v1/jobs/x/start", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 404, r.text
        r = api.post(
            "/v1/groups",
            content=b"name=g&primary_cluster=local",
            headers={
                "Authorization": f"Bearer {token}",
                "Content-Type": "application/x-www-form-urlencoded",
            },
        )
        assert r.status_code == 415
        # CORS: the configured origin only
        pre = api.options(
            "/v1/jobs",
            headers={
                "Origin": "https://ui.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
        assert pre.headers["access-control-allow-origin"] == "https://ui.example"
        evil = api.get(
            "/v1/jobs", headers={**auth_headers(token), "Origin": "https://evil.example"}
        )
        assert "access-control-allow-origin" not in evil.headers
        for response in (r, evil, api.get("/healthz")):
            assert response.headers["x-content-type-options"] == "nosniff"
            assert response.headers["x-frame-options"] == "DENY"
            assert "frame-ancestors 'none'" in response.headers["content-security-policy"]


def test_internal_calls_need_the_deployment_secret(api: TestClient, store: Store) -> None:
    body = {"group": "default"}
    wrong = api.post("/v1/internal/nudge", json=body, headers={"X-Drover-Node-Secret": "guess"})
    assert wrong.status_code == 401
    root = api.post("/v1/internal/nudge", json=body, headers=auth_headers(admin_token(store)))
    assert root.status_code == 403
    ok = api.post(
        "/v1/internal/nudge", json=body, headers={"X-Drover-Node-Secret": DEVELOPMENT_SECRET}
    )
    assert ok.status_code == 202
    assert (
        api.get("/v1/jobs", headers={"X-Drover-Node-Secret": DEVELOPMENT_SECRET}).status_code == 403
    )


# --------------------------------------------------------------------------- secrets


def test_secrets_from_files_and_production_refuses_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text("s" * 40 + "\n")
    password_file = tmp_path / "password"
    password_file.write_text("p@ss/word\n")
    s = Settings(
        deployment_secret_file=secret_file,
        database_url="mysql+pymysql://drover@db.example/drover",
        database_password_file=password_file,
        environment="production",
    )
    assert s.resolved_deployment_secret == "s" * 40
    assert "p%40ss%2Fword@db.example" in s.resolved_database_url
    assert "p@ss" not in repr(s) and "s" * 40 not in repr(s)

    monkeypatch.setenv("DROVER_ENVIRONMENT", "production")
    monkeypatch.setenv("DROVER_DATABASE_URL", "mysql+pymysql://drover:pw@db/drover")
    with pytest.raises(InvalidInput, match="DEPLOYMENT_SECRET"):
        load_settings()
    monkeypatch.setenv("DROVER_DEPLOYMENT_SECRET", DEVELOPMENT_SECRET)
    with pytest.raises(InvalidInput, match="DEPLOYMENT_SECRET"):
        load_settings()
    monkeypatch.setenv("DROVER_DEPLOYMENT_SECRET", "x" * 40)
    assert load_settings().environment == "production"
    monkeypatch.delenv("DROVER_DEPLOYMENT_SECRET")
    monkeypatch.setenv("DROVER_DEPLOYMENT_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(InvalidInput) as info:
        load_settings()
    assert "missing" in str(info.value)


# --------------------------------------------------------------------------- CLI


def test_cli_bootstrap_and_login(
    store: Store, settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from drover.cli import credentials
    from drover.cli.main import app

    monkeypatch.setenv("DROVER_DATABASE_URL", store.url)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("DROVER_TOKEN", raising=False)
    runner = CliRunner()
    out = tmp_path / "admin.token"
    first = runner.invoke(app, ["token", "create", "--admin", "--output", str(out)])
    assert first.exit_code == 0, first.output
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    secret = out.read_text().strip()
    assert secret.startswith("drv_") and secret not in first.output
    again = runner.invoke(app, ["token", "create", "--admin"])
    assert again.exit_code == 4 and "an admin exists" in again.output
    forced = runner.invoke(app, ["token", "create", "--admin", "--force", "--name", "root2"])
    assert forced.exit_code == 0 and forced.stdout.strip().startswith("drv_")

    path = credentials.save(secret, "http://127.0.0.1:1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert credentials.token() == secret
    monkeypatch.setenv("DROVER_TOKEN", "drv_from_env")
    assert credentials.token() == "drv_from_env"
    os.chmod(path, 0o644)
    monkeypatch.delenv("DROVER_TOKEN")
    with pytest.raises(InvalidInput, match="readable by others"):
        credentials.token()
