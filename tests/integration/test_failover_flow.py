"""Failover on a real store (SQLite and MariaDB) with the real reconciler and executor, and fake
clusters A and B: the plan through the API (dry run = execution), kill and confirm, fence (a stale
driver answered "superseded"), the checkpoint copied under B's root, the switch, one submission
on B per job; the executor's claim (a newer epoch takes over, an older one changes nothing, no
item submitted twice), cancel, and automatic failover once per incident."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from api.app import create_app
from api.deps import NodeContext
from scheduler.config import Settings
from scheduler.core.clock import utcnow
from scheduler.core.errors import NotOwner
from scheduler.core.ledger import Backends
from scheduler.core.ownership import Claim, Fence
from scheduler.core.states import JobState, RunState
from scheduler.decisions.health import ClusterHealth, Decision, HealthPolicy, Vote, assess
from scheduler.decisions.operations import failover as fo
from scheduler.loops.operations import Executor
from scheduler.loops.reconciler import Reconciler
from scheduler.loops.replication import ReplicaCheckpoints
from scheduler.store import health as health_store
from scheduler.store import operations as ops_store
from scheduler.store.db import Store
from scheduler.store.fence_checks import record_fence_check
from scheduler.store.models import Job, Run
from scheduler.store.operations_ledger import SqlOperationsLedger
from tests.support.api_world import ReconcilerWorld
from tests.support.fakes import FakeBackend, FakeBackends, add_unreachable_clusters

pytestmark = pytest.mark.integration

GROUP = "g"
PIPELINE = "/opt/pipelines/p.py"
TIMING = fo.Timing(fence_exit_grace=0.0, drain_timeout=60, start_timeout=60, retry_after=0)


@dataclass
class World(ReconcilerWorld):
    store: Store
    client: TestClient
    a: FakeBackend
    b: FakeBackend
    root: Path
    backends: Backends
    reconcilers: dict[str, Reconciler] = field(default_factory=dict)
    reachable: dict[str, bool] = field(default_factory=lambda: {"A": True, "B": True})
    #: how far the executors' and reconcilers' clocks run ahead of the wall clock (time that
    #: "passed" for Drover's decisions; the API's fence answers keep the wall clock)
    later: timedelta = timedelta(0)

    def now(self) -> datetime:
        return utcnow() + self.later

    def token(self, run_id: int) -> str:
        """A run's fencing token, as its driver holds it (the API shows it to nobody, the
        store keeps its digest): from the submission that carried it."""
        token = self.a.tokens.get(run_id) or self.b.tokens.get(run_id)
        assert token is not None, f"run {run_id} was never submitted"
        return token

    def checkpoint(self, cluster: str, job: str, batches: int) -> Path:
        path = self.root / cluster / job / "checkpoint"
        for sub in ("offsets", "commits"):
            (path / sub).mkdir(parents=True, exist_ok=True)
            for n in range(batches):
                (path / sub / str(n)).write_text(f"{sub} {n}\n")
        (path / "metadata").write_text('{"id": "q"}\n')
        return path


@pytest.fixture
def world(
    store: Store, settings: Settings, admin_headers: dict[str, str], tmp_path: Path
) -> Iterator[World]:
    root = tmp_path / "storage"
    with store.transaction() as s:
        add_unreachable_clusters(s, root.as_uri(), ["A", "B"], group=GROUP)
    a = FakeBackend(start_running=True)
    b = FakeBackend(start_running=True)
    w = World(store, None, a, b, root, FakeBackends(A=a, B=b))  # type: ignore[arg-type]
    app = create_app(
        NodeContext(settings, store, reachable=lambda cluster: w.reachable[cluster.name])
    )
    try:
        with TestClient(app, base_url="http://127.0.0.1", headers=admin_headers) as client:
            w.client = client
            yield w
    finally:
        for reconciler in w.reconcilers.values():
            reconciler.close()


def create_jobs(w: World, names: dict[str, str]) -> None:
    """Jobs (name: priority) of the group, RUNNING on A."""
    w.create_running(
        {name: {"entrypoint": PIPELINE, "priority": priority} for name, priority in names.items()},
        ticks=5,
    )


def self_fencing(w: World, *names: str) -> None:
    """Their runs' pipelines have checked in (as drover_runtime does at start)."""
    for name in names:
        run_id = w.job(name)["current_run"]["id"]
        with w.store.transaction() as s:
            record_fence_check(s, run_id, utcnow() - timedelta(seconds=1))


