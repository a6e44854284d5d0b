"""The replicator's rounds and make_available against a real store (SQLite and MariaDB), on
checkpoint directories written like Spark's (no Spark): which jobs are replicated, the figures
recorded, the lease between a replicator round and a failover, and the replica moving to the
other cluster after a failover."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from scheduler.core.clock import utcnow
from scheduler.core.errors import StaleWrite
from scheduler.core.ownership import Claim, Fence, owner_index
from scheduler.core.records import JobSpec
from scheduler.core.states import Priority
from scheduler.decisions import storage
from scheduler.decisions.catalog import ClusterSpec
from scheduler.decisions.replication import ReplicaState, ReplicaTarget
from scheduler.loops.replication import (
    REPLICA,
    SOURCE,
    Availability,
    Replicator,
    make_available,
    release,
)
from scheduler.store import catalog as catalog_store
from scheduler.store import jobs as jobs_store
from scheduler.store import journal
from scheduler.store import replicas as replicas_store
from scheduler.store.db import Store
from scheduler.store.models import Job
from tests.support.checkpoints import Checkpoint, visible_cut

pytestmark = pytest.mark.integration

GROUP = "g"
CLAIM = Claim(GROUP, Fence("test-node", 1), index=0, size=1)


@pytest.fixture
def roots(store: Store, tmp_path: Path) -> dict[str, Path]:
    paths = {"a": tmp_path / "ck-a", "b": tmp_path / "ck-b"}
    for path in paths.values():
        path.mkdir()
    with store.transaction() as session:
        for name, path in paths.items():
            catalog_store.create_cluster(
                session, name, ClusterSpec(kind="local", storage_root=str(path))
            )
        catalog_store.create_group(session, GROUP, primary_cluster="a", failover_cluster="b")
    return paths


@pytest.fixture
def replicator(store: Store) -> Iterator[Replicator]:
    """Node ``test-node``'s replicator on ``store`` (the tests call its rounds)."""
    replicator = Replicator(store, node_id="test-node", round_seconds=30)
    yield replicator
    replicator.close()


def create(store: Store, name: str, **kw: object) -> None:
    with store.transaction() as session:
        jobs_store.create_job(
            session,
            JobSpec(name=name, entrypoint="/opt/pipelines/p.py", group=GROUP, **kw),  # type: ignore[arg-type]
            cause="test",
            node_id="test-node",
        )


def running(store: Store, name: str, cluster: str = "a") -> None:
    """The job's run is live on ``cluster`` (what the reconciler would record)."""
    with store.transaction() as session:
        job = session.query(Job).filter_by(name=name).one()
        job.state, job.cluster_name, job.updated_at = "RUNNING", cluster, utcnow()


def running_orders(store: Store, roots: dict[str, Path]) -> Checkpoint:
    """High-priority job ``orders`` running on cluster a, three batches in its checkpoint."""
    create(store, "orders", priority=Priority.HIGH)
    running(store, "orders")
    orders = Checkpoint(roots["a"] / "orders" / "checkpoint")
    orders.run(3)
    return orders


def make_available_on(
    target: str, orders: Checkpoint, store: Store, holder: str, **kw: Any
) -> Availability:
    """``orders``'s checkpoint made available at ``target`` (its replica's place) for ``holder``."""
    return make_available(
        "orders", source=orders.url, replica=target, target=target, store=store, holder=holder, **kw
    )


def replica(store: Store, name: str):  # type: ignore[no-untyped-def]
    with store.session() as session:
        return replicas_store.replica_of(session, name)


def test_a_round_mirrors_the_high_priority_jobs_into_the_failover_root(
    store: Store, roots: dict[str, Path], replicator: Replicator
) -> None:
    create(store, "orders", priority=Priority.HIGH)
    create(store, "clicks")  # normal priority: not replicated unless asked
    create(store, "audit", replicate=True)
    create(store, "vip", priority=Priority.HIGH, replicate=False)
    running(store, "orders")
    orders = Checkpoint(roots["a"] / "orders" / "checkpoint")
    orders.run(3)
    stats = replicator.round([CLAIM])
    assert stats.jobs == 2 and stats.errors == 0, stats
    record = replica(store, "orders")
    assert record is not None and record.state is ReplicaState.CURRENT
    assert (record.source_cluster, record.target_cluster) == ("a", "b")
    assert record.location == storage.normalise_location(str(roots["b"] / "orders" / "checkpoint"))
    assert (record.source_batch, record.replica_batch, record.lag_batches) == (2, 2, 0)
    assert record.files_copied > 0 and record.lease_holder is None
    assert visible_cut(roots["b"] / "orders" / "checkpoint") == visible_cut(orders.path)
    # audit has no checkpoint yet: a record, nothing to copy
    pending = replica(store, "audit")
    assert pending is not None and pending.state is ReplicaState.PENDING
    assert replica(store, "clicks") is None and replica(store, "vip") is None

    orders.run(2)
    replicator.round([CLAIM])
    record = replica(store, "orders")
    assert record is not None and (record.source_batch, record.replica_batch) == (4, 4)
    assert record.last_copy_files == 2 * 4
    # with two nodes in the pool, each replicates the replicated jobs it owns
    owned = {
        index: {
            w.job.name for w in replicator.work([Claim(GROUP, Fence("n", 1), index=index, size=2)])
        }
        for index in (0, 1)
    }
    assert owned[owner_index("orders", 2)] >= {"orders"}
    assert owned[owner_index("audit", 2)] >= {"audit"}
    assert not owned[0] & owned[1]


