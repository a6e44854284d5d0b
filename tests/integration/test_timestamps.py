"""Every time the API answers is written one way: ISO 8601 in UTC ending in ``Z`` (what
pydantic writes for the models' own datetimes), also inside the free-form documents the store
keeps (tokens' records, audit before/after, health evidence): no ``+00:00`` anywhere."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import NodeContext
from scheduler.config import Settings
from scheduler.core.clock import iso
from scheduler.store.db import Store
from tests.integration.test_schemathesis import seed
from tests.support.auth import admin_token, auth_headers

pytestmark = pytest.mark.integration

PATHS = [
    "/v1/jobs", "/v1/jobs/clicks-rollup", "/v1/jobs/clicks-rollup/runs",
    "/v1/jobs/clicks-rollup/events", "/v1/jobs/clicks-rollup/progress", "/v1/clusters",
    "/v1/clusters/spark-a/health", "/v1/groups", "/v1/groups/ads", "/v1/tokens", "/v1/audit",
    "/v1/failovers", "/v1/operations", "/v1/alerts", "/v1/quotas", "/v1/replication",
    "/v1/overview", "/v1/jobs/orders-enrich/revisions", "/v1/jobs/orders-enrich/revisions/1",
    "/v1/teams", "/v1/whoami",
]  # fmt: skip
OFFSET = re.compile(r'"([A-Za-z_]+)"\s*:\s*"\d{4}-\d\d-\d\dT[^"]*\+00:00"')


def test_iso_writes_z() -> None:
    moment = datetime(2026, 11, 25, 3, 12, 45, 120000, tzinfo=UTC)
    assert iso(moment) == "2026-11-25T03:12:45.120000Z"
    assert iso(moment.astimezone(timezone(timedelta(hours=2)))) == iso(moment)


def test_no_answer_carries_an_offset(store: Store, settings: Settings) -> None:
    seed(store)
    with TestClient(create_app(NodeContext(settings, store)), base_url="http://127.0.0.1") as api:
        api.headers.update(auth_headers(admin_token(store)))
        assert api.post("/v1/tokens", json={"identity": "admin"}).status_code == 201
        marked = api.post("/v1/clusters/spark-a/mark-abnormal", json={"reason": "probe"})
        assert marked.status_code == 200, marked.text
        assert api.patch("/v1/jobs/orders-enrich", json={"args": ["x"]}).status_code == 200
        problems = []
        for path in PATHS:
            answer = api.get(path)
            assert answer.status_code == 200, (path, answer.text)
            problems += [f"{path}: {field}" for field in OFFSET.findall(answer.text)]
        assert problems == [], problems
