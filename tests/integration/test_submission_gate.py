"""The submission gate on the real store, with the real reconciler
and the simulated standalone cluster (``harness/simcluster.py``), whose record of every driver
(created, application running) is the measure.

- a burst of 200 starts from one business goes at the business's rate (the submissions
  recorded per window, within 10 %), while another business's 20 starts go in the first
  round-robin turns; nodes taking from one bucket at once on MariaDB never get more than it
  allows;
- a dedicated group's jobs are owned by that group's nodes only, never by a shared node;
- a 1,000-job failover onto a capped simulated cluster never has more submissions in flight
  there than the cap (in the simulator's record), and the jobs held back show QUEUED with a
  position and a reason.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from harness.simcluster import SimCluster
from scheduler.backends.registry import BackendRegistry
from scheduler.config import Settings
from scheduler.core.backend import app_name_for
from scheduler.core.ownership import Claim, Fence
from scheduler.core.records import JobSpec
from scheduler.core.states import DesiredState, Priority
from scheduler.decisions import catalog
from scheduler.decisions.planning import RestartPolicy
from scheduler.decisions.quotas import QuotaSpec
from scheduler.loops.gate import SubmissionGate
from scheduler.loops.reconciler import Reconciler
from scheduler.store import catalog as catalog_store
from scheduler.store import jobs as jobs_store
from scheduler.store import quotas as quotas_store
from scheduler.store.bootstrap import ensure_defaults
from scheduler.store.db import Store
from scheduler.store.ledger import SqlLedger
from scheduler.store.models import Job, Run
from scheduler.store.quotas import SqlGateStore
from tests.support.schema import install_head_schema, sqlite_head_store

pytestmark = [pytest.mark.integration, pytest.mark.serial]

PIPELINE = "/opt/pipelines/p.py"
DEADLINE = 45.0  # seconds any one phase of a test may take before it fails


def reconciler(
    store: Store,
    backends: Any,
    group: str,
    node: str,
    index: int = 0,
    size: int = 1,
    gate_store: SqlGateStore | None = None,
) -> Reconciler:
    return Reconciler(
        SqlLedger(store, node_id=node, app_name_for=app_name_for),
        backends,
        node_id=node,
        group=group,
        claim=lambda: Claim(group, Fence(node, 1), index, size),
        policy=RestartPolicy(),
        gate=SubmissionGate(gate_store or SqlGateStore(store, node)),
    )


def add_sim_cluster(store: Store, name: str, sim: SimCluster, root: Path, **caps: int) -> None:
    with store.transaction() as s:
        catalog_store.create_cluster(
            s,
            name,
            catalog.ClusterSpec(
                kind="standalone",
                storage_root=(root / name).as_uri(),
                master_url=sim.master_url,
                rest_url=sim.rest_url,
                ui_url=sim.ui_url,
                **caps,
            ),
        )


def create_jobs(
    store: Store, names: list[str], group: str, business: str, priority: Priority = Priority.NORMAL
) -> None:
    with store.transaction() as s:
        for name in names:
            jobs_store.create_job(
                s,
                JobSpec(
                    name=name,
                    entrypoint=PIPELINE,
                    group=group,
                    business=business,
                    priority=priority,
                    desired_state=DesiredState.RUNNING,
                ),
                cause="test",
                node_id="test",
            )


def tick_until(
    reconcilers: list[Reconciler],
    done: Callable[[], bool],
    what: str,
    deadline: float = DEADLINE,
) -> None:
    """Tick every reconciler in its own thread (as nodes do) until ``done()`` (a test failure
    after ``deadline`` seconds)."""
    stop = threading.Event()
    errors: list[BaseException] = []

    def loop(r: Reconciler) -> None:
        try:
            while not stop.is_set():
                r.tick()
                stop.wait(0.02)  # the pace of a busy node's ticks
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=loop, args=(r,), daemon=True) for r in reconcilers]
    for t in threads:
        t.start()
    give_up = time.monotonic() + deadline
    try:
        while not done():
            assert not errors, errors
            assert time.monotonic() < give_up, f"{what} did not happen in {deadline} s"
            stop.wait(0.1)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    assert not errors, errors


SIM_START_DELAY = 0.05  # seconds a simulated application takes to start


@pytest.fixture
def sqlite_store(settings: Settings, tmp_path: Path) -> Iterator[Store]:
    store = sqlite_head_store(tmp_path / "drover.db", settings)
    yield store
    store.dispose()


@pytest.fixture
def mysql_store(fresh_mysql_url: Callable[[], str], settings: Settings) -> Iterator[Store]:
    """The real MariaDB: the bucket is shared by nodes ticking at once (row locks, conditional
    writes), where SQLite would serialize everything."""
    store = Store(fresh_mysql_url())
    install_head_schema(store)
    ensure_defaults(store, settings)
    yield store
    store.dispose()


def test_a_burst_goes_at_its_rate_and_does_not_delay_another_business(
    sqlite_store: Store, settings: Settings, sim: SimCluster, tmp_path: Path
) -> None:
    """One node's gate admits the burst's submissions at the business's rate, counted in
    windows between two of the gate's takes (a tick records all its submissions before the
    next tick takes again), against the time the tokens of the window accrued. ``burst``
    holds 5 s of tokens: a tick slower than burst / rate on this busy machine would lose some,
    as a node whose bucket is smaller than its tick interval does. Sharing one bucket between
    nodes is the next test's (MariaDB)."""
    store = sqlite_store
    rate, burst, window = 15.0, 75, 1.0
    add_sim_cluster(store, "sim", sim, tmp_path)
    with store.transaction() as s:
        catalog_store.create_group(s, "g", primary_cluster="sim")
        quotas_store.put_quota(s, "acme", QuotaSpec(rate=rate, burst=burst), by="test")
        quotas_store.put_quota(s, "zeta", QuotaSpec(rate=5.0, burst=20), by="test")
    acme = [f"acme-{i:03d}" for i in range(200)]
    zeta = [f"zeta-{i:02d}" for i in range(20)]
    create_jobs(store, acme, "g", "acme")
    create_jobs(store, zeta, "g", "zeta")  # queued after the whole burst
    gate_store = RecordingGateStore(store, "n1")
    node = reconciler(store, BackendRegistry(settings), "g", "n1", gate_store=gate_store)
    try:
        tick_until([node], lambda: sim.stats()["creates"] >= 220, "220 submissions")
    finally:
        node.close()

    tags = [d["tag"] for d in sim.drivers()]
    assert len(tags) == len(set(tags)) == 220  # each job submitted once
    with store.session() as s:
        rows = s.execute(select(Job.business, Run.created_at).join(Run, Run.job_id == Job.id))
        submitted: dict[str, list[float]] = {"acme": [], "zeta": []}
        for business, at in rows:
            submitted[business].append(at.timestamp())
    acme_at, zeta_at = sorted(submitted["acme"]), sorted(submitted["zeta"])
    assert len(acme_at) == 200 and len(zeta_at) == 20

    # the gate's takes of acme's tokens, at the time each tick's gate decided (`now`)
    at = [t for t, granted in gate_store.takes if granted.get("acme")]
    assert sum(g.get("acme", 0) for _, g in gate_store.takes) == 200
    # windows of at least `window` seconds between two takes: the submissions recorded in a
    # window are those of its takes but the last one, paid with the tokens that accrued from
    # the take before the window to the last take in it. The first take is the burst; the
    # last one takes what is left of the queue.
    assert sum(1 for t in acme_at if t <= at[1]) == sum(
        g.get("acme", 0) for t, g in gate_store.takes if t < at[1]
    )
    counts = []
    i = 1
    for j in range(2, len(at) - 1):
        if at[j] - at[i] >= window:
            count = sum(1 for t in acme_at if at[i] < t <= at[j])
            counts.append((count, at[j - 1] - at[i - 1], at[j] - at[i]))
            i = j
    print(f"\nacme: {burst} in the first tick, then per window of submissions:")
    for count, paid, span in counts:
        print(f"  {count} in {span:.2f} s, for {paid:.2f} s of tokens: {count / paid:.1f}/s")
    assert len(counts) >= 2, counts  # a busy machine ticks slowly: at least two windows
    for count, paid, _ in counts:
        assert abs(count - rate * paid) <= 0.1 * rate * paid, counts
    overall = (200 - burst) / (at[-1] - at[0])  # from the burst to the last take
    assert overall <= rate * 1.1, overall
    # the other business went in the first round-robin turns: in the burst's tick
    assert len(zeta_at) == 20 and zeta_at[-1] < at[1], (zeta_at[-1], at[1])


