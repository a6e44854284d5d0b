"""Labels and cursor pages on a real store (SQLite and MariaDB).

- labels are set at creation, replaced by PATCH, validated (422, store unchanged), and select
  jobs in listings (``key=value``, ``key!=value``, ``key``, ``!key``) together with the other
  filters (business, priority, name prefix);
- every list pages by cursor: the pages of 10,000 jobs, read while writers keep changing the
  jobs' states (and so their ``updated_at`` and ``version``), hold every job exactly once.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from scheduler.core.clock import utcnow
from scheduler.core.records import JobSpec
from scheduler.store import jobs as jobs_store
from scheduler.store.db import Store
from scheduler.store.models import Job, JobLabel
from tests.support.auth import store_fingerprint

pytestmark = pytest.mark.integration

PIPELINE = "/opt/pipelines/p.py"


def create(client: TestClient, name: str, **extra: Any) -> dict[str, Any]:
    response = client.post("/v1/jobs", json={"name": name, "entrypoint": PIPELINE, **extra})
    assert response.status_code == 201, response.text
    return response.json()


def names(client: TestClient, **params: Any) -> list[str]:
    response = client.get("/v1/jobs", params=params)
    assert response.status_code == 200, response.text
    return [j["name"] for j in response.json()["data"]]


def test_labels_are_kept_replaced_and_select_jobs(client: TestClient, store: Store) -> None:
    a = create(client, "orders-a", labels={"env": "prod", "tier": "critical"}, business="orders")
    assert a["labels"] == {"env": "prod", "tier": "critical"}
    create(client, "orders-b", labels={"env": "prod", "canary": ""}, priority="high")
    create(client, "clicks-c", labels={"env": "dev", "example.com/owner": "alice"})
    create(client, "clicks-d")

    assert names(client, label="env=prod") == ["orders-a", "orders-b"]
    assert names(client, label="env!=prod") == ["clicks-c", "clicks-d"]
    assert names(client, label="canary") == ["orders-b"]
    assert names(client, label=["env=prod", "!canary"]) == ["orders-a"]
    assert names(client, label="example.com/owner=alice") == ["clicks-c"]
    assert names(client, label="env=") == []
    assert names(client, name_prefix="orders-") == ["orders-a", "orders-b"]
    assert names(client, name_prefix="%") == []  # LIKE wildcards are plain text
    assert names(client, business="orders") == ["orders-a"]
    assert names(client, priority="high", label="env=prod") == ["orders-b"]

    patched = client.patch("/v1/jobs/orders-a", json={"labels": {"env": "staging"}})
    assert patched.status_code == 200 and patched.json()["labels"] == {"env": "staging"}
    assert patched.json()["spec_version"] == 2
    assert names(client, label="tier") == []
    assert names(client, label="env=staging") == ["orders-a"]
    assert client.get("/v1/jobs/orders-a").json()["labels"] == {"env": "staging"}

    before = store_fingerprint(store)
    for bad in (
        {"labels": {"-bad": "x"}},
        {"labels": {"env": "a b"}},
        {"labels": {"env": 3}},
        {"labels": {f"k{i}": "v" for i in range(65)}},
        {"labels": {".".join(["a" * 60] * 5) + "/x": "v"}},
    ):
        response = client.patch("/v1/jobs/orders-b", json=bad)
        assert response.status_code == 422, (bad, response.text)
        assert response.headers["content-type"] == "application/problem+json"
        response = client.post("/v1/jobs", json={"name": "new", "entrypoint": PIPELINE, **bad})
        assert response.status_code == 422, (bad, response.text)
    for selector in ("env==x", "=x", "a b", "!"):
        response = client.get("/v1/jobs", params={"label": selector})
        assert response.status_code == 422, (selector, response.text)
    assert store_fingerprint(store) == before

    # deleting a job deletes its labels (the selector finds nothing of it)
    client.post("/v1/jobs/clicks-c/stop")
    assert client.delete("/v1/jobs/clicks-c").status_code == 204
    with store.session() as session:
        keys = session.scalars(sa.select(JobLabel.key)).all()
    assert "example.com/owner" not in keys


def _bulk_insert(store: Store, count: int) -> list[str]:
    """``count`` stopped jobs created in one batch, as the API's bulk creation writes them."""
    specs = [JobSpec(name=f"job-{i:05d}", entrypoint=PIPELINE) for i in range(count)]
    with store.transaction() as session:
        facts = jobs_store.creation_facts(session, specs)
        planned = [jobs_store.plan_creation(session, facts, spec, cause="test") for spec in specs]
        jobs_store.insert_jobs(session, planned, node_id="test")
    return [spec.name for spec in specs]


def test_ten_thousand_jobs_page_without_duplicates_or_gaps_while_they_change(
    client: TestClient, store: Store
) -> None:
    everything = _bulk_insert(store, 10_000)
    stop = threading.Event()
    changes = [0]

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        states = ["QUEUED", "SUBMITTING", "STARTING", "RUNNING", "STOPPING", "STOPPED", "FAILED"]
        while not stop.is_set():
            picked = rng.sample(everything, 50)
            with store.transaction() as session:
                session.execute(
                    sa.update(Job)
                    .where(Job.name.in_(picked))
                    .values(
                        state=rng.choice(states),
                        updated_at=utcnow(),
                        version=Job.version + 1,
                    )
                )
            changes[0] += len(picked)

    writers = [threading.Thread(target=writer, args=(seed,), daemon=True) for seed in (1, 2)]
    for thread in writers:
        thread.start()
    try:
        seen: list[str] = []
        url: str | None = "/v1/jobs?limit=700"
        pages = 0
        while url is not None:
            response = client.get(url)
            assert response.status_code == 200, response.text
            page = response.json()
            seen += [j["name"] for j in page["data"]]
            url = page["next"]
            pages += 1
    finally:
        stop.set()
        for thread in writers:
            thread.join(timeout=30)
    assert changes[0] > 0, "the writers changed nothing while the pages were read"
    assert len(seen) == len(set(seen)), "a job appeared twice"
    assert sorted(seen) == everything, "a job is missing"
    assert pages == 15
    print(f"\n10,000 jobs in {pages} pages while writers made {changes[0]} state changes")

    # sorted by state, descending, with a filter: pages join up to the filtered list
    seen_running: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"state": "RUNNING", "sort": "-updated_at", "limit": 300}
        if cursor:
            params["cursor"] = cursor
        page = client.get("/v1/jobs", params=params).json()
        seen_running += [j["name"] for j in page["data"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
        # a cursor is bound to its sort and filters
        for other in ({"state": "FAILED"}, {"sort": "updated_at"}, {"label": "x"}):
            answer = client.get("/v1/jobs", params={**params, "cursor": cursor, **other})
            assert answer.status_code == 422, answer.text[:300]
    with store.session() as session:
        running = set(session.scalars(sa.select(Job.name).where(Job.state == "RUNNING")))
    assert set(seen_running) == running and len(seen_running) == len(running)
