"""Hostile and malformed input at the API edge, on SQLite and MariaDB: every case gets a clear
RFC 9457 problem document and leaves the store exactly as it was.

Bounded integers, control characters in every free-text field, broken and non-JSON bodies,
undeclared query parameters, ``Allow`` on 405, store errors that must not leak SQL, and
``DELETE /v1/groups/{name}``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from sqlalchemy import exc as sa_exc

from api.app import create_app
from api.deps import NodeContext
from api.paging import MAX_LIMIT
from scheduler.config import Settings
from scheduler.core.errors import StoreError
from scheduler.store import jobs as jobs_store
from scheduler.store import journal
from scheduler.store.db import Store
from tests.support.auth import admin_token
from tests.support.problems import STANDALONE, assert_problem, snapshot

pytestmark = pytest.mark.integration

PIPELINE = "/opt/pipelines/p.py"


@pytest.fixture
def client(client: TestClient) -> TestClient:
    """The admin's client, once a job, a cluster and a group exist."""
    client.post("/v1/jobs", json={"name": "existing", "entrypoint": PIPELINE, "args": ["--a"]})
    client.post("/v1/clusters", json={"name": "spark-a", "storage_root": "/ck/a", **STANDALONE})
    client.post("/v1/groups", json={"name": "ads", "primary_cluster": "spark-a"})
    return client


# -- bounded integers -------------------------------------------------------------------------

LISTS = [
    "/v1/jobs",
    "/v1/jobs/existing/runs",
    "/v1/jobs/existing/events",
    "/v1/clusters",
    "/v1/groups",
]
OUT_OF_RANGE = [
    {"limit": 0},
    {"limit": -1},
    {"limit": "1e3"},
    {"limit": MAX_LIMIT + 1},
    {"limit": 2**70},
]


@pytest.mark.parametrize("path", LISTS)
def test_paging_integers_are_bounded(client: TestClient, store: Store, path: str) -> None:
    before = snapshot(store)
    for params in OUT_OF_RANGE:
        problem = assert_problem(client.get(path, params=params), 422, "invalid-input")
        assert problem["errors"][0]["location"] == ["query", next(iter(params))], params
    page = client.get(path, params={"limit": MAX_LIMIT})
    assert page.status_code == 200 and page.json()["next"] is None
    for cursor in ("x", "!!", "e30", "a" * 1025, "eyJzIjoibmFtZSJ9"):
        problem = assert_problem(client.get(path, params={"cursor": cursor}), 422, "invalid-input")
        assert "cursor" in problem["detail"], cursor
    assert snapshot(store) == before


