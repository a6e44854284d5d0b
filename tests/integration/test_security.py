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
from collections.abc import Callable, Iterator
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


def test_a_token_never_mints_a_stronger_or_longer_lived_one(api: TestClient, store: Store) -> None:
    op = member_token(store, "olga", "ads", "operator")  # read and write, 90 days

    def mint(parent: str, **body: Any) -> Any:
        return api.post("/v1/tokens", json=body, headers=auth_headers(parent))

    def expiry(answer: Any) -> datetime:
        return datetime.fromisoformat(answer.json()["expires_at"])

    def works(secret: str) -> bool:
        api.app.state.token_cache.clear()  # type: ignore[attr-defined]
        return api.get("/v1/whoami", headers=auth_headers(secret)).status_code == 200

    before = store_fingerprint(store)
    # a read-only token mints nothing: a token is a write like any other
    reader = mint(op, scopes=["read"])
    assert reader.status_code == 201, reader.text
    ro = reader.json()["token"]
    before = store_fingerprint(store)
    for body in ({"scopes": ["read", "write"]}, {"scopes": ["read"]}, {}):
        refused = mint(ro, **body)
        assert refused.status_code == 403, (body, refused.text)
    assert store_fingerprint(store) == before

    # a short-lived token mints nothing that outlives it, and never a token that never expires
    short = mint(op, expires_in_seconds=120)
    assert short.status_code == 201, short.text
    short_secret, short_id = short.json()["token"], short.json()["id"]
    before = store_fingerprint(store)
    for body in ({"expires_in_seconds": None}, {"expires_in_seconds": 3600}):
        refused = mint(short_secret, **body)
        assert refused.status_code == 403, (body, refused.text)
        assert refused.headers["content-type"] == "application/problem+json"
    assert store_fingerprint(store) == before
    child = mint(short_secret)  # the default lifetime, cut to the parent's
    assert child.status_code == 201, child.text
    assert expiry(child) <= expiry(short)
    assert child.json()["parent_id"] == short_id
    grandchild = mint(child.json()["token"], scopes=["read"])
    assert grandchild.status_code == 201, grandchild.text

    # only a platform admin makes a token that never expires, and only by asking for it
    assert mint(op, expires_in_seconds=None).status_code == 403
    root = admin_token(store)  # the bootstrap admin's token never expires
    forever = mint(root, identity="olga", expires_in_seconds=None)
    assert forever.status_code == 201, forever.text
    assert forever.json()["expires_at"] is None
    assert mint(root, identity="olga").json()["expires_at"] is not None  # the default: 90 days
    admin_for_a_day = mint(root, expires_in_seconds=86400).json()["token"]
    assert mint(admin_for_a_day, expires_in_seconds=None).status_code == 403

    # the audit entry names the minting token
    entries = api.get(
        "/v1/audit", params={"action": "token.create"}, headers=auth_headers(root)
    ).json()["data"]
    by_target = {e["target_name"]: e for e in entries}
    entry = by_target[str(child.json()["id"])]
    assert entry["detail"]["minted_by_token"] == short_id
    assert entry["after"]["parent_id"] == short_id

    # revoking a token revokes what it minted, and what that minted
    assert works(child.json()["token"]) and works(grandchild.json()["token"])
    revoked = api.delete(f"/v1/tokens/{short_id}", headers=auth_headers(op))
    assert revoked.status_code == 200, revoked.text
    assert not works(short_secret)
    assert not works(child.json()["token"])
    assert not works(grandchild.json()["token"])
    assert works(op) and works(ro)


