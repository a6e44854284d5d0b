"""Cluster health on a real store (SQLite and MariaDB): votes, the monitor's conditional write,
the operator's mark and clear through the API and the CLI, job events and the audit log."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from api.app import create_app
from api.deps import NodeContext
from scheduler.config import Settings
from scheduler.core.clock import utcnow
from scheduler.core.errors import InvalidInput, StaleWrite
from scheduler.core.records import JobSpec
from scheduler.decisions.health import ClusterHealth, HealthPolicy, Vote, decide
from scheduler.store import health as health_store
from scheduler.store import jobs as jobs_store
from scheduler.store import journal
from scheduler.store.bootstrap import ensure_defaults
from scheduler.store.db import Store
from tests.integration.test_catalog_cli import api_url, drover
from tests.support.schema import install_head_schema

pytestmark = pytest.mark.integration

__all__ = ["api_url"]  # the CLI tests' node API fixture

PIPELINE = "/opt/pipelines/p.py"
POLICY = HealthPolicy(vote_freshness=30, threshold_count=100, threshold_window=60, quiet_period=0)


def create_job(client: TestClient, name: str, **extra: Any) -> dict[str, Any]:
    response = client.post("/v1/jobs", json={"name": name, "entrypoint": PIPELINE, **extra})
    assert response.status_code == 201, response.text
    return response.json()


def job_events(client: TestClient, name: str) -> list[dict[str, Any]]:
    response = client.get(f"/v1/jobs/{name}/events")
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


def failing_votes(store: Store, nodes: tuple[str, ...]) -> list[Vote]:
    now = utcnow()
    with store.transaction() as s:
        for node in nodes:
            health_store.record_vote(s, "local", Vote(node, now, False, 0.5, "readyz refused"))
    with store.session() as s:
        return health_store.votes_since(s, "local", now - timedelta(seconds=60))


def test_a_decision_made_from_a_stale_state_is_refused_and_leaves_nothing(
    store: Store, client: TestClient
) -> None:
    create_job(client, "orders", desired_state="RUNNING")
    nodes = ("n1", "n2", "n3")
    votes = failing_votes(store, nodes)
    assert [v.node_id for v in votes] == list(nodes) and not any(v.ok for v in votes)
    now = utcnow()
    decision = decide(ClusterHealth.NORMAL, votes, nodes, now=now, policy=POLICY)
    assert decision is not None and decision.new == ClusterHealth.VOTE_ABNORMAL
    with store.transaction() as s:
        health_store.record_decision(s, "local", decision, node_id="n1", now=now)
    with pytest.raises(StaleWrite), store.transaction() as s:  # n2 decided from NORMAL too
        health_store.record_decision(s, "local", decision, node_id="n2", now=now)
    with store.session() as s:
        state, reason, since = health_store.health_of(s, "local")
        events = health_store.list_health_events(s, "local")
    assert state == ClusterHealth.VOTE_ABNORMAL and "3 of 3 live nodes" in reason
    assert since is not None
    assert [(e.actor, e.decided_by.value) for e in events] == [("n1", "monitor")]
    assert [v["node_id"] for v in events[0].evidence["votes"]] == list(nodes)  # type: ignore[index]
    messages = [
        e["message"] for e in job_events(client, "orders") if e["cause"] == "cluster-health"
    ]
    assert len(messages) == 1 and messages[0].startswith(
        "cluster local is VOTE_ABNORMAL (decided by the monitor on n1): 3 of 3 live nodes"
    )


def test_nodes_deciding_at_the_same_instant_on_mariadb_record_one_transition(
    fresh_mysql_url: Callable[[], str], settings: Settings
) -> None:
    """Real concurrency: four transactions write the same decision at once (no deadlock with the
    jobs' events; exactly one wins, the others get StaleWrite and leave nothing)."""
    store = Store(fresh_mysql_url())
    try:
        install_head_schema(store)
        ensure_defaults(store, settings)
        with store.transaction() as s:
            for i in range(20):
                jobs_store.create_job(
                    s, JobSpec(name=f"job-{i}", entrypoint=PIPELINE), cause="t", node_id="t"
                )
        nodes = ("n1", "n2", "n3", "n4")
        votes = failing_votes(store, nodes)
        now = utcnow()
        decision = decide(ClusterHealth.NORMAL, votes, nodes, now=now, policy=POLICY)
        assert decision is not None
        barrier = threading.Barrier(len(nodes))

        def write(node: str) -> str:
            barrier.wait(timeout=10)
            try:
                with store.transaction() as s:
                    health_store.record_decision(s, "local", decision, node_id=node, now=now)
            except StaleWrite:
                return "stale"
            return "won"

        with ThreadPoolExecutor(len(nodes)) as pool:
            outcomes = sorted(pool.map(write, nodes))
        assert outcomes == ["stale", "stale", "stale", "won"]
        with store.session() as s:
            assert len(health_store.list_health_events(s, "local")) == 1
            assert sum(1 for n, _ in inspection_events(s) if n == "cluster-health") == 20
    finally:
        store.dispose()


def inspection_events(session: Any) -> list[tuple[str, str]]:
    from scheduler.store.models import JobEvent

    return [(e.cause, e.message) for e in session.scalars(select(JobEvent))]


def test_prune_forgets_only_old_votes(store: Store) -> None:
    now = utcnow()
    with store.transaction() as s:
        health_store.record_vote(s, "local", Vote("n1", now - timedelta(hours=1), True))
        health_store.record_vote(s, "local", Vote("n1", now, True))
    with store.transaction() as s:
        assert health_store.prune_votes(s, now - timedelta(minutes=10)) == 1
    with store.session() as s:
        assert len(health_store.votes_since(s, "local", now - timedelta(days=1))) == 1


def test_an_operator_sets_only_the_manual_mark_or_lifts_it(store: Store) -> None:
    with store.transaction() as s:
        for state in set(ClusterHealth) - set(health_store.OPERATOR_STATES):
            with pytest.raises(InvalidInput, match="MANUAL_ABNORMAL or NORMAL"):
                health_store.operator_change(s, "local", state, reason="r", actor="a", node_id="n")
        with pytest.raises(InvalidInput, match="a reason is required"):
            health_store.operator_change(
                s, "local", ClusterHealth.MANUAL_ABNORMAL, reason=" ", actor="a", node_id="n"
            )
    with store.session() as s:
        assert health_store.list_health_events(s, "local") == []


def test_a_team_operators_mark_names_the_team_and_marks_may_be_the_platforms(
    client: TestClient, store: Store, settings: Settings
) -> None:
    from tests.support.auth import auth_headers, member_token

    create_job(client, "theirs", team="web", desired_state="RUNNING")
    olga = auth_headers(member_token(store, "olga", "ads", "operator"))
    marked = client.post(
        "/v1/clusters/local/mark-abnormal", json={"reason": "looks slow"}, headers=olga
    )
    assert marked.status_code == 200, marked.text
    shown = "user:olga (operator of team ads)"
    health = client.get("/v1/clusters/local/health").json()
    assert health["reason"] == f"marked abnormal by {shown}: looks slow"
    # what team web sees on its own job: which team's operator stopped its starts
    (event,) = [e for e in job_events(client, "theirs") if e["cause"] == "cluster-health"]
    assert event["message"] == f"cluster local marked abnormal by {shown}: looks slow"
    assert client.post("/v1/clusters/local/clear", json={}, headers=olga).status_code == 200

    # the platform may keep marks to its own operators
    strict = settings.model_copy(update={"cluster_marks": "platform-operators"})
    with TestClient(create_app(NodeContext(strict, store)), base_url="http://127.0.0.1") as api:
        refused = api.post(
            "/v1/clusters/local/mark-abnormal", json={"reason": "looks slow"}, headers=olga
        )
        assert refused.status_code == 403, refused.text
        assert "cluster.mark" not in api.get("/v1/whoami", headers=olga).json()["permissions"]
        platform = auth_headers(member_token(store, "pat", "*", "operator"))
        ok = api.post(
            "/v1/clusters/local/mark-abnormal", json={"reason": "az down"}, headers=platform
        )
        assert ok.status_code == 200, ok.text
        reason = api.get("/v1/clusters/local/health", headers=platform).json()["reason"]
        assert reason == "marked abnormal by user:pat: az down"


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
    assert health["reason"] == "marked abnormal by user:admin: AZ eu-1a network maintenance"
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
        "cluster local cleared by user:admin: maintenance over",
        "cluster local marked abnormal by user:admin: AZ eu-1a network maintenance",
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
        health_store.record_decision(s, "local", decision, node_id="n1", now=now)
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
    assert "state    NORMAL" in out and "(no transitions)" in err  # an empty table: a note

    code, out, err = drover(
        "clusters", "mark-abnormal", "local", "--reason", "flapping master", "--api", api_url
    )
    assert code == 0, err
    assert out.strip() == "cluster local: NORMAL -> MANUAL_ABNORMAL (flapping master)"

    code, out, err = drover("clusters", "health", "local", "--api", api_url, "--json")
    assert code == 0, err
    assert '"state": "MANUAL_ABNORMAL"' in out

    code, out, err = drover("clusters", "health", "local", "--api", api_url)
    assert "MANUAL_ABNORMAL" in out and "operator:user:admin" in out and "flapping master" in out

    code, out, err = drover("clusters", "clear", "local", "--api", api_url)
    assert code == 0, err
    assert out.strip() == "cluster local: MANUAL_ABNORMAL -> NORMAL"

    code, out, err = drover("clusters", "clear", "local", "--api", api_url)
    assert code == 4 and "409" in err and "clear lifts a manual mark only" in err
