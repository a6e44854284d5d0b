"""The submission gate during a failover: a failover onto a capped simulated cluster
(``harness/simcluster.py``) never has more submissions in flight there than the cluster's
``max_concurrent_submissions`` -- in the simulator's own record of every driver (created,
application running) -- and the jobs the gate holds back meanwhile show QUEUED with a position
and the reason (SQLite: the caps are counted by one node here).

- 1,000 jobs: the failover's resubmission burst. Every job gets the executor's own switch write
  (``switch_cluster`` with a RUN directive of a real operation's item: what the executor writes
  once a job's run on the source is closed), at once, and one node submits them all on B. The
  executor's drain of 1,000 jobs (a directive and a confirmed kill per job) takes minutes on
  this shared machine, so the whole path runs in the second test, with fewer jobs;
- 120 jobs: the whole failover through the real executor (drain, kill, switch, start on B)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from api.app import create_app
from api.deps import NodeContext
from harness.simcluster import SimCluster
from scheduler.backends.registry import BackendRegistry
from scheduler.config import Settings
from scheduler.core.backend import ClusterBackend
from scheduler.core.clock import utcnow
from scheduler.core.directive import Directive, Phase
from scheduler.core.ownership import Claim, Fence
from scheduler.core.records import ClusterRecord
from scheduler.core.states import Priority
from scheduler.decisions.operations import failover as fo
from scheduler.decisions.operations.model import OperationKind
from scheduler.loops.operations import Executor
from scheduler.loops.reconciler import Reconciler
from scheduler.loops.replication import ReplicaCheckpoints
from scheduler.store import catalog as catalog_store
from scheduler.store import jobs as jobs_store
from scheduler.store import operations as ops_store
from scheduler.store.db import Store
from scheduler.store.models import Job
from scheduler.store.operations_ledger import SqlOperationsLedger
from tests.integration.test_submission_gate import (
    DEADLINE,
    add_sim_cluster,
    create_jobs,
    reconciler,
    sqlite_store,  # noqa: F401 - the fixture
    tick_until,
)
from tests.support.auth import admin_token, auth_headers
from tests.support.fakes import FakeBackend, add_unreachable_clusters

pytestmark = [pytest.mark.integration, pytest.mark.serial]


class MixedBackends:
    """Cluster A: in memory (the source: its jobs start at once); B: the simulated cluster."""

    def __init__(self, a: FakeBackend, registry: BackendRegistry) -> None:
        self.a = a
        self.registry = registry

    def for_cluster(self, cluster: ClusterRecord) -> ClusterBackend:
        return self.a if cluster.name == "A" else self.registry.for_cluster(cluster)


def make_clusters(store: Store, sim: SimCluster, root: Path, cap: int) -> None:
    with store.transaction() as s:
        add_unreachable_clusters(s, root.as_uri(), ["A"])
    add_sim_cluster(store, "B", sim, root, max_concurrent_submissions=cap)
    with store.transaction() as s:
        catalog_store.create_group(s, "g", primary_cluster="A", failover_cluster="B")


def create_fleet(store: Store, n_jobs: int) -> list[str]:
    """Three businesses, three priorities."""
    names = [f"job-{i:04d}" for i in range(n_jobs)]
    third = n_jobs // 3
    create_jobs(store, names[:third], "g", "pay", Priority.HIGH)
    create_jobs(store, names[third : 2 * third], "g", "ads")
    create_jobs(store, names[2 * third :], "g", "search", Priority.LOW)
    return names


@dataclass
class CappedFailover:
    """A failover's world: the simulated target cluster B, its jobs' names, the node that
    submits them and, once it is over, the simulator's record of every driver."""

    sim: SimCluster
    names: list[str]
    node: Reconciler | None = None
    drivers: list[dict[str, Any]] = field(default_factory=list)


@contextmanager
def capped_failover(
    store: Store, root: Path, cap: int, n_jobs: int, app_start_delay: float
) -> Iterator[CappedFailover]:
    """Cluster A, the simulated cluster B capped at ``cap`` submissions in flight, group g from
    A to B and ``create_fleet``'s ``n_jobs`` jobs; afterwards, whatever happened, the node is
    closed, the simulator's drivers are kept and the simulator is stopped."""
    world = CappedFailover(SimCluster(app_start_delay=app_start_delay).start(), [])
    try:
        make_clusters(store, world.sim, root, cap)
        world.names = create_fleet(store, n_jobs)
        yield world
    finally:
        if world.node is not None:
            world.node.close()
        world.drivers = world.sim.drivers()
        world.sim.stop()


def admin_client(context: NodeContext) -> TestClient:
    """A platform admin's client of the node API on ``context``."""
    return TestClient(
        create_app(context),
        base_url="http://127.0.0.1",
        headers=auth_headers(admin_token(context.store)),
    )


def peak_in_flight(drivers: list[dict[str, Any]]) -> int:
    """The most drivers of the simulator's record at once between their creation and their
    application running (or their end)."""
    now = time.monotonic()
    steps: list[tuple[float, int]] = []
    for d in drivers:
        end = d["running_at"] if d["running_at"] is not None else (d["ended_at"] or now)
        steps += [(d["created"], 1), (end, -1)]
    in_flight = peak = 0
    for _, step in sorted(steps):
        in_flight += step
        peak = max(peak, in_flight)
    return peak


def queued_jobs(client: TestClient) -> list[dict[str, Any]]:
    page = client.get("/v1/jobs", params={"state": "QUEUED", "limit": 5}).json()
    return [j for j in page["data"] if j.get("queue")]