def test_minting_ones_own_token_asks_the_permission_center(store: Store, tmp_path: Path) -> None:
    center = Center()
    try:
        settings = Settings(
            data_dir=tmp_path / "d", node_id="pc", authz_url=center.url, authz_cache_seconds=0.0
        )
        op = member_token(store, "olga", "ads", "operator")
        with client_for(settings, store) as api:
            center.allow = set()
            before = store_fingerprint(store)
            refused = api.post("/v1/tokens", json={}, headers=auth_headers(op))
            assert refused.status_code == 403, refused.text
            assert store_fingerprint(store) == before
            assert any(c["subject"] == "user:olga" for c in center.calls)
            center.allow = {"token.own"}
            assert api.post("/v1/tokens", json={}, headers=auth_headers(op)).status_code == 201
    finally:
        center.stop()


def test_garbage_credentials_are_401_problems(api: TestClient) -> None:
    for value in ("Bearer drv_" + "x" * 40, "Bearer a.b.c", "Basic dXNlcjpwdw==", "Bearer"):
        r = api.get("/v1/jobs", headers={"Authorization": value})
        assert r.status_code == 401, value
        assert r.json()["type"] == "urn:drover:problem:unauthenticated"


# --------------------------------------------------------------------------- fencing tokens

FENCE = "X-Drover-Fencing-Token"


def running_run(store: Store, name: str, team: str = "ads") -> tuple[int, str]:
    """Job ``name`` with a run as a node records it: (the run's id, its fencing token)."""
    from scheduler.core.records import JobSpec
    from scheduler.core.states import DesiredState
    from scheduler.store import jobs as jobs_store
    from tests.support.runs import record_run

    with store.transaction() as session:
        wanted = DesiredState.RUNNING
        spec = JobSpec(name=name, entrypoint=PIPELINE, team=team, desired_state=wanted)
        jobs_store.create_job(session, spec, cause="test", node_id="n1")
        run = record_run(session, name, started=True)
    return run.id, run.fencing_secret or ""


def test_a_fencing_token_opens_its_own_jobs_fence_and_nothing_else(
    api: TestClient, store: Store
) -> None:
    from tests.support.asgi import call

    run_id, token = running_run(store, "fenced")
    _, other_token = running_run(store, "neighbour")
    own = {FENCE: token, "X-Drover-Client": "tests"}

    # its own job's fence: the run is current
    answer = api.get("/v1/jobs/fenced/fence", headers=own)
    assert answer.status_code == 200, answer.text
    assert answer.json()["current"] is True and answer.json()["fencing_token"] == token

    # nothing else: every other route is a 401, whatever the token
    for method, path in (
        ("GET", "/v1/whoami"),
        ("GET", "/v1/tokens"),
        ("GET", "/v1/jobs"),
        ("GET", "/v1/jobs/fenced"),
        ("GET", "/v1/jobs/fenced/runs"),
        ("POST", "/v1/jobs/fenced/stop"),
        ("GET", "/v1/jobs/neighbour/fence"),  # another job's fence
    ):
        refused = api.request(method, path, headers=own)
        assert refused.status_code == 401, (method, path, refused.text)
        assert refused.headers["content-type"] == "application/problem+json"
        assert token not in refused.text

    # a value no run holds is no credential either, and an unknown job answers the same as a
    # wrong token (no oracle for job names)
    def refusal(path: str, value: str) -> dict[str, Any]:
        r = api.get(path, headers={FENCE: value, "X-Drover-Client": "tests"})
        assert r.status_code == 401, (path, r.text)
        body = dict(r.json())
        body.pop("instance", None)
        body.pop("job", None)
        return body

    wrong = refusal("/v1/jobs/fenced/fence", "f" * 32)
    assert refusal("/v1/jobs/no-such-job/fence", token) == wrong
    assert refusal("/v1/jobs/no-such-job/fence", "f" * 32) == wrong
    assert refusal("/v1/jobs/fenced/fence", other_token) == wrong  # a run of another job

    # refused before the body is read: a big chunked body on a route the token cannot open
    chunks = [b"{" + b" " * 65_535] * 200  # 13 MB, never wanted
    seen = call(
        api,
        "POST",
        "/v1/jobs",
        {FENCE: "f" * 32, "content-type": "application/json"},
        chunks,
    )
    assert seen.status == 401, seen.body[:200]
    assert seen.read == 0, f"{seen.read} bytes of the body were read before the 401"


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
    # a team admin may set what the allow-list does not name, except what chooses code
    a_admin = member_token(store, "ann", "team-a", "admin")
    extra = {"spark.network.timeout": "300s"}
    assert job(api, a_admin, "tuned", "team-a", conf=extra).status_code == 201
    code = {"spark.driver.extraJavaOptions": "-Dx=1"}
    assert job(api, a_admin, "agent", "team-a", conf=code).status_code == 422


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