def failover(w: World, **body: Any) -> dict[str, Any]:
    response = w.client.post("/v1/failovers", json={"source": "A", **body})
    assert response.status_code in (200, 201), response.text
    return dict(response.json())


def drive(
    w: World, executor: Executor, claim: Claim, operation: int, *, rounds: int = 30
) -> dict[str, Any]:
    return w.drive(executor, claim, f"/v1/failovers/{operation}", rounds=rounds)


def executor(w: World, node: str = "n1", timing: fo.Timing = TIMING) -> Executor:
    return Executor(
        SqlOperationsLedger(w.store, node_id=node, clock=w.now),
        node_id=node,
        timing=timing,
        checkpoints=ReplicaCheckpoints(w.store),
        parallelism=2,
        clock=w.now,
    )


def test_failover_kills_copies_switches_and_starts_once_on_b(world: World) -> None:
    w = world
    create_jobs(w, {"zeta": "high", "alpha": "high", "mid": "normal", "low1": "low"})
    for name, batches in (("zeta", 4), ("alpha", 7)):
        w.checkpoint("A", name, batches)
    selector = {"priorities": ["high", "normal"]}

    dry = failover(w, selector=selector, dry_run=True)
    assert dry["id"] is None and dry["dry_run"] and dry["source_reachable"]
    assert [(i["job"], i["action"], i["target_cluster"]) for i in dry["items"]] == [
        ("alpha", "kill", "B"),
        ("zeta", "kill", "B"),
        ("mid", "kill", "B"),
    ]
    assert "source A reachable: kill run" in dry["items"][0]["why"]
    assert w.client.get("/v1/failovers").json()["data"] == []  # a dry run stores nothing

    wrong = w.client.post(
        "/v1/failovers", json={"source": "A", "selector": selector, "expected_plan": "00ff"}
    )
    assert wrong.status_code == 409 and wrong.json()["plan_digest"] == dry["plan_digest"]
    run = failover(w, selector=selector, reason="AZ a drill", expected_plan=dry["plan_digest"])
    assert run["plan_digest"] == dry["plan_digest"] and run["state"] == "PENDING"
    assert [(i["job"], i["action"]) for i in run["items"]] == [
        (i["job"], i["action"]) for i in dry["items"]
    ]

    claim = Claim(GROUP, Fence("n1", 1), 0, 1)
    done = drive(w, executor(w), claim, run["id"])
    assert done["state"] == "SUCCEEDED", done
    assert done["executor"] == "n1" and done["counts"] == {"DONE": 3}
    for item in done["items"]:
        steps = [h["step"] for h in item["history"]]
        assert steps[:2] == ["PENDING", "DRAINING"] and steps[-1] == "DONE", steps
        assert "CHECKPOINT" in steps and "SWITCHING" in steps and "STARTING" in steps
    by_job = {i["job"]: i for i in done["items"]}
    assert by_job["alpha"]["resume_batch"] == 7 and by_job["zeta"]["resume_batch"] == 4
    assert by_job["mid"]["resume_batch"] is None  # no checkpoint on A: afresh
    copied = w.root / "B" / "alpha" / "checkpoint" / "commits" / "6"
    assert copied.read_text() == "commits 6\n"
    assert by_job["alpha"]["checkpoint_to"] == (w.root / "B" / "alpha" / "checkpoint").as_uri()

    for name in ("alpha", "zeta", "mid"):
        job = w.job(name)
        assert job["cluster"] == "B" and job["state"] == "RUNNING" and job["directive"] is None
        runs = w.runs(name)
        assert [r["cluster"] for r in runs].count("B") == 1  # submitted once on B
        assert {r["cluster"]: r["state"] for r in runs} == {"A": "KILLED", "B": "RUNNING"}
        assert not w.a.live(name) and len(w.b.live(name)) == 1
    assert w.job("low1")["cluster"] == "A" and len(w.a.live("low1")) == 1  # not selected
    events = [e["message"] for e in w.client.get("/v1/jobs/alpha/events").json()["data"]]
    assert any(m.startswith(f"failover {run['id']}: drain run") for m in events)
    audit = w.client.get("/v1/audit", params={"target_kind": "operation"}).json()["data"]
    assert [a["action"] for a in audit] == ["failover.finish", "failover.start", "failover.create"]

    # fail back: the default target of a job on its failover cluster is the primary
    back = failover(w, selector={"jobs": ["alpha"]}, dry_run=True)
    assert back["source"] == "A" and back["items"] == []
    back = w.client.post(
        "/v1/failovers", json={"source": "B", "selector": {"jobs": ["alpha"]}, "dry_run": True}
    ).json()
    assert [(i["job"], i["target_cluster"]) for i in back["items"]] == [("alpha", "A")]


