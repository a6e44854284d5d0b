"""Bulk operations on a real store (SQLite and MariaDB) with the real reconciler and
executor and a fake cluster: stop, start and restart by selector through ``/v1/operations`` (the
dry run lists exactly what then runs, in that order), each job's command applied once and
reached, team scoping, idempotent retries, cancel, and an executor taken over by a newer epoch
without any job commanded twice."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import NodeContext
from scheduler.config import Settings
from scheduler.core.ledger import Backends
from scheduler.core.ownership import Claim, Fence
from scheduler.decisions.identity import Role
from scheduler.decisions.operations import failover as fo
from scheduler.loops.operations import Executor
from scheduler.loops.reconciler import Reconciler
from scheduler.loops.replication import ReplicaCheckpoints
from scheduler.store.db import Store
from scheduler.store.operations_ledger import SqlOperationsLedger
from tests.support.api_world import ReconcilerWorld
from tests.support.auth import auth_headers, member_token
from tests.support.fakes import FakeBackend, FakeBackends, add_unreachable_clusters

pytestmark = pytest.mark.integration

GROUP = "g"
PIPELINE = "/opt/pipelines/p.py"
TIMING = fo.Timing(drain_timeout=60, start_timeout=60)
FINAL = ("SUCCEEDED", "FAILED", "CANCELLED")

JOBS = {
    # name: (team, business, priority, labels)
    "ads-a": ("ads", "web", "normal", {"env": "prod"}),
    "ads-b": ("ads", "web", "high", {"env": "prod", "tier": "gold"}),
    "ads-c": ("ads", "web", "low", {"env": "dev"}),
    "pay-a": ("pay", "money", "high", {"env": "prod"}),
    "pay-b": ("pay", "money", "normal", {"env": "dev"}),
}


@dataclass
class World(ReconcilerWorld):
    store: Store
    client: TestClient
    a: FakeBackend
    backends: Backends
    settings: Settings
    reconcilers: dict[str, Reconciler] = field(default_factory=dict)

    def post(self, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        response = self.client.post("/v1/operations", json=body, **kw)
        assert response.status_code in (200, 201), response.text
        return dict(response.json())

    def get(self, operation: int) -> dict[str, Any]:
        response = self.client.get(f"/v1/operations/{operation}")
        assert response.status_code == 200, response.text
        return dict(response.json())


@pytest.fixture
def world(
    store: Store, settings: Settings, admin_headers: dict[str, str], tmp_path: Path
) -> Iterator[World]:
    with store.transaction() as s:
        add_unreachable_clusters(s, tmp_path.as_uri(), ["A"], group=GROUP)
    a = FakeBackend(start_running=True)
    w = World(store, None, a, FakeBackends(A=a), settings)  # type: ignore[arg-type]
    app = create_app(NodeContext(settings, store))
    try:
        with TestClient(app, base_url="http://127.0.0.1", headers=admin_headers) as client:
            w.client = client
            bodies = {
                name: {
                    "entrypoint": PIPELINE,
                    "team": team,
                    "business": business,
                    "priority": priority,
                    "labels": labels,
                }
                for name, (team, business, priority, labels) in JOBS.items()
            }
            w.create_running(bodies, ticks=6)
            yield w
    finally:
        for reconciler in w.reconcilers.values():
            reconciler.close()


def executor(w: World, node: str = "n1") -> Executor:
    return Executor(
        SqlOperationsLedger(w.store, node_id=node),
        node_id=node,
        timing=TIMING,
        checkpoints=ReplicaCheckpoints(w.store),
        parallelism=2,
    )


def drive(
    w: World, ex: Executor, claim: Claim, operation: int, *, rounds: int = 30
) -> dict[str, Any]:
    return w.drive(ex, claim, f"/v1/operations/{operation}", rounds=rounds)


CLAIM = Claim(GROUP, Fence("n1", 1), 0, 1)


def test_bulk_stop_start_restart_by_selector(world: World) -> None:
    w = world
    ex = executor(w)
    # stop the production jobs of team ads: the dry run is exactly what then runs, in order
    selector = {"teams": ["ads"], "labels": ["env=prod"]}
    dry = w.post({"kind": "stop", "selector": selector, "dry_run": True})
    assert dry["id"] is None and dry["dry_run"] and dry["team"] == "ads"
    assert [(i["job"], i["action"]) for i in dry["items"]] == [("ads-b", "stop"), ("ads-a", "stop")]
    assert w.client.get("/v1/operations").json()["data"] == []  # a dry run stores nothing
    stale = w.client.post(
        "/v1/operations", json={"kind": "stop", "selector": selector, "expected_plan": "00ff"}
    )
    assert stale.status_code == 409 and stale.json()["plan_digest"] == dry["plan_digest"]
    op = w.post(
        {
            "kind": "stop",
            "selector": selector,
            "reason": "drill",
            "expected_plan": dry["plan_digest"],
            "grace_seconds": 0,
        }
    )
    assert op["grace_seconds"] == 0
    assert (
        op["state"] == "PENDING"
        and op["kind"] == "stop"
        and op["plan_digest"] == dry["plan_digest"]
    )
    assert [(i["job"], i["action"]) for i in op["items"]] == [
        (i["job"], i["action"]) for i in dry["items"]
    ]
    done = drive(w, ex, CLAIM, op["id"])
    assert done["state"] == "SUCCEEDED" and done["counts"] == {"DONE": 2}, done
    for item in done["items"]:
        assert [h["step"] for h in item["history"]][0::1][-1] == "DONE"
        assert "WAITING" in [h["step"] for h in item["history"]]
    states = {n: w.job(n)["state"] for n in JOBS}
    assert states == {
        "ads-a": "STOPPED", "ads-b": "STOPPED", "ads-c": "RUNNING",
        "pay-a": "RUNNING", "pay-b": "RUNNING",
    }  # fmt: skip
    assert not w.a.live("ads-a") and not w.a.live("ads-b") and w.a.live("ads-c")
    # every job command is audited as the operation's creator, with the operation
    audit = w.client.get("/v1/audit", params={"target_kind": "job"}).json()["data"]
    stops = [a for a in audit if a["action"] == "job.stop"]
    assert sorted(a["target_name"] for a in stops) == ["ads-a", "ads-b"]
    assert all(a["detail"]["operation"] == op["id"] for a in stops)
    ops_audit = w.client.get("/v1/audit", params={"target_kind": "operation"}).json()["data"]
    assert [a["action"] for a in ops_audit] == [
        "operation.finish",
        "operation.start",
        "operation.create",
    ]
    assert {a["detail"]["kind"] for a in ops_audit} == {"stop"}

    # start what is stopped in business web: the running one is skipped
    start = w.post({"kind": "start", "selector": {"businesses": ["web"]}})
    refused = w.client.post(
        "/v1/operations",
        json={"kind": "start", "selector": {"businesses": ["web"]}, "grace_seconds": 5},
    )
    assert refused.status_code == 422, refused.text
    assert [(i["job"], i["action"]) for i in start["items"]] == [
        ("ads-b", "start"), ("ads-a", "start"), ("ads-c", "skip"),
    ]  # fmt: skip
    done = drive(w, ex, CLAIM, start["id"])
    assert done["state"] == "SUCCEEDED" and done["counts"] == {"DONE": 2, "SKIPPED": 1}, done
    assert all(w.job(n)["state"] == "RUNNING" for n in JOBS)

    # a rolling restart by name prefix, one at a time: each job gets exactly one new run
    before = {n: w.job(n)["current_run"]["id"] for n in ("pay-a", "pay-b")}
    restart = w.post({"kind": "restart", "selector": {"name_prefix": "pay-"}, "parallelism": 1})
    assert restart["parallelism"] == 1
    done = drive(w, ex, CLAIM, restart["id"])
    assert done["state"] == "SUCCEEDED" and done["counts"] == {"DONE": 2}, done
    for name, old in before.items():
        runs = w.runs(name)
        assert len(runs) == 2, runs  # the old one and exactly one new one
        job = w.job(name)
        assert job["state"] == "RUNNING" and job["current_run"]["id"] != old
        assert len(w.a.live(name)) == 1

    # listing: every kind, newest first, in cursor pages
    page = w.client.get("/v1/operations", params={"limit": 2}).json()
    assert [o["id"] for o in page["data"]] == [restart["id"], start["id"]]
    rest = w.client.get(page["next"]).json()
    assert [o["id"] for o in rest["data"]] == [op["id"]] and rest["next"] is None
    only = w.client.get("/v1/operations", params={"kind": "restart"}).json()["data"]
    assert [o["id"] for o in only] == [restart["id"]]


def test_a_team_operator_acts_only_on_its_own_jobs(world: World) -> None:
    w = world
    ads = auth_headers(member_token(w.store, "alice", "ads", Role.OPERATOR))
    pay = auth_headers(member_token(w.store, "bob", "pay", Role.OPERATOR))
    viewer = auth_headers(member_token(w.store, "vic", "ads", Role.VIEWER))

    everything = {"kind": "stop", "selector": {"all": True}, "dry_run": True}
    plan = w.client.post("/v1/operations", json=everything, headers=ads).json()
    assert sorted(i["job"] for i in plan["items"]) == ["ads-a", "ads-b", "ads-c"]
    assert plan["team"] == "ads"
    other = {"kind": "stop", "selector": {"teams": ["pay"]}, "dry_run": True}
    refused = w.client.post("/v1/operations", json=other, headers=ads)
    assert refused.status_code == 403, refused.text
    assert w.client.post("/v1/operations", json=everything, headers=viewer).status_code == 403

    mine = w.client.post(
        "/v1/operations", json={"kind": "restart", "selector": {"labels": ["env"]}}, headers=ads
    )
    assert mine.status_code == 201, mine.text
    op = mine.json()
    assert op["team"] == "ads" and {i["job"] for i in op["items"]} == {"ads-a", "ads-b", "ads-c"}
    # visible to its team (a viewer too), not to another team
    assert w.client.get(f"/v1/operations/{op['id']}", headers=viewer).status_code == 200
    assert w.client.get(f"/v1/operations/{op['id']}", headers=pay).status_code == 404
    assert w.client.get("/v1/operations", headers=pay).json()["data"] == []
    assert [o["id"] for o in w.client.get("/v1/operations", headers=viewer).json()["data"]] == [
        op["id"]
    ]
    assert w.client.post(f"/v1/operations/{op['id']}/cancel", headers=pay).status_code == 404
    assert w.client.post(f"/v1/operations/{op['id']}/cancel", headers=viewer).status_code == 403
    cancelled = w.client.post(f"/v1/operations/{op['id']}/cancel", headers=ads)
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["state"] == "CANCELLED"  # nobody had started it
    assert {i["step"] for i in cancelled.json()["items"]} == {"CANCELLED"}
    again = w.client.post(f"/v1/operations/{op['id']}/cancel", headers=ads)
    assert again.status_code == 409
    assert all(w.job(n)["desired_state"] == "RUNNING" for n in JOBS)


def test_a_retry_with_the_same_key_creates_no_second_operation(world: World) -> None:
    w = world
    body = {"kind": "stop", "selector": {"jobs": ["pay-b"]}}
    key = {"Idempotency-Key": "bulk-stop-pay-b-1"}
    first = w.client.post("/v1/operations", json=body, headers=key)
    second = w.client.post("/v1/operations", json=body, headers=key)
    assert first.status_code == second.status_code == 201
    assert second.json()["id"] == first.json()["id"]
    assert second.headers.get("Idempotent-Replayed") == "true"
    reused = w.client.post(
        "/v1/operations", json={**body, "selector": {"jobs": ["pay-a"]}}, headers=key
    )
    assert reused.status_code == 422
    assert len(w.client.get("/v1/operations").json()["data"]) == 1


def test_a_newer_executor_takes_over_and_no_job_is_commanded_twice(world: World) -> None:
    w = world
    op = w.post({"kind": "restart", "selector": {"all": True}, "parallelism": 2})
    assert len(op["items"]) == 5
    old = executor(w, "n1")
    old.round({GROUP: Claim(GROUP, Fence("n1", 1), 0, 1)})  # applies the first two restarts
    first = w.get(op["id"])
    assert first["executor"] == "n1" and first["counts"] == {"WAITING": 2, "PENDING": 3}
    # n1 is frozen; n2 holds the group under a newer epoch and finishes the operation
    new = executor(w, "n2")
    newer = Claim(GROUP, Fence("n2", 2), 0, 1)
    for _ in range(30):
        new.round({GROUP: newer})
        w.reconciler("n2", 2).tick()
        if w.get(op["id"])["state"] in FINAL:
            break
    done = w.get(op["id"])
    assert done["state"] == "SUCCEEDED" and done["executor"] == "n2", done
    # the old executor comes back with its stale claim: it changes nothing
    old.round({GROUP: Claim(GROUP, Fence("n1", 1), 0, 1)})
    assert w.get(op["id"]) == done
    for name in JOBS:
        assert len(w.runs(name)) == 2, w.runs(name)  # restarted exactly once
        assert w.job(name)["state"] == "RUNNING" and len(w.a.live(name)) == 1
    audit = w.client.get("/v1/audit", params={"target_kind": "job"}).json()["data"]
    assert sorted(a["target_name"] for a in audit if a["action"] == "job.restart") == sorted(JOBS)