class JsonService:
    """A small HTTP service on loopback: every GET or POST to it is answered
    ``answer(method, body)`` (JSON both ways)."""

    def __init__(self, path: str, answer: Callable[[str, Any], Any]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def reply(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                data = json.dumps(answer(method, body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                self.reply("GET")

            def do_POST(self) -> None:  # noqa: N802
                self.reply("POST")

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{path}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class KeyServer(JsonService):
    """The issuer's JWKS over HTTP, counting how often it is fetched."""

    def __init__(self, jwks: dict[str, Any]) -> None:
        self.jwks = jwks
        self.fetches = 0
        super().__init__("/jwks", self._serve)

    def _serve(self, method: str, body: Any) -> Any:
        self.fetches += 1
        return self.jwks


# measures time (a refetch interval of 1 s against 20 requests): not at nice 19 beside e2e tests
@pytest.mark.serial
def test_unknown_key_ids_refetch_the_issuers_keys_at_most_once_per_interval(
    store: Store, tmp_path: Path, issuer: dict[str, Any]
) -> None:
    keys = KeyServer(json.loads(issuer["jwks"].read_text()))
    try:
        settings = Settings(
            data_dir=tmp_path / "d",
            node_id="jwks",
            jwt_issuer=issuer["iss"],
            jwt_audience=issuer["aud"],
            jwt_jwks_url=keys.url,
            jwt_keys_refetch_seconds=1.0,
        )
        with client_for(settings, store) as api:
            assert api.get("/v1/whoami", headers=auth_headers(sign(issuer))).status_code == 200
            assert keys.fetches == 1
            now = int(time.time())
            for n in range(20):  # anonymous requests, each naming a key the issuer never had
                forged = jwt.encode(
                    {"iss": issuer["iss"], "aud": issuer["aud"], "sub": "x", "exp": now + 60},
                    issuer["key"],
                    algorithm="RS256",
                    headers={"kid": f"unknown-{n}"},
                )
                assert api.get("/v1/jobs", headers=auth_headers(forged)).status_code == 401
            assert keys.fetches <= 2, keys.fetches  # one refetch at most, not one per request

            # the issuer rotates its key: the new one is picked up once the interval passed
            rotated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(rotated.public_key()))
            jwk.update({"kid": "k2", "use": "sig", "alg": "RS256"})
            keys.jwks = {"keys": [*keys.jwks["keys"], jwk]}
            claims = {"iss": issuer["iss"], "aud": issuer["aud"], "sub": "dana", "exp": now + 300}
            fresh = jwt.encode(claims, rotated, algorithm="RS256", headers={"kid": "k2"})
            wait_until(
                lambda: api.get("/v1/whoami", headers=auth_headers(fresh)).status_code == 200,
                timeout=10,
                what="the rotated key",
            )
            assert keys.fetches <= 6, keys.fetches
    finally:
        keys.stop()


# --------------------------------------------------------------------------- permission center


class Center(JsonService):
    """A tiny permission center: allows what ``allow`` says, counts the questions."""

    def __init__(self) -> None:
        self.allow: set[str] = set()
        self.calls: list[dict[str, Any]] = []
        super().__init__("/decide", self._decide)

    def _decide(self, method: str, body: Any) -> Any:
        self.calls.append(body)
        return {"allow": body["action"] in self.allow}


# measures time (a 2 s decision cache window): not at nice 19 beside the e2e tests
@pytest.mark.serial
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


def test_the_api_reference_page_comes_from_the_node_itself(store: Store, tmp_path: Path) -> None:
    import re

    settings = Settings(data_dir=tmp_path / "d", node_id="docs")
    with client_for(settings, store) as api:
        page = api.get("/docs")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        policy = page.headers["content-security-policy"]
        assert "script-src 'self';" in policy and "frame-ancestors 'none'" in policy
        assert "unsafe-eval" not in policy and "script-src 'self' 'unsafe-inline'" not in policy
        assert "<script>" not in page.text  # no inline script: the policy allows none
        sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert sources and all(s.startswith("/docs/") for s in sources), sources
        for source in sources:  # every file from this node, under the same policy
            asset = api.get(source)
            assert asset.status_code == 200, source
            assert asset.headers["content-security-policy"] == policy, source
            if source.endswith(".js"):
                assert "javascript" in asset.headers["content-type"], source
        assert "/openapi.json" in api.get("/docs/start.js").text
        assert api.get("/redoc").status_code != 200  # ReDoc comes from a CDN only: off
        assert api.get("/openapi.json").status_code == 200
    off = Settings(data_dir=tmp_path / "d", node_id="docs", api_docs=False)
    with client_for(off, store) as api:
        assert api.get("/docs").status_code == 404
        assert api.get("/openapi.json").status_code == 200
    production = Settings(
        environment="production",
        database_url="mysql+pymysql://drover@db.example/drover",
        deployment_secret="s" * 40,
    )
    assert not production.serve_api_docs


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


def test_settings_files_audience_and_passwords(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(os.environ):
        if name.startswith("DROVER_"):
            monkeypatch.delenv(name)
    # a *_FILE setting that does not exist is an error, never a silent fallback to SQLite
    monkeypatch.setenv("DROVER_DATABASE_URL_FILE", str(tmp_path / "url"))
    with pytest.raises(InvalidInput, match="DROVER_DATABASE_URL_FILE"):
        load_settings()
    monkeypatch.delenv("DROVER_DATABASE_URL_FILE")
    # nor is a file setting naming a file that is not there
    monkeypatch.setenv("DROVER_JWT_JWKS_FILE", str(tmp_path / "no-such-jwks.json"))
    with pytest.raises(InvalidInput, match="DROVER_JWT_JWKS_FILE"):
        load_settings()
    monkeypatch.delenv("DROVER_JWT_JWKS_FILE")
    assert load_settings().resolved_database_url.startswith("sqlite")

    # production with JWTs needs their audience
    production = {
        "environment": "production",
        "database_url": "mysql+pymysql://drover:hunter2@db.example/drover",
        "deployment_secret": "s" * 40,
    }
    jwks = tmp_path / "jwks.json"
    jwks.write_text('{"keys": []}')
    with pytest.raises(InvalidInput, match="JWT_AUDIENCE"):
        load_settings(**production, jwt_issuer="https://sso.example", jwt_jwks_file=jwks)
    settings = load_settings(
        **production,
        jwt_issuer="https://sso.example",
        jwt_jwks_file=jwks,
        jwt_audience="drover",
        authz_url="https://pc:center-pw@pc.example/decide",
        jwt_jwks_url="https://keys:keys-pw@sso.example/jwks",
        zk_hosts="127.0.0.1:2181",
    )
    # settings never print a password (nor the deployment secret)
    for shown in (repr(settings), str(settings), f"{settings}"):
        for secret in ("hunter2", "center-pw", "keys-pw", "s" * 40):
            assert secret not in shown, (secret, shown)
    assert "db.example" in repr(settings)  # the rest stays readable
    assert settings.resolved_database_url.endswith(":hunter2@db.example/drover")


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