def test_the_bounds_are_published(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    params = {p["name"]: p for p in spec["paths"]["/v1/jobs"]["get"]["parameters"]}
    assert (
        params["limit"]["schema"] | {"minimum": 1, "maximum": MAX_LIMIT}
        == (params["limit"]["schema"])
    )
    cursor = params["cursor"]["schema"]["anyOf"][0]
    assert cursor["maxLength"] == 1024 and cursor["pattern"] == "^[A-Za-z0-9_-]{1,1024}$"


# -- control characters ------------------------------------------------------------------------

BAD_TEXT = ["nul\x00byte", "new\nline", "tab\there", "esc\x1b[31m", "del\x7f", "c1\x85"]


def _job_bodies(bad: str) -> list[tuple[str, dict[str, Any]]]:
    base = {"name": "fresh", "entrypoint": PIPELINE}
    return [
        ("name", {**base, "name": bad}),
        ("entrypoint", {**base, "entrypoint": f"/opt/{bad}.py"}),
        ("args", {**base, "args": ["--ok", bad]}),
        ("conf key", {**base, "conf": {f"spark.{bad}": "1"}}),
        ("conf value", {**base, "conf": {"spark.x": bad}}),
        ("team", {**base, "team": bad}),
        ("business", {**base, "business": bad}),
        ("checkpoint_location", {**base, "checkpoint_location": f"/ck/{bad}"}),
        ("group", {**base, "group": bad}),
    ]


@pytest.mark.parametrize("bad", BAD_TEXT, ids=[repr(b) for b in BAD_TEXT])
def test_control_characters_are_refused_in_every_job_field(
    client: TestClient, store: Store, bad: str
) -> None:
    before = snapshot(store)
    for field, body in _job_bodies(bad):
        problem = assert_problem(client.post("/v1/jobs", json=body), 422, "invalid-input")
        assert problem["errors"], (field, problem)
        patch = {k: v for k, v in body.items() if k not in ("name", "group")}
        if field not in ("name", "group"):
            response = client.patch("/v1/jobs/existing", json=patch)
            assert_problem(response, 422, "invalid-input")
    assert snapshot(store) == before


@pytest.mark.parametrize("bad", BAD_TEXT, ids=[repr(b) for b in BAD_TEXT])
def test_control_characters_are_refused_in_clusters_and_groups(
    client: TestClient, store: Store, bad: str
) -> None:
    before = snapshot(store)
    base = {"name": "spark-c", "storage_root": "/ck/c", **STANDALONE}
    for field in ("name", "storage_root", "master_url", "rest_url", "ui_url", "az", "cloud"):
        body = {**base, field: f"{base.get(field, 'x')}{bad}"}
        assert_problem(client.post("/v1/clusters", json=body), 422, "invalid-input")
        if field != "name":
            patch = client.patch("/v1/clusters/spark-a", json={field: body[field]})
            assert_problem(patch, 422, "invalid-input")
    for body in (
        {"name": f"g{bad}", "primary_cluster": "spark-a"},
        {"name": "g", "primary_cluster": f"spark-a{bad}"},
    ):
        assert_problem(client.post("/v1/groups", json=body), 422, "invalid-input")
    assert snapshot(store) == before


def test_a_nul_in_an_argument_is_named_in_the_problem(client: TestClient, store: Store) -> None:
    """The case schemathesis found: such a job used to be stored and then retried forever."""
    before = snapshot(store)
    response = client.post(
        "/v1/jobs", json={"name": "n", "entrypoint": PIPELINE, "args": ["a\u0000b"]}
    )
    problem = assert_problem(response, 422, "invalid-input")
    assert problem["errors"][0]["location"] == ["body", "args", "1"] or problem["errors"][0][
        "location"
    ] == ["body", "args", "0"]
    assert "control character (U+0000 at position 1)" in problem["detail"]
    assert snapshot(store) == before


def test_lone_surrogates_are_refused(client: TestClient, store: Store) -> None:
    before = snapshot(store)
    for raw in (
        b'{"name": "n", "entrypoint": "/p.py", "args": ["\\ud800"]}',
        b'{"name": "n", "entrypoint": "/p.py", "team": "x\\udfff"}',
        b'{"name": "n", "entrypoint": "/p.py", "conf": {"k\\ud83d": "v"}}',
    ):
        response = client.post(
            "/v1/jobs", content=raw, headers={"content-type": "application/json"}
        )
        assert_problem(response, 422, "invalid-input")
    assert snapshot(store) == before


def test_printable_unicode_is_still_welcome(client: TestClient) -> None:
    body = {
        "name": "café-订单²",
        "entrypoint": "file:///opt/pipelines/订单.py",
        "args": ["--sep=|", "naïve 🚀", ""],
        "conf": {"spark.app.label": "Zürich ✓"},
        "team": "données",
    }
    created = client.post("/v1/jobs", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["args"] == body["args"]


# -- bodies and media types --------------------------------------------------------------------

BODY_CASES = [
    # (id, method, path, raw body, content type, status, kind)
    ("broken json", "POST", "/v1/jobs", b'{"name": "n",', "application/json", 400, None),
    ("trailing garbage", "POST", "/v1/jobs", b'{"name": "n"} x', "application/json", 400, None),
    ("not utf-8", "POST", "/v1/jobs", b'{"name": "\xff\xfe"}', "application/json", 400, None),
    ("text/plain", "POST", "/v1/jobs", b'{"name": "n", "entrypoint": "/p.py"}', "text/plain",
     415, "unsupported-media-type"),
    ("form", "POST", "/v1/clusters", b"name=x&kind=local", "application/x-www-form-urlencoded",
     415, "unsupported-media-type"),
    ("no content type", "POST", "/v1/groups", b'{"name": "g", "primary_cluster": "local"}',
     None, 415, "unsupported-media-type"),
    ("xml", "PATCH", "/v1/jobs/existing", b"<team>x</team>", "application/xml", 415,
     "unsupported-media-type"),
    ("broken patch", "PATCH", "/v1/clusters/spark-a", b"{", "application/json", 400, None),
    ("json array", "POST", "/v1/jobs", b"[1, 2]", "application/json", 422, "invalid-input"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "raw", "content_type", "status", "kind"),
    [pytest.param(*case[1:], id=case[0]) for case in BODY_CASES],
)
def test_bodies_that_are_not_json_are_400_or_415_and_change_nothing(
    client: TestClient,
    store: Store,
    method: str,
    path: str,
    raw: bytes,
    content_type: str | None,
    status: int,
    kind: str | None,
) -> None:
    before = snapshot(store)
    headers = {} if content_type is None else {"content-type": content_type}
    response = client.request(method, path, content=raw, headers=headers)
    assert_problem(response, status, kind or "malformed-request")
    assert snapshot(store) == before


def test_json_media_types_with_parameters_or_suffixes_are_accepted(client: TestClient) -> None:
    ok = client.patch(
        "/v1/jobs/existing",
        content=b'{"team": "a"}',
        headers={"content-type": "application/merge-patch+json"},
    )
    assert ok.status_code == 200, ok.text
    ok = client.patch(
        "/v1/jobs/existing",
        content=b'{"team": "b"}',
        headers={"content-type": "application/json; charset=utf-8"},
    )
    assert ok.status_code == 200 and ok.json()["team"] == "b"


def test_a_bearer_request_without_a_body_needs_no_client_header(
    store: Store, settings: Settings
) -> None:
    """A bearer credential cannot be sent cross-site without a preflight, so nothing more is
    asked of a request that carries one: a bodiless DELETE or POST with only ``Authorization``
    does its work (never a 415); a body in another media type, a form post included, is a 415
    and changes nothing."""
    token = admin_token(store)
    bare = {"Authorization": f"Bearer {token}"}  # what curl -X DELETE -H ... sends
    with TestClient(create_app(NodeContext(settings, store)), base_url="http://127.0.0.1") as c:
        assert c.post("/v1/groups", json={"name": "g9", "primary_cluster": "local"}, headers=bare)
        created = c.post("/v1/jobs", json={"name": "j9", "entrypoint": PIPELINE}, headers=bare)
        assert created.status_code == 201, created.text
        started = c.post("/v1/jobs/j9/start", headers=bare)
        assert started.status_code in (200, 202), started.text
        assert c.post("/v1/jobs/j9/stop", headers=bare).status_code in (200, 202)
        assert c.delete("/v1/groups/g9", headers=bare).status_code == 204
        before = snapshot(store)
        form = {**bare, "content-type": "application/x-www-form-urlencoded"}
        refused = c.post("/v1/jobs/j9/start", content=b"desired=RUNNING", headers=form)
        assert_problem(refused, 415, "unsupported-media-type")
        assert snapshot(store) == before


# -- undeclared query parameters ---------------------------------------------------------------

UNKNOWN_QUERY = [
    ("GET", "/v1/jobs", {"stat": "FAILED"}, None),  # a typo'd filter must not list everything
    ("GET", "/v1/jobs", {"state": "RUNNING", "teams": "ads"}, None),
    ("POST", "/v1/jobs", {"dry_run": "1"}, {"name": "n", "entrypoint": PIPELINE}),
    ("GET", "/v1/jobs/existing", {"verbose": "1"}, None),
    ("PATCH", "/v1/jobs/existing", {"force": "true"}, {"team": "x"}),
    ("DELETE", "/v1/jobs/existing", {"cascade": "1"}, None),
    ("POST", "/v1/jobs/existing/start", {"now": "1"}, None),
    ("GET", "/v1/jobs/existing/runs", {"page": "2"}, None),
    ("GET", "/v1/jobs/existing/fence", {"token": "x"}, None),
    ("GET", "/v1/clusters", {"kind": "local"}, None),
    ("POST", "/v1/groups", {"x": ""}, {"name": "g", "primary_cluster": "spark-a"}),
    ("DELETE", "/v1/groups/ads", {"force": "1"}, None),
    ("GET", "/v1/nodes", {"all": "1"}, None),
    ("GET", "/healthz", {"deep": "1"}, None),
]


def test_undeclared_query_parameters_are_400_and_change_nothing(
    client: TestClient, store: Store
) -> None:
    before = snapshot(store)
    for method, path, params, body in UNKNOWN_QUERY:
        response = client.request(method, path, params=params, json=body)
        problem = assert_problem(response, 400, "malformed-request")
        assert "unknown query parameter" in problem["detail"], (method, path)
        assert repr(next(k for k in params if k not in ("state",))) in problem["detail"]
    assert snapshot(store) == before
    # the declared ones still work
    assert client.get("/v1/jobs", params={"team": "", "limit": 5}).status_code == 200
    assert client.get("/v1/jobs/existing/events", params={"sort": "id"}).status_code == 200


# -- 405 and Allow -----------------------------------------------------------------------------

ALLOW = [
    ("PUT", "/v1/jobs", {"GET", "POST"}),
    ("DELETE", "/v1/jobs", {"GET", "POST"}),
    ("PUT", "/v1/jobs/existing", {"GET", "PATCH", "DELETE"}),
    ("POST", "/v1/jobs/existing", {"GET", "PATCH", "DELETE"}),
    ("GET", "/v1/jobs/existing/start", {"POST"}),
    ("DELETE", "/v1/jobs/existing/runs", {"GET"}),
    ("POST", "/v1/jobs/existing/fence", {"GET"}),
    ("PUT", "/v1/clusters/spark-a", {"GET", "PATCH"}),
    ("POST", "/v1/groups/ads", {"GET", "PATCH", "DELETE"}),
    ("PATCH", "/v1/groups", {"GET", "POST"}),
    ("POST", "/healthz", {"GET"}),
    ("GET", "/v1/internal/nudge", {"POST"}),
]


@pytest.mark.parametrize(("method", "path", "allowed"), ALLOW)
def test_405_names_every_method_of_the_path(
    client: TestClient, store: Store, method: str, path: str, allowed: set[str]
) -> None:
    before = snapshot(store)
    response = client.request(method, path)
    problem = assert_problem(response, 405, "method-not-allowed")
    assert {m.strip() for m in response.headers["allow"].split(",")} == allowed
    assert method in problem["detail"]
    assert snapshot(store) == before


# -- store errors ------------------------------------------------------------------------------


def _drop_with_dependants(conn: sa.Connection, root: str) -> None:
    """Drops ``root`` and every table whose foreign keys lead to it, dependants first."""
    meta = sa.MetaData()
    meta.reflect(conn)
    doomed = {root}
    grew = True
    while grew:
        grew = False
        for table in meta.tables.values():
            if table.name not in doomed and any(
                fk.column.table.name in doomed for fk in table.foreign_keys
            ):
                doomed.add(table.name)
                grew = True
    meta.drop_all(conn, tables=[meta.tables[name] for name in doomed])


def test_an_unusable_store_is_a_503_without_sql(
    store: Store,
    settings: Settings,
    admin_headers: dict[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The store's tables vanish under a running node (a restore gone wrong): every driver error
    carries SQL; no problem document does."""
    caplog.set_level(logging.ERROR, logger="api.problems")
    app = create_app(NodeContext(settings, store))
    with TestClient(app, base_url="http://127.0.0.1", headers=admin_headers) as client:
        with store.engine.begin() as conn:  # the token still verifies from the identity tables
            _drop_with_dependants(conn, "jobs")
        for method, path, body in [
            ("GET", "/v1/jobs", None),
            ("GET", "/v1/jobs/orders", None),
            ("POST", "/v1/jobs", {"name": "n", "entrypoint": PIPELINE, "args": ["s3cr3t"]}),
        ]:
            response = client.request(method, path, json=body)
            problem = assert_problem(response, 503, "store-unavailable")
            text = response.text.lower()
            for leak in ("select", "insert", "[sql", "s3cr3t", "jobs.", "parameters"):
                assert leak not in text, (path, response.text)
            assert problem["detail"] == "the metadata store is unavailable; try again later"
            assert problem["incident"] in caplog.text
    assert "SELECT" in caplog.text or "INSERT" in caplog.text  # the real error: in the log only


@pytest.mark.parametrize(
    "error",
    [
        StoreError("metadata store error: DataError: (1406) [SQL: UPDATE jobs SET args=%(a)s]"),
        sa_exc.DataError("UPDATE jobs SET args=%(a)s", {"a": ["s3cr3t"]}, ValueError("too long")),
        sa_exc.IntegrityError("INSERT INTO jobs (name) VALUES (?)", ("s3cr3t",), ValueError()),
    ],
    ids=["StoreError(DataError)", "raw DataError", "raw IntegrityError"],
)
def test_other_store_errors_are_a_500_without_sql(
    client: TestClient,
    store: Store,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    error: Exception,
) -> None:
    if isinstance(error, StoreError):
        error.__cause__ = sa_exc.DataError("UPDATE jobs SET args=%(a)s", {"a": "s3cr3t"}, None)

    def fail(*args: Any, **kwargs: Any) -> None:
        raise error

    monkeypatch.setattr(jobs_store, "update_job_spec", fail)
    caplog.set_level(logging.ERROR, logger="api.problems")
    before = snapshot(store)
    response = client.patch("/v1/jobs/existing", json={"args": ["--b"]})
    problem = assert_problem(response, 500, "store-error")
    for leak in ("UPDATE", "INSERT", "SQL", "s3cr3t", "args="):
        assert leak not in response.text, response.text
    assert problem["incident"] in caplog.text and "s3cr3t" in caplog.text
    assert snapshot(store) == before


# -- DELETE /v1/groups/{name} ------------------------------------------------------------------


def test_an_empty_group_is_deleted_and_audited(client: TestClient, store: Store) -> None:
    client.post("/v1/groups", json={"name": "spare", "primary_cluster": "spark-a"})
    assert_problem(client.delete("/v1/groups/spare", headers={"If-Match": '"2"'}), 412)
    deleted = client.delete("/v1/groups/spare", headers={"If-Match": '"1"'})
    assert deleted.status_code == 204 and deleted.content == b""
    assert_problem(client.get("/v1/groups/spare"), 404, "not-found")
    assert_problem(client.delete("/v1/groups/spare"), 404, "not-found")
    assert "spare" not in {g["name"] for g in client.get("/v1/groups").json()["data"]}
    with store.session() as s:
        audit = journal.list_audit(s, limit=1)[0]
    assert (audit.action, audit.target_kind, audit.target_name) == (
        "group.delete",
        "group",
        "spare",
    )
    assert audit.detail["primary_cluster"] == "spark-a"
    # the name is free again
    again = client.post("/v1/groups", json={"name": "spare", "primary_cluster": "local"})
    assert again.status_code == 201 and again.json()["version"] == 1


def test_a_group_with_jobs_or_the_default_group_is_not_deleted(
    client: TestClient, store: Store
) -> None:
    created = client.post(
        "/v1/jobs", json={"name": "ad-clicks", "entrypoint": PIPELINE, "group": "ads"}
    )
    assert created.status_code == 201
    before = snapshot(store)
    problem = assert_problem(client.delete("/v1/groups/ads"), 409, "conflict")
    assert "1 job(s)" in problem["detail"] and "ad-clicks" in problem["detail"]
    problem = assert_problem(client.delete("/v1/groups/default"), 409, "conflict")
    assert "default" in problem["detail"]
    assert_problem(client.delete("/v1/groups/a%20b"), 422, "invalid-input")
    assert snapshot(store) == before
    # once its jobs are gone, it goes
    assert client.delete("/v1/jobs/ad-clicks").status_code == 204
    assert client.delete("/v1/groups/ads").status_code == 204


def test_group_delete_is_in_the_openapi(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/v1/groups/{name}"]["delete"]
    assert set(operation["responses"]) >= {"204", "404", "409", "412", "422"}
    spec = client.get("/openapi.json").json()
    ref = operation["responses"]["409"]["content"]["application/problem+json"]["schema"]["$ref"]
    problem = spec["components"]["schemas"][ref.rsplit("/", 1)[-1]]
    assert {"type", "title", "status", "detail", "instance"} <= set(problem["properties"])


def test_every_documented_error_is_a_problem_document(client: TestClient, tmp_path: Path) -> None:
    spec = client.get("/openapi.json").json()
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if int(status) >= 400:
                    assert list(response["content"]) == ["application/problem+json"], (
                        method,
                        path,
                        status,
                    )
    assert "HTTPValidationError" not in spec.get("components", {}).get("schemas", {})


# -- request limits: bodies, failed credentials ---------------------------------------------------

MIB = 1024 * 1024


def test_bodies_are_bounded_before_they_are_read(
    client: TestClient, store: Store, settings: Settings, admin_headers: dict[str, str]
) -> None:
    from tests.support.asgi import call

    headers = {**admin_headers, "content-type": "application/json"}
    chunk = b" " * 65_536
    before = snapshot(store)
    # announced longer than the bound (1 MiB by default): refused before a byte is read
    for method, path in (("POST", "/v1/jobs"), ("PATCH", "/v1/jobs/existing")):
        seen = call(client, method, path, headers, [chunk] * 40, content_length=40 * 65_536)
        assert seen.status == 413, seen.body[:300]
        assert seen.read == 0, seen.read
        assert seen.headers["content-type"] == "application/problem+json"
    # chunked, no length: refused once the bound is passed, never read much beyond it
    for method, path in (("POST", "/v1/jobs"), ("PATCH", "/v1/jobs/existing")):
        seen = call(client, method, path, headers, [b"{", *[chunk] * 400])  # 26 MB
        assert seen.status == 413, seen.body[:300]
        assert seen.read <= MIB + len(chunk), seen.read
    assert snapshot(store) == before
    # within the bound, chunked or not: served
    body = json.dumps({"name": "small", "entrypoint": PIPELINE}).encode()
    assert call(client, "POST", "/v1/jobs", headers, [body[:10], body[10:]]).status == 201
    body = json.dumps({"name": "small2", "entrypoint": PIPELINE}).encode()
    assert call(client, "POST", "/v1/jobs", headers, [body], content_length=len(body)).status == 201

    # the bound is a setting
    tight = settings.model_copy(update={"api_max_body_bytes": 1000})
    app = create_app(NodeContext(tight, store))
    with TestClient(app, base_url="http://127.0.0.1") as small:
        pad = json.dumps(
            {"name": "padded", "entrypoint": PIPELINE, "description": "x" * 2000}
        ).encode()
        seen = call(small, "POST", "/v1/jobs", headers, [pad], content_length=len(pad))
        assert seen.status == 413 and seen.read == 0


def test_failed_credentials_are_throttled_per_client_address(
    store: Store, settings: Settings, admin_headers: dict[str, str]
) -> None:
    from tests.support.asgi import call

    limited = settings.model_copy(
        update={"auth_failure_limit": 5, "auth_failure_window": 60.0, "token_cache_seconds": 60}
    )
    app = create_app(NodeContext(limited, store))
    bad = {"Authorization": "Bearer drv_" + "x" * 40, "X-Drover-Client": "tests"}
    with TestClient(app, base_url="http://127.0.0.1") as c:
        assert c.get("/v1/jobs", headers=admin_headers).status_code == 200  # a known credential
        statuses = [c.get("/v1/jobs", headers=bad).status_code for _ in range(8)]
        assert statuses == [401] * 5 + [429] * 3, statuses
        throttled = c.get("/v1/whoami", headers={**bad, "Authorization": "Bearer a.b.c"})
        problem = assert_problem(throttled, 429, "too-many-failed-credentials")
        assert 1 <= int(throttled.headers["retry-after"]) <= 60, throttled.headers
        assert "drv_" not in problem["detail"]
        # probes and metrics answer whoever asks
        for probe in ("/healthz", "/readyz", "/metrics"):
            assert c.get(probe).status_code == 200, probe
        # a credential this node verified already still works from there, and another
        # address is not throttled
        assert c.get("/v1/jobs", headers=admin_headers).status_code == 200
        elsewhere = call(c, "GET", "/v1/jobs", bad, content_length=0, client_address="10.9.9.9")
        assert elsewhere.status == 401
        ok = call(c, "GET", "/v1/jobs", admin_headers, content_length=0, client_address="10.9.9.9")
        assert ok.status == 200