def test_nodes_taking_at_once_share_one_bucket(mysql_store: Store) -> None:
    """Six nodes take from one business's bucket at once on MariaDB (conditional writes on the
    bucket's version): together they never get more than the bucket allows, and the bucket
    is not starved by the contention either."""
    store = mysql_store
    rate, burst = 50.0, 50
    with store.transaction() as s:
        quotas_store.put_quota(s, "acme", QuotaSpec(rate=rate, burst=burst), by="test")
    gates = [SqlGateStore(store, f"n{i}") for i in range(6)]
    got: list[tuple[float, int]] = []
    lock = threading.Lock()
    stop = threading.Event()
    started = time.time()

    def node(g: SqlGateStore) -> None:
        while not stop.is_set():
            now = datetime.now(UTC)
            n = g.take({"acme": 3}, now)["acme"]
            with lock:
                got.append((now.timestamp(), n))
            stop.wait(0.01)

    threads = [threading.Thread(target=node, args=(g,), daemon=True) for g in gates]
    for t in threads:
        t.start()
    stop.wait(3.0)
    stop.set()
    for t in threads:
        t.join(timeout=30)
    elapsed = max(t for t, _ in got) - started
    total = sum(n for _, n in got)
    print(
        f"\n6 nodes took {total} tokens in {elapsed:.2f} s (allowed {burst + rate * elapsed:.0f})"
    )
    assert total <= burst + rate * elapsed + 1
    assert total >= 0.8 * (burst + rate * elapsed)


