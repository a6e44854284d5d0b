"""The submission policy through the real API: Spark properties that choose what code runs are
a platform admin's, creations and changes alike, and a job moved to another team is judged
against that team."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import NodeContext
from scheduler.config import Settings
from scheduler.store.db import Store
from tests.support.auth import admin_token, auth_headers, member_token, store_fingerprint

pytestmark = pytest.mark.integration

PIPELINE = "/opt/pipelines/p.py"
#: what ran a shell as the node's user in local mode (with crafted args), and its neighbours
CODE_CHOOSING = {
    "spark.pyspark.driver.python": "/usr/bin/find",
    "spark.pyspark.python": "/usr/bin/find",
    "spark.driver.extraJavaOptions": "-javaagent:/tmp/x.jar",
    "spark.sql.extensions": "com.example.Evil",  # under spark.sql.*, on the allow-list
    "spark.sql.catalog.evil": "com.example.Catalog",
    "spark.sql.queryExecutionListeners": "com.example.Listener",
}


@pytest.fixture
def api(store: Store, settings: Settings) -> Iterator[TestClient]:
    app = create_app(NodeContext(settings, store))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield client


def create(api: TestClient, token: str, name: str, team: str, **extra: Any) -> Any:
    body = {"name": name, "entrypoint": PIPELINE, "team": team, **extra}
    return api.post("/v1/jobs", json=body, headers=auth_headers(token))


@pytest.mark.parametrize("key", sorted(CODE_CHOOSING))
def test_a_team_admin_cannot_choose_the_code_a_driver_runs(
    api: TestClient, store: Store, key: str
) -> None:
    team_admin = member_token(store, "ann", "team-a", "admin")
    operator = member_token(store, "olga", "team-a", "operator")
    before = store_fingerprint(store)
    for who in (team_admin, operator):
        refused = create(api, who, "tuned", "team-a", conf={key: CODE_CHOOSING[key]})
        assert refused.status_code == 422, refused.text
        problem = refused.json()
        assert problem["type"] == "urn:drover:problem:refused-submission"
        assert problem["properties"] == [key]
    assert store_fingerprint(store) == before
    # nor through a change of an existing job
    assert create(api, team_admin, "plain", "team-a").status_code == 201
    changed = api.patch(
        "/v1/jobs/plain",
        json={"conf": {key: CODE_CHOOSING[key]}},
        headers=auth_headers(team_admin),
    )
    assert changed.status_code == 422, changed.text
    # a platform admin may (or the cluster's own fixed configuration)
    root = admin_token(store)
    made = create(api, root, "platform-tuned", "team-a", conf={key: CODE_CHOOSING[key]})
    assert made.status_code == 201, made.text


def test_a_team_admin_edits_around_what_the_platform_set(api: TestClient, store: Store) -> None:
    root = admin_token(store)
    team_admin = member_token(store, "ann", "team-a", "admin")
    platform_conf = {"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension"}
    assert create(api, root, "delta", "team-a", conf=platform_conf).status_code == 201
    kept = {**platform_conf, "spark.executor.memory": "2g"}
    ok = api.patch("/v1/jobs/delta", json={"conf": kept}, headers=auth_headers(team_admin))
    assert ok.status_code == 200, ok.text
    swapped = {"spark.sql.extensions": "com.example.Evil"}
    refused = api.patch("/v1/jobs/delta", json={"conf": swapped}, headers=auth_headers(team_admin))
    assert refused.status_code == 422
    assert refused.json()["properties"] == ["spark.sql.extensions"]


def test_moving_a_job_to_another_team_judges_its_conf_for_that_team(
    api: TestClient, store: Store
) -> None:
    """Admin of team A, operator of team B: a property outside the allow-list is A's admin's to
    set, and moving the job into B would hand B a conf its operators may not set."""
    member_token(store, "ann", "team-a", "admin")
    ann = member_token(store, "ann", "team-b", "operator")  # same identity, second binding
    conf = {"spark.network.timeout": "300s"}  # not on the default allow-list
    assert create(api, ann, "mover", "team-a", conf=conf).status_code == 201
    before = store_fingerprint(store)
    moved = api.patch("/v1/jobs/mover", json={"team": "team-b"}, headers=auth_headers(ann))
    assert moved.status_code == 422, moved.text
    assert moved.json()["properties"] == ["spark.network.timeout"]
    assert store_fingerprint(store) == before
    # with the conf B's operators may set, the move goes through
    allowed = {"team": "team-b", "conf": {"spark.executor.memory": "1g"}}
    assert api.patch("/v1/jobs/mover", json=allowed, headers=auth_headers(ann)).status_code == 200
