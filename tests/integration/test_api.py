"""The REST API on a real store (SQLite and MariaDB): the job lifecycle contract, and bad input
that gets a problem document and changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import NodeContext
from scheduler.config import Settings
from scheduler.store import jobs as jobs_store
from scheduler.store import journal
from scheduler.store.db import Store
from tests.support.problems import assert_problem, snapshot
from tests.support.runs import record_run, submitting_run

pytestmark = pytest.mark.integration

PIPELINE = "/opt/pipelines/p.py"


@pytest.fixture
def nudged() -> list[str]:
    return []


@pytest.fixture
def client(
    store: Store, settings: Settings, nudged: list[str], admin_headers: dict[str, str]
) -> Iterator[TestClient]:
    app = create_app(
        NodeContext(settings, store, nudge=lambda group, job=None: nudged.append(group))
    )
    with TestClient(
        app, base_url="http://127.0.0.1", headers=admin_headers, raise_server_exceptions=True
    ) as c:
        yield c


def create(client: TestClient, name: str = "orders-enrich", **extra: Any) -> dict[str, Any]:
    response = client.post("/v1/jobs", json={"name": name, "entrypoint": PIPELINE, **extra})
    assert response.status_code == 201, response.text
    return response.json()


def submit_elsewhere(session: Any, name: str, node_id: str) -> tuple[Any, Any, int]:
    """What node ``node_id`` writes when it submits job ``name``: see ``submitting_run``."""
    return submitting_run(session, name, node_id=node_id, checkpoint_location="/ckpt")


def test_create_read_list_update_delete(
    client: TestClient, store: Store, nudged: list[str]
) -> None:
    job = create(
        client,
        team="ads",
        business="ads-bu",
        priority="high",
        args=["--x", "1"],
        conf={"spark.sql.shuffle.partitions": "4"},
    )
    assert job["group"] == "default" and job["state"] == "STOPPED"
    assert job["desired_state"] == "STOPPED" and job["version"] == 1
    assert set(job) >= {
        "name",
        "group",
        "team",
        "business",
        "priority",
        "entrypoint",
        "args",
        "conf",
        "desired_state",
        "state",
        "cluster",
        "owner",
        "current_run",
        "version",
        "created_at",
        "updated_at",
    }
    create(client, "café-订单", team="pay")
    got = client.get("/v1/jobs/café-订单")
    assert got.status_code == 200 and got.headers["etag"] == '"1"'

    page = client.get("/v1/jobs", params={"team": "ads"}).json()
    assert [j["name"] for j in page["data"]] == ["orders-enrich"] and page["count"] is None
    first = client.get("/v1/jobs", params={"limit": 1, "count": "true"})
    page = first.json()
    assert page["count"] == 2 and len(page["data"]) == 1 and page["next_cursor"]
    assert first.headers["link"] == f'<{page["next"]}>; rel="next"'
    second = client.get(page["next"]).json()
    assert [j["name"] for j in page["data"] + second["data"]] == sorted(
        ["café-订单", "orders-enrich"]
    )
    assert second["next"] is None and second["next_cursor"] is None
    assert client.get("/v1/jobs", params={"state": "RUNNING"}).json()["data"] == []
    assert (
        client.get("/v1/jobs", params={"group": "default", "cluster": "local"}).json()["data"] == []
    )

    patched = client.patch(
        "/v1/jobs/orders-enrich", json={"args": ["--y"]}, headers={"If-Match": '"1"'}
    )
    assert patched.status_code == 200 and patched.json()["args"] == ["--y"]
    assert patched.json()["version"] == 2

    started = client.post("/v1/jobs/orders-enrich/start")
    assert started.status_code == 202
    assert started.json()["desired_state"] == "RUNNING" and started.json()["state"] == "QUEUED"
    assert nudged[-1] == "default"
    stopped = client.post("/v1/jobs/orders-enrich/stop").json()
    assert stopped["desired_state"] == "STOPPED" and stopped["state"] == "STOPPED"

    events = client.get("/v1/jobs/orders-enrich/events").json()
    assert [(e["from_state"], e["to_state"]) for e in reversed(events["data"])] == [
        (None, "STOPPED"),
        (None, None),
        ("STOPPED", "QUEUED"),
        ("QUEUED", "STOPPED"),
    ]
    assert client.get("/v1/jobs/orders-enrich/runs", params={"count": True}).json() == {
        "data": [],
        "count": 0,
        "limit": 100,
        "next_cursor": None,
        "next": None,
    }
    assert client.delete("/v1/jobs/orders-enrich").status_code == 204
    assert client.get("/v1/jobs/orders-enrich").status_code == 404
    with store.session() as s:
        actions = [a.action for a in journal.list_audit(s)]
    assert actions[::-1] == [
        "job.create",
        "job.create",
        "job.update",
        "job.start",
        "job.stop",
        "job.delete",
    ]


BAD_REQUESTS: list[tuple[str, str, str, dict[str, Any] | None, int, str]] = [
    # (id, method, path, json body, status, problem kind)
    (
        "name with space",
        "POST",
        "/v1/jobs",
        {"name": "a b", "entrypoint": PIPELINE},
        422,
        "invalid-input",
    ),
    ("empty name", "POST", "/v1/jobs", {"name": "", "entrypoint": PIPELINE}, 422, "invalid-input"),
    (
        "name too long",
        "POST",
        "/v1/jobs",
        {"name": "x" * 129, "entrypoint": PIPELINE},
        422,
        "invalid-input",
    ),
    (
        "slash in name",
        "POST",
        "/v1/jobs",
        {"name": "a/b", "entrypoint": PIPELINE},
        422,
        "invalid-input",
    ),
    (
        "unknown field",
        "POST",
        "/v1/jobs",
        {"name": "n", "entrypoint": PIPELINE, "replicas": 3},
        422,
        "invalid-input",
    ),
    (
        "read-only field",
        "POST",
        "/v1/jobs",
        {"name": "n", "entrypoint": PIPELINE, "state": "RUNNING"},
        422,
        "invalid-input",
    ),
    (
        "args not a list",
        "POST",
        "/v1/jobs",
        {"name": "n", "entrypoint": PIPELINE, "args": "--x"},
        422,
        "invalid-input",
    ),
    (
        "arg not a string",
        "POST",
        "/v1/jobs",
        {"name": "n", "entrypoint": PIPELINE, "args": [1]},
        422,
        "invalid-input",
    ),
    (
        "conf value not a string",
        "POST",
        "/v1/jobs",
        {"name": "n", "entrypoint": PIPELINE, "conf": {"a": 1}},
        422,
        "invalid-input",
    ),
    (
        "bad priority",
        "POST",
        "/v1/jobs",
        {"name": "n", "entrypoint": PIPELINE, "priority": "urgent"},
        422,
        "invalid-input",
    ),
    (
        "bad desired state",
        "POST",
        "/v1/jobs",
        {"name": "n", "entrypoint": PIPELINE, "desired_state": "PAUSED"},
        422,
        "invalid-input",
    ),
    (
        "entrypoint not python",
        "POST",
        "/v1/jobs",
        {"name": "n", "entrypoint": "/x/job.jar"},
        422,
        "invalid-input",
    ),
    (
        "entrypoint remote",
        "POST",
        "/v1/jobs",
        {"name": "n", "entrypoint": "http://x/p.py"},
        422,
        "invalid-input",
    ),
    ("missing entrypoint", "POST", "/v1/jobs", {"name": "n"}, 422, "invalid-input"),
    (
        "unknown group",
        "POST",
        "/v1/jobs",
        {"name": "n", "entrypoint": PIPELINE, "group": "nope"},
        422,
        "invalid-input",
    ),
    (
        "duplicate name",
        "POST",
        "/v1/jobs",
        {"name": "existing", "entrypoint": PIPELINE},
        409,
        "already-exists",
    ),
    ("body not json object", "POST", "/v1/jobs", None, 422, "invalid-input"),
    ("unknown job get", "GET", "/v1/jobs/nope", None, 404, "not-found"),
    ("unknown job start", "POST", "/v1/jobs/nope/start", None, 404, "not-found"),
    ("unknown job patch", "PATCH", "/v1/jobs/nope", {"team": "t"}, 404, "not-found"),
    ("unknown job delete", "DELETE", "/v1/jobs/nope", None, 404, "not-found"),
    ("unknown job runs", "GET", "/v1/jobs/nope/runs", None, 404, "not-found"),
    ("unknown job events", "GET", "/v1/jobs/nope/events", None, 404, "not-found"),
    ("invalid name in path", "GET", "/v1/jobs/a%20b", None, 422, "invalid-input"),
    ("stop a stopped job", "POST", "/v1/jobs/existing/stop", None, 409, "illegal-transition"),
    ("restart a stopped job", "POST", "/v1/jobs/existing/restart", None, 409, "illegal-transition"),
    ("start a started job", "POST", "/v1/jobs/running/start", None, 409, "illegal-transition"),
    ("delete a running job", "DELETE", "/v1/jobs/running", None, 409, "conflict"),
    (
        "patch read-only state",
        "PATCH",
        "/v1/jobs/existing",
        {"state": "RUNNING"},
        422,
        "invalid-input",
    ),
    ("patch unknown field", "PATCH", "/v1/jobs/existing", {"owner": "me"}, 422, "invalid-input"),
    ("patch null", "PATCH", "/v1/jobs/existing", {"team": None}, 422, "invalid-input"),
    ("patch nothing", "PATCH", "/v1/jobs/existing", {}, 422, "invalid-input"),
    ("patch wrong type", "PATCH", "/v1/jobs/existing", {"conf": ["a"]}, 422, "invalid-input"),
    ("bad state filter", "GET", "/v1/jobs?state=SLEEPING", None, 422, "invalid-input"),
    ("bad limit", "GET", "/v1/jobs?limit=0", None, 422, "invalid-input"),
    ("unknown route", "GET", "/v1/nothing", None, 404, "not-found"),
]


def test_only_a_job_created_to_run_wakes_its_owner(client: TestClient, nudged: list[str]) -> None:
    """A stopped job asks nothing of its owner at once (its next tick claims it): a burst of
    them makes no nudge; one created to run nudges its group's owner, as a start does."""
    for i in range(3):
        create(client, f"registered-{i}")
    assert nudged == []
    create(client, "runs-at-once", desired_state="RUNNING")
    assert nudged == ["default"]
    assert client.post("/v1/jobs/registered-0/start").status_code == 202
    assert nudged == ["default", "default"]


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "kind"),
    [pytest.param(*case[1:], id=case[0]) for case in BAD_REQUESTS],
)
def test_bad_input_gets_a_problem_document_and_changes_nothing(
    client: TestClient,
    store: Store,
    method: str,
    path: str,
    body: dict[str, Any] | None,
    status: int,
    kind: str,
) -> None:
    create(client, "existing")
    create(client, "running", desired_state="RUNNING")
    before = snapshot(store)
    if body is None and method == "POST" and path == "/v1/jobs":
        response = client.request(
            method, path, content=b"[1, 2]", headers={"content-type": "application/json"}
        )
    else:
        response = client.request(method, path, json=body)
    assert_problem(response, status, kind)
    assert snapshot(store) == before