def test_unreachable_source_fences_self_fencing_runs_and_refuses_the_others(
    world: World,
) -> None:
    w = world
    create_jobs(w, {"fenced": "high", "plain": "high", "forced": "high"})
    self_fencing(w, "fenced")
    old = {n: w.job(n)["current_run"] for n in ("fenced", "plain", "forced")}
    w.checkpoint("A", "fenced", 3)
    w.a.unreachable = True
    w.reachable["A"] = False
    selector = {"priorities": ["high"]}
    refused = failover(w, selector=selector, dry_run=True)
    assert [i["action"] for i in refused["items"]] == ["refuse"] * 3
    assert "unreachable but NORMAL: refused" in refused["items"][0]["why"]

    response = w.client.post("/v1/clusters/A/mark-abnormal", json={"reason": "AZ a unreachable"})
    assert response.status_code == 200, response.text
    force = {"jobs": ["forced"], "acknowledgement": "AZ a is powered off"}
    plan = failover(w, selector=selector, force=force, dry_run=True)
    assert [(i["job"], i["action"], i["forced"]) for i in plan["items"]] == [
        ("fenced", "fence", False),
        ("forced", "fence", True),
        ("plain", "refuse", False),
    ]
    assert "will fence run" in plan["items"][0]["why"]
    assert (
        "not known to be self-fencing yet and source A unreachable: refused unless forced"
        in (plan["items"][2]["why"])
    )
    op = failover(w, selector=selector, force=force, expected_plan=plan["plan_digest"])

    claim = Claim(GROUP, Fence("n1", 1), 0, 1)
    ex = executor(w)
    for _ in range(6):  # the owner fences "fenced"; its driver has not checked since
        ex.round({GROUP: claim})
        w.tick()
    status = w.client.get(f"/v1/failovers/{op['id']}").json()
    steps = {i["job"]: i["step"] for i in status["items"]}
    assert steps["fenced"] == "FENCING" and steps["plain"] == "REFUSED"
    fenced_run = w.runs("fenced")[0]
    assert fenced_run["state"] == "LOST" and fenced_run["fenced_at"] is not None
    waiting = next(i for i in status["items"] if i["job"] == "fenced")["waiting"]
    assert "stops at its next fence check" in waiting
    assert w.b.live("fenced") == []  # nothing on B before the stale driver is told

    # the stale driver on A asks its fence with its own token: "superseded", noted on the run
    answer = w.client.get(
        "/v1/jobs/fenced/fence",
        headers={"X-Drover-Fencing-Token": w.token(old["fenced"]["id"])},
    )
    assert answer.status_code == 200 and answer.json()["fencing_token"] is None
    assert w.runs("fenced")[0]["fence_superseded_at"] is not None

    done = drive(w, ex, claim, op["id"])
    assert done["state"] == "FAILED"  # "plain" was refused
    by_job = {i["job"]: i for i in done["items"]}
    assert by_job["fenced"]["step"] == "DONE" and by_job["forced"]["step"] == "DONE"
    assert by_job["fenced"]["resume_batch"] == 3
    notes = " ".join(h["note"] for h in by_job["fenced"]["history"])
    assert "answered 'superseded'" in notes
    assert "forced by the operator" in " ".join(h["note"] for h in by_job["forced"]["history"])
    for name in ("fenced", "forced"):
        assert w.job(name)["cluster"] == "B" and w.job(name)["state"] == "RUNNING"
        assert [r["cluster"] for r in w.runs(name)].count("B") == 1
    assert w.job("plain")["cluster"] == "A" and w.job("plain")["directive"] is None
    # the fenced applications are still on A as far as the fake knows (A was cut off):
    # only their own fence checks stop them
    assert len(w.a.live("plain")) == 1