def test_a_failover_holds_the_replica_and_the_job_moves_it_to_the_other_cluster(
    store: Store, roots: dict[str, Path], replicator: Replicator
) -> None:
    orders = running_orders(store, roots)
    target = storage.normalise_location(str(roots["b"] / "orders" / "checkpoint"))
    replicator.round([CLAIM])
    orders.run(1)
    done = make_available_on(target, orders, store, "failover:1")
    assert (done.origin, done.batch) == (SOURCE, 3)
    record = replica(store, "orders")
    assert record is not None and record.state is ReplicaState.PROMOTED
    assert record.lease_holder == "failover:1" and record.replica_batch == 3
    # the replicator keeps away from a promoted replica while the failover holds it
    orders.run(1)
    stats = replicator.round([CLAIM])
    assert stats.skipped == 1, stats
    assert replica(store, "orders").state is ReplicaState.PROMOTED  # type: ignore[union-attr]
    # the same failover again (another node resuming it): nothing left to do
    again = make_available_on(target, orders, store, "failover:1")
    assert again.batch == 4 and again.files_copied == 4
    # a second failover does not get it while the first holds it
    with pytest.raises(StaleWrite):
        make_available_on(target, orders, store, "failover:2", wait_seconds=0)
    # the job now runs on b: its replica goes to a's root, the checkpoint on b is left alone
    running(store, "orders", cluster="b")
    on_b = Checkpoint(roots["b"] / "orders" / "checkpoint")
    on_b.batch = 4
    on_b.run(2)
    replicator.round([CLAIM])
    record = replica(store, "orders")
    assert record is not None and record.state is ReplicaState.CURRENT, record
    assert (record.source_cluster, record.target_cluster) == ("b", "a")
    assert record.replica_batch == 6
    assert visible_cut(roots["a"] / "orders" / "checkpoint") == visible_cut(on_b.path)
    assert release(store, "orders", holder="failover:1") is False  # nothing held any more


def test_the_replicator_never_wipes_a_replica_whose_source_is_gone(
    store: Store, roots: dict[str, Path], replicator: Replicator
) -> None:
    import shutil

    orders = running_orders(store, roots)
    replicator.round([CLAIM])
    kept = visible_cut(roots["b"] / "orders" / "checkpoint")
    shutil.rmtree(roots["a"])  # cluster a's storage is gone
    replicator.round([CLAIM])
    record = replica(store, "orders")
    assert record is not None and record.state is ReplicaState.ERROR
    assert "storage root of cluster a" in record.error and "cannot be reached" in record.error
    assert record.replica_batch == 2
    # the root back but the checkpoint gone: the replica is kept all the same
    roots["a"].mkdir()
    replicator.round([CLAIM])
    record = replica(store, "orders")
    assert record is not None and record.state is ReplicaState.ERROR
    assert "holds no complete batch" in record.error and record.replica_batch == 2
    assert visible_cut(roots["b"] / "orders" / "checkpoint") == kept
    with store.session() as session:
        events, _ = journal.list_events(session, "orders")
    replication_events = [e.message for e in events if e.cause == "replication"]
    assert len(replication_events) == 1, replication_events  # one event when it began
    assert "is not kept any more: the storage root of cluster a" in replication_events[0]
    done = make_available(
        "orders",
        source=orders.url,
        replica=record.location,
        target=record.location,
        target_root=str(roots["b"]),
        store=store,
        holder="failover:7",
    )
    assert (done.origin, done.batch) == (REPLICA, 2)
    with store.session() as session:
        events, _ = journal.list_events(session, "orders")
    message = events[0].message  # newest first
    assert "made available for failover:7" in message and "(replica)" in message
    assert "resumes after batch 2" in message


def test_lease_rules(store: Store, roots: dict[str, Path]) -> None:
    create(store, "orders", priority=Priority.HIGH)
    with store.session() as session:
        job = jobs_store.get_job(session, "orders")
    where = ReplicaTarget("a", "file:///x/a/orders", "b", "file:///x/b/orders")
    now = utcnow()
    with store.transaction() as session:
        assert replicas_store.acquire(
            session, job, where, holder="n1", until=now + timedelta(seconds=60)
        )
    with store.transaction() as session:
        assert not replicas_store.acquire(
            session, job, where, holder="n2", until=now + timedelta(seconds=60)
        )
        assert replicas_store.acquire(
            session, job, where, holder="n1", until=now + timedelta(seconds=60)
        )
    # expired: anyone may take it
    later = now + timedelta(seconds=61)
    with store.transaction() as session:
        assert replicas_store.acquire(
            session, job, where, holder="n2", until=later + timedelta(seconds=60), now=later
        )
    with store.transaction() as session:
        assert replicas_store.release(session, "orders", holder="n2")
        assert not replicas_store.release(session, "orders", holder="n2")


def test_a_job_at_rest_is_looked_at_once_more_then_left_alone(
    store: Store, roots: dict[str, Path], replicator: Replicator
) -> None:
    orders = running_orders(store, roots)
    replicator.round([CLAIM])
    orders.run(1)  # its last batch, then it stops
    with store.transaction() as session:
        job = session.query(Job).filter_by(name="orders").one()
        job.state, job.updated_at = "STOPPED", utcnow()
    assert [w.job.name for w in replicator.work([CLAIM])] == ["orders"]
    replicator.round([CLAIM])
    record = replica(store, "orders")
    assert record is not None and record.replica_batch == 3
    assert replicator.work([CLAIM]) == []