def test_stale_if_match_is_refused_and_changes_nothing(client: TestClient, store: Store) -> None:
    create(client, "j")
    client.patch("/v1/jobs/j", json={"team": "a"})
    before = snapshot(store)
    for method, path, body in [
        ("PATCH", "/v1/jobs/j", {"team": "b"}),
        ("POST", "/v1/jobs/j/start", None),
        ("DELETE", "/v1/jobs/j", None),
    ]:
        response = client.request(method, path, json=body, headers={"If-Match": '"1"'})
        assert response.status_code == 412, response.text
        assert response.json()["type"] == "urn:drover:problem:precondition-failed"
    bad = client.patch("/v1/jobs/j", json={"team": "b"}, headers={"If-Match": "yesterday"})
    assert bad.status_code == 422
    assert snapshot(store) == before


def test_openapi_and_health(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert "/v1/jobs/{name}/restart" in spec["paths"]
    assert client.get("/healthz").json()["status"] == "ok"
    assert client.get("/readyz").json()["status"] == "ready"


def test_fence_check_in_shows_whether_the_job_fences_itself(
    client: TestClient, store: Store
) -> None:
    """The first fence check a run proves (its token) to be the job's current open run is
    recorded; the job's read-only ``self_fencing`` says true once it is, false after the grace
    without one."""
    from datetime import UTC, datetime, timedelta

    from scheduler.core.states import RunState
    from scheduler.decisions.selffencing import CHECK_IN_GRACE_S
    from scheduler.store import ledger

    def running_job(name: str, started_ago: float) -> str:
        create(client, name, desired_state="RUNNING")
        with store.transaction() as session:
            run = record_run(session, name, node_id="n1", started=True, checkpoint_location="/ckpt")
            started = datetime.now(UTC) - timedelta(seconds=started_ago)
            ledger.update_run(session, run, state=RunState.RUNNING, started_at=started)
        assert run.fencing_secret is not None  # the token itself: the store keeps its digest
        return run.fencing_secret

    def fence(name: str, token: str | None = None) -> Any:
        headers = {"X-Drover-Fencing-Token": token} if token is not None else {}
        answer = client.get(f"/v1/jobs/{name}/fence", headers=headers)
        assert answer.status_code == 200, answer.text
        return answer.json()

    fencing = running_job("fences-itself", CHECK_IN_GRACE_S + 5)
    plain = running_job("plain-pyspark", CHECK_IN_GRACE_S + 5)
    young = running_job("just-started", 1)
    for name in ("fences-itself", "plain-pyspark"):
        job = client.get(f"/v1/jobs/{name}").json()
        assert job["self_fencing"] is False  # no fence checks seen: not self-fencing
        assert job["current_run"]["fence_checked_at"] is None
    assert client.get("/v1/jobs/just-started").json()["self_fencing"] is None  # too early

    # an operator's look records nothing; another job's run's token is no credential here
    assert fence("fences-itself")["current"] is None
    refused = client.get("/v1/jobs/fences-itself/fence", headers={"X-Drover-Fencing-Token": plain})
    assert refused.status_code == 401, refused.text
    assert client.get("/v1/jobs/fences-itself").json()["self_fencing"] is False
    # the run's own proven check is recorded, once
    assert fence("fences-itself", fencing)["current"] is True
    job = client.get("/v1/jobs/fences-itself").json()
    assert job["self_fencing"] is True
    first = job["current_run"]["fence_checked_at"]
    assert first is not None
    assert fence("fences-itself", fencing)["current"] is True
    assert client.get("/v1/jobs/fences-itself").json()["current_run"]["fence_checked_at"] == first
    fence("just-started", young)
    assert client.get("/v1/jobs/just-started").json()["self_fencing"] is True
    assert client.get("/v1/jobs/plain-pyspark").json()["self_fencing"] is False

    schema = client.get("/openapi.json").json()["components"]["schemas"]
    described = schema["JobPublic"]["properties"]["self_fencing"]["description"]
    assert "no fence checks seen: not self-fencing" in described


def test_a_list_shows_every_change_another_node_makes(
    client: TestClient, store: Store, settings: Settings, admin_headers: dict[str, str]
) -> None:
    """Pages of ``GET /v1/jobs`` and ``GET /v1/jobs/{name}`` are made from documents memoized
    on their stored rows (``api/documents.py``). Writes this API never sees -- another node's
    state change, a run's fence check, a pipeline's progress, the gate's queue row -- each show
    on the next read; every page equals the documents made afresh from the store's records, and
    every job's answer equals that of an API keeping no documents."""
    from dataclasses import replace
    from datetime import UTC, datetime

    from api.schemas.resources import JobPublic
    from scheduler.core.paging import Sort, Window
    from scheduler.core.records import ProgressRecord
    from scheduler.core.states import JobState
    from scheduler.decisions.gate import QueueRow
    from scheduler.store import fence_checks, ledger
    from scheduler.store import progress as progress_store
    from scheduler.store import quotas as quotas_store

    for i in range(4):
        create(client, f"memo-{i}", desired_state="RUNNING" if i else "STOPPED")
    unmemoized = TestClient(
        create_app(NodeContext(settings.model_copy(update={"api_job_documents": 0}), store)),
        base_url="http://127.0.0.1",
        headers=admin_headers,
    )

    def page() -> dict[str, dict[str, Any]]:
        answer = client.get("/v1/jobs", params={"limit": 50, "name_prefix": "memo-"})
        assert answer.status_code == 200, answer.text
        shown = {job["name"]: job for job in answer.json()["data"]}
        with store.session() as session:  # the ORM's records, not the API's own reads
            found, _ = jobs_store.page_jobs(
                session,
                jobs_store.JobFilter(name_prefix="memo-"),
                Window(Sort.parse("name", tuple(jobs_store.JOB_SORTS)), None, 50),
            )
            queues = quotas_store.queue_of(session, [j.id for j in found])
            records = [(j, queues.get(j.id)) for j in found]
        fresh = {
            j.name: JobPublic.of(j, queue=q if j.state == JobState.QUEUED else None).model_dump(
                mode="json"
            )
            for j, q in records
        }
        assert list(shown) == list(fresh)
        for name, job in shown.items():  # self_fencing is as of the answer's own instant
            assert job == fresh[name], name
            read, afresh = client.get(f"/v1/jobs/{name}"), unmemoized.get(f"/v1/jobs/{name}")
            assert read.status_code == afresh.status_code == 200, read.text
            assert read.json() == afresh.json(), name
            assert read.headers["ETag"] == afresh.headers["ETag"]
        return shown

    def hits() -> float:
        registry = client.app.state.metrics_registry  # type: ignore[attr-defined]
        return registry.get_sample_value("drover_api_job_documents_total", {"result": "hit"}) or 0

    page()
    before = hits()
    page()
    # unchanged rows: every document from the memo, the page's and each job's own (the API
    # keeping none counts misses only)
    assert hits() - before == 4 + 4

    now = datetime.now(UTC)
    with store.transaction() as session:  # "another node" starts memo-1 and memo-2
        for name in ("memo-1", "memo-2"):
            submit_elsewhere(session, name, "other")
    assert page()["memo-1"]["current_run"]["node"] == "other"
    with store.transaction() as session:
        job = jobs_store.get_job(session, "memo-1")
        assert job.current_run is not None
        assert fence_checks.record_fence_check(session, job.current_run.id, now)
        progress_store.save(
            session,
            [
                ProgressRecord(
                    run_id=job.current_run.id,
                    job_id=job.id,
                    batch_id=41,
                    rows=10,
                    input_rate=1.0,
                    processing_rate=2.0,
                    batch_duration_ms=5,
                    trigger_interval_ms=1000,
                    spark_timestamp=None,
                    declared_at=now,
                    reported_at=now,
                    heartbeat_at=now,
                )
            ],
        )
        queued = jobs_store.get_job(session, "memo-3")
        ledger.transition_job(
            session, queued, JobState.QUEUED, reason="gate", cause="test", node_id="o"
        )
        quotas_store.write_queue(
            session, "other", {queued.id: QueueRow(1, "rate", "business at its rate", now)}, []
        )
    shown = page()
    assert shown["memo-1"]["self_fencing"] is True
    assert shown["memo-1"]["progress"]["batch_id"] == 41
    assert shown["memo-3"]["queue"]["position"] == 1
    with store.transaction() as session:  # the next batch, and the queue moves on
        job = jobs_store.get_job(session, "memo-1")
        assert job.current_run is not None and job.progress is not None
        progress_store.save(session, [replace(job.progress, batch_id=42)])
        quotas_store.write_queue(
            session, "other", {queued.id: QueueRow(7, "rate", "business at its rate", now)}, []
        )
    shown = page()
    assert shown["memo-1"]["progress"]["batch_id"] == 42
    assert shown["memo-3"]["queue"]["position"] == 7