class RecordingGateStore(SqlGateStore):
    """The real gate store; keeps when each take happened and what it got."""

    def __init__(self, store: Store, node_id: str) -> None:
        super().__init__(store, node_id)
        self.takes: list[tuple[float, dict[str, int]]] = []

    def take(self, wanted: Mapping[str, int], now: datetime) -> dict[str, int]:
        granted = super().take(wanted, now)
        self.takes.append((now.timestamp(), dict(granted)))
        return granted


def test_a_dedicated_groups_jobs_are_never_owned_by_shared_nodes(
    store: Store, settings: Settings, sim: SimCluster, tmp_path: Path
) -> None:
    add_sim_cluster(store, "sim", sim, tmp_path)
    with store.transaction() as s:
        catalog_store.create_group(s, "crit", primary_cluster="sim")
        catalog_store.create_group(s, "shared", primary_cluster="sim")
        quotas_store.put_quota(s, "bank", QuotaSpec(dedicated_group="crit"), by="test")
    bank = [f"bank-{i:02d}" for i in range(30)]
    others = [f"shop-{i:02d}" for i in range(30)]
    create_jobs(store, bank, "crit", "bank", Priority.HIGH)
    create_jobs(store, others, "shared", "shop")
    # a bank job in the shared group (as a job made before the binding, or written around the
    # API) is still not the shared nodes' to claim
    create_jobs(store, ["bank-stray"], "shared", "shop")
    with store.transaction() as s:
        s.execute(update(Job).where(Job.name == "bank-stray").values(business="bank"))
    # the API-side rules: the business's jobs go to its group, the group takes no other's
    with store.transaction() as s, pytest.raises(Exception, match="dedicated group 'crit'"):
        create_jobs_in(s, "bank-x", "shared", "bank")
    with store.transaction() as s, pytest.raises(Exception, match="dedicated to other"):
        create_jobs_in(s, "shop-x", "crit", "shop")

    backends = BackendRegistry(settings)
    crit_nodes = [reconciler(store, backends, "crit", f"crit-{i}", i, 2) for i in range(2)]
    shared_nodes = [reconciler(store, backends, "shared", f"shared-{i}", i, 3) for i in range(3)]
    everyone = crit_nodes + shared_nodes

    def owners() -> dict[str, str | None]:
        with store.session() as s:
            return dict(s.execute(select(Job.name, Job.owner)).tuples().all())

    def claimed_and_submitted() -> bool:
        # a claim is recorded before its job's submission, which the pool sends: both
        claimed = all(o is not None for n, o in owners().items() if n != "bank-stray")
        return claimed and len(sim.drivers()) >= len(bank) + len(others)

    try:
        tick_until(everyone, claimed_and_submitted, "every job claimed and submitted")
    finally:
        for n in everyone:
            n.close()
    seen = owners()
    crit_ids = {f"crit-{i}" for i in range(2)}
    assert {seen[n] for n in bank} <= crit_ids and len({seen[n] for n in bank}) == 2
    assert {seen[n] for n in others} <= {f"shared-{i}" for i in range(3)}
    assert seen["bank-stray"] is None  # in the shared group's rows, yet no shared node took it
    submitted = [d["tag"] for d in sim.drivers()]
    assert len(submitted) == len(bank) + len(others)  # each claimed job started once
    assert not any(":bank-stray:" in tag for tag in submitted)


def create_jobs_in(session: Any, name: str, group: str, business: str) -> None:
    jobs_store.create_job(
        session,
        JobSpec(name=name, entrypoint=PIPELINE, group=group, business=business),
        cause="test",
        node_id="test",
    )
