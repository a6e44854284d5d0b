"""What the API's refusal tests share: a standalone cluster's body, the check of a problem+json
answer, and the snapshot of everything a refused request must leave as it was."""

from __future__ import annotations

from typing import Any

from scheduler.store import catalog as catalog_store
from scheduler.store import inspection
from scheduler.store import jobs as jobs_store
from scheduler.store.db import Store

#: the fields of a standalone cluster (a trailing slash the API drops)
STANDALONE = {
    "kind": "standalone",
    "master_url": "spark://127.0.0.1:7077",
    "rest_url": "http://127.0.0.1:6066/",
    "ui_url": "http://127.0.0.1:8080",
}


def snapshot(store: Store) -> dict[str, Any]:
    """Everything a refused request must leave as it was: the row counts, jobs, clusters and
    groups."""
    with store.session() as s:
        jobs, _ = jobs_store.list_jobs(s, limit=1000)
        return {
            "counts": inspection.table_counts(s),
            "jobs": jobs,
            "clusters": catalog_store.list_clusters(s),
            "groups": catalog_store.list_groups(s),
        }


def assert_problem(response: Any, status: int, kind: str | None = None) -> dict[str, Any]:
    """``response`` is a problem+json answer of ``status`` (and of ``kind``); its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    assert body["status"] == status and body["title"] and body["detail"] and body["instance"]
    if kind is not None:
        assert body["type"] == f"urn:drover:problem:{kind}", body
    return body