def jobs_on(store: Store, cluster: str, state: str) -> int:
    with store.session() as s:
        rows = s.execute(select(Job.state, Job.cluster_name)).all()
    return sum(1 for st, c in rows if st == state and c == cluster)


def test_a_thousand_job_failovers_resubmissions_respect_the_target_clusters_cap(
    sqlite_store: Store,  # noqa: F811 - the fixture
    settings: Settings,
    tmp_path: Path,
) -> None:
    store = sqlite_store
    cap, n_jobs = 100, 1000
    # an application takes 1.5 s to run after its submission: at the ~70 submissions/s one node
    # makes on two shared cores, more than ``cap`` would be in flight without the cap (and at
    # half that pace still half of it), so the cap is what paces the burst however busy the
    # machine is
    with capped_failover(store, tmp_path, cap, n_jobs, app_start_delay=1.5) as world:
        names = world.names
        with store.transaction() as s:
            jobs = [jobs_store.get_job(s, name) for name in names]
            op = ops_store.create_operation(
                s,
                kind=OperationKind.FAILOVER,
                home_group="g",
                source_cluster="A",
                target_cluster="B",
                selector={"all": True},
                options={},
                reason="AZ a lost",
                created_by="test",
                plan_digest="00",
                items=[
                    ops_store.NewItem(j.id, j.name, "fence", "planned", "STARTING", "A", "B")
                    for j in jobs
                ],
            )
            now = utcnow()
            for job, item in zip(jobs, op.items, strict=True):
                directive = Directive(op.id, item.id, Phase.RUN, "A", "B")
                ops_store.switch_cluster(
                    s, job, "B", directive, reason="failover: switched to B", now=now, node_id="x"
                )
        node = world.node = reconciler(store, BackendRegistry(settings), "g", "n1")
        client = admin_client(NodeContext(settings, store))
        seen: list[dict[str, Any]] = []

        def done() -> bool:
            if not seen:
                seen.extend(queued_jobs(client))
            return jobs_on(store, "B", "RUNNING") == n_jobs

        started = time.monotonic()
        tick_until([node], done, "1,000 jobs RUNNING on B", deadline=120.0)
        print(f"\n1,000 resubmissions on B in {time.monotonic() - started:.1f} s")
    drivers = world.drivers
    assert len(drivers) == n_jobs  # one submission per job
    peak = peak_in_flight(drivers)
    print(f"peak submissions in flight on B: {peak} (cap {cap})")
    assert cap // 2 <= peak <= cap  # the cap held, and it was what paced the burst
    assert seen, "no job was seen waiting at the gate"
    queue = seen[0]["queue"]
    assert queue["position"] >= 1 and queue["kind"] == "cluster"
    assert f"max_concurrent_submissions {cap}" in queue["reason"]
    # priority within each business: the high ones (pay) were not behind the low ones (search)
    first = {d["tag"].split(":")[1]: d["created"] for d in drivers}
    pay = sorted(first[n] for n in names[: n_jobs // 3])
    search = sorted(first[n] for n in names[2 * (n_jobs // 3) :])
    assert pay[len(pay) // 2] <= search[-1]


def test_a_failover_through_the_executor_respects_the_target_clusters_cap(
    sqlite_store: Store,  # noqa: F811 - the fixture
    settings: Settings,
    tmp_path: Path,
) -> None:
    store = sqlite_store
    cap, n_jobs = 10, 120
    with capped_failover(store, tmp_path, cap, n_jobs, app_start_delay=0.1) as world:
        a = FakeBackend(start_running=True)
        backends = MixedBackends(a, BackendRegistry(settings))
        node = world.node = reconciler(store, backends, "g", "n1")
        tick_until([node], lambda: jobs_on(store, "A", "RUNNING") == n_jobs, "jobs on A")

        client = admin_client(NodeContext(settings, store, reachable=lambda _cluster: True))
        started = client.post(
            "/v1/failovers",
            json={"source": "A", "target": "B", "selector": {"all": True}, "parallelism": 1000},
        )
        assert started.status_code in (200, 201), started.text
        operation = started.json()["id"]
        assert len(started.json()["items"]) == n_jobs
        executor = Executor(
            SqlOperationsLedger(store, node_id="n1"),
            checkpoints=ReplicaCheckpoints(store),
            node_id="n1",
            timing=fo.Timing(
                fence_exit_grace=0, drain_timeout=60, start_timeout=120, retry_after=0
            ),
            parallelism=1000,
        )
        claim = Claim("g", Fence("n1", 1), 0, 1)
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + DEADLINE
        while True:
            executor.round({"g": claim})
            node.tick()
            state = client.get(f"/v1/failovers/{operation}").json()["state"]
            if state in ("SUCCEEDED", "FAILED", "CANCELLED"):
                break
            if not seen:
                seen = queued_jobs(client)
            assert time.monotonic() < deadline, f"the failover did not end: {state}"
        assert state == "SUCCEEDED", client.get(f"/v1/failovers/{operation}").json()["counts"]
    drivers = world.drivers
    assert len(drivers) == n_jobs  # one submission per job on B
    peak = peak_in_flight(drivers)
    print(f"\npeak submissions in flight on B: {peak} (cap {cap})")
    assert cap // 2 <= peak <= cap
    assert seen and "max_concurrent_submissions 10" in seen[0]["queue"]["reason"]
