"""Cluster health on a real store (SQLite and MariaDB): votes, the monitor's conditional write,
the operator's mark and clear through the API and the CLI, job events and the audit log."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import NodeContext
from scheduler.config import Settings
from scheduler.health import ClusterHealth, HealthPolicy, Vote, decide
from scheduler.store import health as health_store
from scheduler.store import journal
from scheduler.store.db import Store
from scheduler.store.models import utcnow
from tests.integration.test_catalog_cli import api_url, drover

pytestmark = pytest.mark.integration

__all__ = ["api_url"]  # the CLI tests' node API fixture

PIPELINE = "/opt/pipelines/p.py"
POLICY = HealthPolicy(vote_freshness=30, threshold_count=100, threshold_window=60, quiet_period=0)


@pytest.fixture
def client(store: Store, settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(NodeContext(settings, store))) as c:
        yield c


def create_job(client: TestClient, name: str, **extra: Any) -> dict[str, Any]:
    response = client.post("/v1/jobs", json={"name": name, "entrypoint": PIPELINE, **extra})
    assert response.status_code == 201, response.text
    return response.json()


def job_events(client: TestClient, name: str) -> list[dict[str, Any]]:
    response = client.get(f"/v1/jobs/{name}/events")
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


def test_two_nodes_deciding_at_once_record_one_transition(store: Store) -> None:
    now = utcnow()
    nodes = ("n1", "n2", "n3")
    with store.transaction() as s:
        for node in nodes:
            health_store.record_vote(s, "local", Vote(node, now, False, 0.5, "readyz refused"))
    with store.session() as s:
        votes = health_store.votes_since(s, "local", now - timedelta(seconds=60))
    assert [v.node_id for v in votes] == list(nodes) and not any(v.ok for v in votes)
    decisions = [
        decide(ClusterHealth.NORMAL, votes, nodes, now=now, policy=POLICY) for _ in range(2)
    ]
    recorded = []
    for node, decision in zip(("n1", "n2"), decisions, strict=True):
        assert decision is not None and decision.new == ClusterHealth.VOTE_ABNORMAL
        with store.transaction() as s:
            recorded.append(
                health_store.record_decision(s, "local", decision, node_id=node, now=now)
            )
    assert recorded[0] is not None and recorded[1] is None  # the second saw the state move
    with store.session() as s:
        state, reason, since = health_store.health_of(s, "local")
        events = health_store.list_health_events(s, "local")
    assert state == ClusterHealth.VOTE_ABNORMAL and "3 of 3 live nodes" in reason
    assert since is not None
    assert len(events) == 1
    evidence = events[0].evidence
    assert [v["node_id"] for v in evidence["votes"]] == list(nodes)  # type: ignore[index]
    assert events[0].actor == "n1" and events[0].decided_by.value == "monitor"


def test_prune_forgets_only_old_votes(store: Store) -> None:
    now = utcnow()
    with store.transaction() as s:
        health_store.record_vote(s, "local", Vote("n1", now - timedelta(hours=1), True))
        health_store.record_vote(s, "local", Vote("n1", now, True))
    with store.transaction() as s:
        assert health_store.prune_votes(s, now - timedelta(minutes=10)) == 1
    with store.session() as s:
        assert len(health_store.votes_since(s, "local", now - timedelta(days=1))) == 1


def test_mark_and_clear_through_the_api(client: TestClient, store: Store) -> None:
    create_job(client, "orders", desired_state="RUNNING")
    create_job(client, "idle")  # stopped: told too (its history says why it did not start)
    health = client.get("/v1/clusters/local/health").json()
    assert health["state"] == "NORMAL" and health["history"] == [] and health["votes"] == []

    marked = client.post(
        "/v1/clusters/local/mark-abnormal", json={"reason": "AZ eu-1a network maintenance"}
    )
    assert marked.status_code == 200, marked.text
    assert marked.json() | {"from_state": "NORMAL", "to_state": "MANUAL_ABNORMAL"} == marked.json()

    health = client.get("/v1/clusters/local/health").json()
    assert health["state"] == "MANUAL_ABNORMAL"
    assert health["reason"] == "marked abnormal by anonymous: AZ eu-1a network maintenance"
    assert health["assessment"]["state"] == "MANUAL_ABNORMAL"
    assert [e["to_state"] for e in health["history"]] == ["MANUAL_ABNORMAL"]
    assert client.get("/v1/clusters/local").json()["health"] == "MANUAL_ABNORMAL"

    cleared = client.post("/v1/clusters/local/clear", json={"reason": "maintenance over"})
    assert cleared.status_code == 200, cleared.text
    assert cleared.json()["to_state"] == "NORMAL"
    assert client.get("/v1/clusters/local/health").json()["state"] == "NORMAL"

    messages = [
        e["message"] for e in job_events(client, "orders") if e["cause"] == "cluster-health"
    ]
    assert messages == [
        "cluster local cleared by anonymous: maintenance over",
        "cluster local marked abnormal by anonymous: AZ eu-1a network maintenance",
    ]
    idle = [e["message"] for e in job_events(client, "idle") if e["cause"] == "cluster-health"]
    assert idle == messages
    with store.session() as s:
        audit = [(a.action, a.target_name, a.detail) for a in journal.list_audit(s, limit=2)]
    assert audit == [
        (
            "cluster.clear",
            "local",
            {"from": "MANUAL_ABNORMAL", "to": "NORMAL", "reason": "maintenance over"},
        ),
        (
            "cluster.mark-abnormal",
            "local",
            {
                "from": "NORMAL",
                "to": "MANUAL_ABNORMAL",
                "reason": "AZ eu-1a network maintenance",
            },
        ),
    ]


def problem_of(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    return dict(response.json())


def test_bad_health_requests_are_problems_and_change_nothing(
    client: TestClient, store: Store
) -> None:
    assert (
        problem_of(client.post("/v1/clusters/local/clear"), 409)["type"]
        == "urn:drover:problem:illegal-transition"
    )
    problem_of(client.post("/v1/clusters/local/mark-abnormal", json={"reason": ""}), 422)
    problem_of(client.post("/v1/clusters/local/mark-abnormal", json={}), 422)
    problem_of(client.post("/v1/clusters/local/mark-abnormal", json={"reason": "  "}), 422)
    problem_of(client.post("/v1/clusters/nowhere/mark-abnormal", json={"reason": "x"}), 404)
    problem_of(client.get("/v1/clusters/nowhere/health"), 404)
    # an automatic state is not cleared by hand
    now = utcnow()
    votes = [Vote("n1", now, False, 0.1, "down")]
    decision = decide(ClusterHealth.NORMAL, votes, {"n1"}, now=now, policy=POLICY)
    assert decision is not None
    with store.transaction() as s:
        assert health_store.record_decision(s, "local", decision, node_id="n1", now=now)
    body = problem_of(client.post("/v1/clusters/local/clear"), 409)
    assert "clear lifts a manual mark only" in body["detail"]
    with store.session() as s:
        assert health_store.health_of(s, "local")[0] == ClusterHealth.VOTE_ABNORMAL
        assert [e.to_state for e in health_store.list_health_events(s, "local")] == [
            ClusterHealth.VOTE_ABNORMAL
        ]
        assert journal.list_audit(s) == []


def test_runbook_cli(api_url: str) -> None:
    code, out, err = drover("clusters", "health", "local", "--api", api_url)
    assert code == 0, err
    assert "state    NORMAL" in out and "(no transitions)" in out

    code, out, err = drover(
        "clusters", "mark-abnormal", "local", "--reason", "flapping master", "--api", api_url
    )
    assert code == 0, err
    assert out.strip() == "cluster local: NORMAL -> MANUAL_ABNORMAL (flapping master)"

    code, out, err = drover("clusters", "health", "local", "--api", api_url, "--json")
    assert code == 0, err
    assert '"state": "MANUAL_ABNORMAL"' in out

    code, out, err = drover("clusters", "health", "local", "--api", api_url)
    assert "MANUAL_ABNORMAL" in out and "operator:anonymous" in out and "flapping master" in out

    code, out, err = drover("clusters", "clear", "local", "--api", api_url)
    assert code == 0, err
    assert out.strip() == "cluster local: MANUAL_ABNORMAL -> NORMAL"

    code, out, err = drover("clusters", "clear", "local", "--api", api_url)
    assert code == 1 and "409" in err and "clear lifts a manual mark only" in err
