"""The API's access line: every request at DEBUG, writes at INFO, failures at WARNING, with
method, route template, status, duration and the caller (``actor``) as fields of the record,
not only in its message."""

from __future__ import annotations

import logging

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import NodeContext
from scheduler.config import Settings
from scheduler.store.db import Store
from tests.support.auth import admin_token, auth_headers

pytestmark = pytest.mark.integration

LOGGER = "drover.api.metrics"


def test_the_access_line_carries_its_fields(
    store: Store, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    token = admin_token(store)
    with TestClient(create_app(NodeContext(settings, store)), base_url="http://127.0.0.1") as api:
        api.headers.update(auth_headers(token))
        with caplog.at_level(logging.INFO, logger=LOGGER):
            assert api.get("/v1/jobs").status_code == 200
            created = api.post(
                "/v1/jobs", json={"name": "logged", "entrypoint": "/opt/pipelines/p.py"}
            )
            assert created.status_code == 201
        lines = [r for r in caplog.records if r.name == LOGGER]
        assert [(r.method, r.route, r.status) for r in lines] == [("POST", "/v1/jobs", 201)]
        line = lines[0]
        assert line.levelno == logging.INFO and line.actor == "user:admin"
        assert isinstance(line.duration_ms, float) and line.duration_ms >= 0
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger=LOGGER):
            api.get("/v1/jobs/logged")
            api.get("/v1/jobs/nope")
            api.get("/v1/jobs", headers={"Authorization": ""})
        reads = [
            (r.levelno, r.route, r.status, r.actor) for r in caplog.records if r.name == LOGGER
        ]
        assert reads == [
            (logging.DEBUG, "/v1/jobs/{name}", 200, "user:admin"),
            (logging.DEBUG, "/v1/jobs/{name}", 404, "user:admin"),
            (logging.DEBUG, "unmatched", 401, None),  # refused at the edge, before routing
        ]