def test_a_newer_executor_takes_over_and_the_old_one_changes_nothing(world: World) -> None:
    w = world
    names = {f"job{i}": "high" for i in range(4)}
    create_jobs(w, names)
    op = failover(w, selector={"all": True}, parallelism=4)
    old_claim = Claim(GROUP, Fence("n1", 1), 0, 1)
    old = executor(w, "n1")
    old.round({GROUP: old_claim})  # n1 claims it and writes the drain directives
    status = w.client.get(f"/v1/failovers/{op['id']}").json()
    assert status["executor"] == "n1" and status["state"] == "RUNNING"
    assert {i["step"] for i in status["items"]} == {"DRAINING"}

    # n1 "dies"; membership moves to epoch 2, where n2 holds the slot
    new_claim = Claim(GROUP, Fence("n2", 2), 0, 1)
    with w.store.transaction() as s:
        assert not ops_store.claim_operation(s, op["id"], Fence("n0", 0))  # older: refused
    new = executor(w, "n2")
    w.reconciler("n2", 2).tick()  # n2's reconciler claims the jobs under epoch 2
    w.reconcilers["n1/1"] = w.reconciler("n2", 2)
    new.round({GROUP: new_claim})
    assert w.client.get(f"/v1/failovers/{op['id']}").json()["executor"] == "n2"

    # n1 comes back with its stale view: every write it tries is refused, nothing changes
    with w.store.session() as s:
        current = ops_store.get_operation(s, op["id"])
    before = w.client.get(f"/v1/failovers/{op['id']}").json()
    assert old.execute(current, old_claim) == 0  # it cannot claim it back
    with pytest.raises(NotOwner):  # nor act on its old view of it
        old.execute(replace(current, executor="n1", executor_epoch=1), old_claim)
    with w.store.transaction() as s:
        assert not ops_store.claim_operation(s, op["id"], Fence("n1", 1))
    assert w.client.get(f"/v1/failovers/{op['id']}").json() == before

    done = drive(w, new, new_claim, op["id"])
    assert done["state"] == "SUCCEEDED" and done["executor"] == "n2"
    for name in names:
        assert [r["cluster"] for r in w.runs(name)].count("B") == 1
    # one application per job on B: no item was submitted twice
    assert sorted(a.app_name.split(":")[1] for a in w.b.live()) == sorted(names)


def test_cancel_stops_new_items_and_leaves_drained_jobs_where_they_are(world: World) -> None:
    w = world
    create_jobs(w, {"c1": "high", "c2": "high", "c3": "high"})
    w.a.kills_confirm = False  # kills are confirmed only when the test says so
    op = failover(w, selector={"all": True}, parallelism=1)
    claim = Claim(GROUP, Fence("n1", 1), 0, 1)
    ex = executor(w)
    ex.round({GROUP: claim})
    w.tick()
    status = w.client.get(f"/v1/failovers/{op['id']}").json()
    assert [i["step"] for i in status["items"]] == ["DRAINING", "PENDING", "PENDING"]
    cancelled = w.client.post(f"/v1/failovers/{op['id']}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["cancel_requested_by"]
    ex.round({GROUP: claim})
    status = w.client.get(f"/v1/failovers/{op['id']}").json()
    assert [i["step"] for i in status["items"]] == ["DRAINING", "CANCELLED", "CANCELLED"]
    w.a.confirm_kills()
    done = drive(w, ex, claim, op["id"])
    assert done["state"] == "CANCELLED"
    assert [i["step"] for i in done["items"]] == ["CANCELLED"] * 3
    for _ in range(3):
        w.tick()
    for name in ("c1", "c2", "c3"):
        job = w.job(name)
        assert job["cluster"] == "A" and job["directive"] is None and job["state"] == "RUNNING"
    assert w.b.live() == []
    assert w.client.post(f"/v1/failovers/{op['id']}/cancel").status_code == 409


def test_an_operation_nobody_started_is_cancelled_at_once(world: World) -> None:
    w = world
    create_jobs(w, {"p1": "high"})
    op = failover(w, selector={"all": True})
    cancelled = w.client.post(f"/v1/failovers/{op['id']}/cancel").json()
    assert cancelled["state"] == "CANCELLED"
    assert [i["step"] for i in cancelled["items"]] == ["CANCELLED"]
    executor(w).round({GROUP: Claim(GROUP, Fence("n1", 1), 0, 1)})
    assert w.job("p1")["directive"] is None


def test_automatic_failover_once_per_incident(world: World) -> None:
    w = world
    create_jobs(w, {"auto-high": "high", "auto-low": "low"})
    put = w.client.put(
        f"/v1/groups/{GROUP}/auto-failover",
        json={"enabled": True, "after_seconds": 0, "min_priority": "high"},
    )
    assert put.status_code == 200 and put.json()["version"] == 1, put.text
    claim = Claim(GROUP, Fence("n1", 1), 0, 1)
    ex = executor(w)
    ex.round({GROUP: claim})
    assert w.client.get("/v1/failovers").json()["data"] == []  # A is NORMAL

    policy = HealthPolicy(vote_freshness=30, threshold_count=100, threshold_window=60)
    now = utcnow()
    votes = [Vote("n1", now, False, 0.1, "refused")]
    assessment = assess(ClusterHealth.NORMAL, votes, {"n1"}, now=now, policy=policy)
    decision = Decision(ClusterHealth.NORMAL, assessment.state, assessment)
    with w.store.transaction() as s:
        health_store.record_decision(s, "A", decision, node_id="n1", now=now)
    w.a.unreachable = True
    for _ in range(3):
        ex.round({GROUP: claim})
    page = w.client.get("/v1/failovers").json()["data"]
    assert len(page) == 1, page  # once per incident
    op = w.client.get(f"/v1/failovers/{page[0]['id']}").json()
    assert op["created_by"] == "drover:auto-failover" and op["incident"].startswith("auto:g:A:")
    assert [(i["job"], i["action"]) for i in op["items"]] == [("auto-high", "refuse")]
    assert "not known to be self-fencing yet" in op["items"][0]["why"]


def test_superseded_check_is_noted_only_for_runs_that_are_not_current(world: World) -> None:
    w = world
    create_jobs(w, {"f1": "high"})
    token = w.token(w.job("f1")["current_run"]["id"])
    ok = w.client.get("/v1/jobs/f1/fence", headers={"X-Drover-Fencing-Token": token})
    assert ok.json()["fencing_token"] == token
    with w.store.session() as s:
        run = s.query(Run).one()
        assert run.fence_superseded_at is None and run.state == RunState.RUNNING.value


def test_a_failed_fence_then_a_move_never_starts_the_job_beside_its_stale_driver(
    world: World,
) -> None:
    """The double-run path of a fence timeout: the first failover's FENCING step times out (the
    item FAILED, the hold cleared, the fenced run LOST); a second failover then plans "move: no
    application on A". The stale driver on A -- cut off from Drover, its last check confirmed
    just now -- may still be committing: the job must not start on B until that confirmation
    has surely run out, and must start there once it has.

    This test failed before fence answers became leases (the move went PENDING -> DRAINING ->
    CHECKPOINT -> ... -> DONE in one round, beside the driver); now the move waits in FENCING
    for the stale run's lease (recorded end + clock margin + exit grace), then goes on."""
    w = world
    create_jobs(w, {"dbl": "high"})
    stale = w.job("dbl")["current_run"]
    token = w.token(stale["id"])
    # its driver checks its fence (as drover_runtime does before every batch): current, with a
    # lease of DROVER_FENCE_LEASE_SECONDS (90 s by default)
    answer = w.client.get(
        "/v1/jobs/dbl/fence",
        headers={"X-Drover-Fencing-Token": token, "X-Drover-Fence-Lease": "1"},
    )
    assert answer.status_code == 200 and answer.json()["fencing_token"] == token
    assert 89 < answer.json()["lease_seconds"] <= 90
    lease_until = datetime.fromisoformat(w.runs("dbl")[0]["lease_until"])
    # then A is cut off both ways: Drover cannot reach A, A's driver cannot reach Drover
    w.a.unreachable = True
    w.reachable["A"] = False
    marked = w.client.post("/v1/clusters/A/mark-abnormal", json={"reason": "AZ a cut off"})
    assert marked.status_code == 200, marked.text

    claim = Claim(GROUP, Fence("n1", 1), 0, 1)
    impatient = executor(w, timing=replace(TIMING, fence_timeout=0.001))
    first = failover(w, selector={"jobs": ["dbl"]})
    assert [i["action"] for i in first["items"]] == ["fence"]
    ended = drive(w, impatient, claim, first["id"])
    assert ended["state"] == "FAILED", ended
    assert ended["items"][0]["step"] == "FAILED"
    assert "was not answered 'superseded'" in ended["items"][0]["last_error"]
    job = w.job("dbl")
    assert job["directive"] is None and job["current_run"]["state"] == "LOST"

    second = failover(w, selector={"jobs": ["dbl"]}, dry_run=True)
    assert [i["action"] for i in second["items"]] == ["move"], second
    op = failover(w, selector={"jobs": ["dbl"]}, expected_plan=second["plan_digest"])
    ex = executor(w)
    # ten seconds after the driver's last confirmed check: it may still be committing on A
    w.later = timedelta(seconds=10)
    for _ in range(8):
        ex.round({GROUP: claim})
        w.tick()
    status = w.client.get(f"/v1/failovers/{op['id']}").json()
    assert w.b.live("dbl") == [], (
        f"started on B beside its stale driver on A: {status['items'][0]['history']}"
    )
    assert status["items"][0]["step"] not in ("SWITCHING", "STARTING", "DONE"), status
    (item,) = status["items"]
    assert item["step"] == "FENCING" and item["source_run_id"] == stale["id"], item
    assert "may hold a fence lease until" in item["history"][-1]["note"], item["history"]
    assert "the stale driver of run" in item["waiting"] and "lease surely lapsed" in item["waiting"]
    # nor does its owner start it anywhere meanwhile (A is marked NORMAL again: no new run there)
    assert w.client.post("/v1/clusters/A/clear", json={"reason": "AZ a back"}).status_code == 200
    w.reachable["A"] = True
    w.a.unreachable = False
    w.tick()
    assert [a.app_name for a in w.a.live("dbl")] == [f"drover:dbl:{stale['id']}"]  # the stale one
    assert w.b.live("dbl") == []

    # once the lease surely lapsed (recorded end + 5 s clock margin; no exit grace here)
    w.later = lease_until - utcnow() + timedelta(seconds=5.5)
    done = drive(w, ex, claim, op["id"])
    assert done["state"] == "SUCCEEDED", [
        (h["step"], h["note"]) for h in done["items"][0]["history"]
    ][2:]
    steps = [h["step"] for h in done["items"][0]["history"]]
    assert steps[:4] == ["PENDING", "DRAINING", "FENCING", "CHECKPOINT"], steps
    assert "fence lease surely lapsed" in done["items"][0]["history"][3]["note"]
    assert len(w.b.live("dbl")) == 1 and w.job("dbl")["cluster"] == "B"


def test_fence_answers_grant_leases_recorded_once_per_half_lease(world: World) -> None:
    """A run asking for a lease gets one with every confirming answer; its end is written when
    less than half a lease of the recorded end remains, never answered beyond it; a closed run
    gets none (and is answered "not current"); a job whose last run may hold one is kept."""
    w = world
    create_jobs(w, {"leased": "high"})
    run_id = w.job("leased")["current_run"]["id"]
    token = w.token(run_id)
    headers = {"X-Drover-Fencing-Token": token}

    def check(lease: bool = True) -> dict[str, Any]:
        extra = {"X-Drover-Fence-Lease": "1"} if lease else {}
        answer = w.client.get("/v1/jobs/leased/fence", headers={**headers, **extra})
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def recorded() -> datetime | None:
        with w.store.session() as s:
            run = s.get(Run, run_id)
            assert run is not None
            return run.lease_until

    plain = check(lease=False)  # an older runtime: confirmed, no lease
    assert plain["current"] is True and plain["lease_seconds"] is None and recorded() is None
    first = check()
    assert first["current"] is True and 89.5 < first["lease_seconds"] <= 90
    end = recorded()
    assert end is not None and abs((end - utcnow()).total_seconds() - 90) < 1
    again = check()  # more than half remains: no write, what remains is granted
    assert recorded() == end and again["lease_seconds"] <= first["lease_seconds"]
    with w.store.transaction() as s:  # 50 s later, as far as the recorded end is concerned
        s.execute(
            update(Run).where(Run.id == run_id).values(lease_until=utcnow() + timedelta(seconds=40))
        )
    renewed = check()
    assert 89.5 < renewed["lease_seconds"] <= 90
    end = recorded()
    assert end is not None and abs((end - utcnow()).total_seconds() - 90) < 1
    assert w.runs("leased")[0]["lease_until"] is not None

    # the run is closed without its cluster's word (as a fence does): no lease any more
    with w.store.transaction() as s:
        s.execute(update(Job).where(Job.name == "leased").values(state=JobState.QUEUED.value))
        s.execute(
            update(Run)
            .where(Run.id == run_id)
            .values(
                state=RunState.LOST.value,
                ended_at=utcnow(),
                lease_until=utcnow() + timedelta(seconds=10),
            )
        )
    closed = check()
    assert closed["current"] is False and closed["fencing_token"] is None
    assert closed["lease_seconds"] is None
    stopped = w.client.post("/v1/jobs/leased/stop")
    assert stopped.status_code == 202, stopped.text
    for _ in range(3):
        w.tick()
    refused = w.client.delete("/v1/jobs/leased")
    assert refused.status_code == 409, refused.text
    assert "may hold a fence lease until" in refused.json()["detail"]
    with w.store.transaction() as s:
        s.execute(
            update(Run).where(Run.id == run_id).values(lease_until=utcnow() - timedelta(seconds=6))
        )
    assert w.client.delete("/v1/jobs/leased").status_code == 204


def test_automatic_failover_paused_held_in_a_cool_down_and_alerted(world: World) -> None:
    """Every decision of automatic failover is an event and an alert: held while paused
    (platform-wide switch), held while the target cools down after an abnormal period of its own
    (never back onto a cluster that just failed), created once an operator cleared it; the alerts
    end when the failover is created, and when it ended."""
    from scheduler.actors.alerts import AlertLoop

    w = world
    create_jobs(w, {"cool": "high"})
    token = w.token(w.job("cool")["current_run"]["id"])
    checked = w.client.get(  # its driver checks in, with a lease (90 s)
        "/v1/jobs/cool/fence",
        headers={"X-Drover-Fencing-Token": token, "X-Drover-Fence-Lease": "1"},
    )
    assert checked.json()["lease_seconds"] is not None
    put = w.client.put(
        f"/v1/groups/{GROUP}/auto-failover",
        json={"enabled": True, "after_seconds": 0, "min_priority": "high"},
    )
    assert put.status_code == 200, put.text
    policy = HealthPolicy(vote_freshness=30, threshold_count=100, threshold_window=60)

    def health(cluster: str, old: ClusterHealth, new: ClusterHealth) -> None:
        now = utcnow()
        votes = [Vote("n1", now, new == ClusterHealth.NORMAL, 0.1, "probe")]
        assessment = assess(old, votes, {"n1"}, now=now, policy=policy)
        with w.store.transaction() as s:
            health_store.record_decision(
                s, cluster, Decision(old, new, assessment), node_id="n1", now=now
            )

    # B failed by itself a moment ago and recovered (the monitors decided both)
    health("B", ClusterHealth.NORMAL, ClusterHealth.VOTE_ABNORMAL)
    health("B", ClusterHealth.VOTE_ABNORMAL, ClusterHealth.NORMAL)
    paused = w.client.post("/v1/auto-failover/pause", json={"reason": "INC-1 drill"})
    assert paused.status_code == 200 and paused.json()["paused"] is True, paused.text
    assert paused.json()["cooling_down"][0]["cluster"] == "B"

    claim = Claim(GROUP, Fence("n1", 1), 0, 1)
    ex = executor(w)
    w.a.unreachable, w.reachable["A"] = True, False
    health("A", ClusterHealth.NORMAL, ClusterHealth.VOTE_ABNORMAL)

    def decisions() -> list[tuple[str, str]]:
        events = w.client.get("/v1/auto-failover").json()["events"]
        return [
            (e["kind"], e["code"]) for e in reversed(events) if e["kind"] in ("held", "created")
        ]

    def firing(kind: str) -> list[dict[str, Any]]:
        page = w.client.get("/v1/alerts", params={"kind": kind, "status": "firing"}).json()
        return list(page["data"])

    for _ in range(3):
        ex.round({GROUP: claim})
    assert decisions() == [("held", "paused")]  # once, not once per round
    assert w.client.get("/v1/failovers").json()["data"] == []
    (held,) = firing("auto_failover_held")
    assert held["subject"] == "g:A" and "paused by" in held["summary"]

    assert w.client.post("/v1/auto-failover/resume", json={"reason": "over"}).status_code == 200
    for _ in range(2):
        ex.round({GROUP: claim})
    assert decisions() == [("held", "paused"), ("held", "target-cooling-down")]
    (held,) = firing("auto_failover_held")
    assert "its target B was abnormal itself until" in held["summary"]
    assert w.client.get("/v1/failovers").json()["data"] == []

    cleared = w.client.post("/v1/auto-failover/clusters/B/clear", json={"reason": "vouched"})
    assert cleared.status_code == 200 and cleared.json()["cooling_down"] == [], cleared.text
    w.later = timedelta(seconds=200)  # the failover's fence waits for the lease: time passes
    ex.round({GROUP: claim})
    assert decisions()[-1] == ("created", "created")
    (op,) = w.client.get("/v1/failovers").json()["data"]
    assert firing("auto_failover_held") == []
    (created,) = firing("auto_failover")
    assert created["details"]["operation_id"] == op["id"] and "1 fence" in created["summary"]
    audit = w.client.get("/v1/audit", params={"target_kind": "auto-failover"}).json()["data"]
    assert [a["action"] for a in audit] == ["failover.auto.resume", "failover.auto.pause"]

    # the failover ends: its alert resolves
    done = drive(w, ex, claim, op["id"])
    assert done["state"] == "SUCCEEDED", done
    AlertLoop(w.store, node_id="n1", interval=1.0).evaluate()
    assert firing("auto_failover") == []
