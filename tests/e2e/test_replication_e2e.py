"""Checkpoint replication on the real Spark standalone clusters A and B.

One Drover node (standalone membership) on a fresh MariaDB database; clusters A and B with
storage roots under the test's directory, group ``g`` (primary A, failover B). A high priority
stateful pipeline (``windowed_counts.py``, with Spark's default state store, then with RocksDB's:
a zip per version naming shared SST files) runs on A; the node's replication loop mirrors its
checkpoint into B's root, and the API shows the replica's batches and lag. Then:

1. a process copying the checkpoint into the replica is killed mid-batch (the fault point
   ``replica-mid-batch``: the copy exits at once, like a SIGKILL, after a state file of the next
   batch was written and before that batch's offsets and commit): the replica is still the
   earlier complete batch, its files the source's;
2. the job is stopped on A and A's storage directory is removed;
3. ``make_available`` (what a failover's CHECKPOINT step calls) finds no source and takes the
   replica (origin ``replica``, the killed copy's batch), the job's cluster is switched to B
   (what a failover's SWITCH step does) and it is started: it runs on B from the replica, and its
   output's batch ids continue from the replica's batch (the first batch B writes is the
   replica's batch + 1; no earlier batch is written again).

For each of the two state stores (Spark's default, RocksDB): two Spark applications, never at
once; about a minute each on a quiet machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scheduler.core import faults
from scheduler.decisions.checkpoints import Kind, classify, cut, last_complete_batch
from scheduler.loops.replication import MID_BATCH_FAULT, REPLICA, make_available
from scheduler.storage.local import LocalStorage
from scheduler.store.db import Store
from scheduler.store.models import Job
from tests.conftest import SparkStandalone, wait_until
from tests.e2e.test_standalone_e2e import ROOT, WINDOWED, Stack, _tear_down, batch_ids, written
from tests.support.nodes import NodeProcess, free_port
from tests.support.world import node_env, register_standalone

pytestmark = [pytest.mark.e2e, pytest.mark.heavy(minutes=2)]

START_TIMEOUT_S = 180.0
BATCH_TIMEOUT_S = 120.0
ARGS = ["--trigger-seconds", "2", "--rows-per-second", "20", "--shuffle-partitions", "1"]
#: the state store of the pipeline: Spark's default (deltas and snapshots per version), and
#: RocksDB (a zip per version naming the SST files it uses, shared between versions)
PROVIDERS = {
    "hdfs": {},
    "rocksdb": {
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
        ),
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "false",
    },
}


@pytest.fixture
def stack(
    tmp_path: Path,
    fresh_mysql_url: Callable[[], str],
    spark_standalone: SparkStandalone,
    spark_standalone_b: SparkStandalone,
) -> Iterator[Stack]:
    url = fresh_mysql_url()
    env = node_env(url, tmp_path, DROVER_REPLICATION_INTERVAL="1", DROVER_HEALTH_MONITOR="false")
    node = NodeProcess("e2e-replication", env, tmp_path / "node.log", port=free_port())
    clusters = {"spark-a": spark_standalone, "spark-b": spark_standalone_b}
    made = Stack(node, clusters, tmp_path, f"e2erepl{os.urandom(3).hex()}", url)
    node.start()
    try:
        node.wait_ready()
        for name, cluster in clusters.items():
            register_standalone(node, name, cluster, tmp_path / f"storage-{name}")
        node.post(
            "/v1/groups", {"name": "g", "primary_cluster": "spark-a", "failover_cluster": "spark-b"}
        )
        yield made
    finally:
        _tear_down(made)


def replication(stack: Stack, name: str) -> dict[str, Any]:
    view: dict[str, Any] = stack.node.get(f"/v1/jobs/{name}/replication")
    return view


def next_batch(path: str, batch: int) -> bool:
    """A file a copy of the batch after ``batch`` may write before that batch's offsets."""
    entry = classify(path)
    if entry.kind is Kind.SHARED:
        return True
    return (
        entry.kind not in (Kind.OFFSETS, Kind.COMMITS)
        and entry.batch is not None
        and entry.batch > batch
    )


def replication_rounds(stack: Stack) -> int:
    """Rounds the node's replication loop has finished (its status in ``GET /v1/nodes``)."""
    status = stack.node.get("/v1/nodes")["actors"]["replication"]
    assert status["alive"], status
    return int(status["rounds"])


def local(location: str) -> Path:
    assert location.startswith("file:///"), location
    return Path(location[len("file://") :])


def files(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in path.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_a_job_resumes_on_b_from_its_replica_when_a_storage_is_gone(
    stack: Stack, provider: str
) -> None:
    output = stack.tmp / "out"
    name = f"{stack.prefix}-{provider}"
    stack.node.post(
        "/v1/jobs",
        {
            "name": name,
            "group": "g",
            "priority": "high",
            "entrypoint": f"file://{WINDOWED}",
            "args": ["--output", str(output), *ARGS],
            "conf": PROVIDERS[provider],
            "team": "e2e",
        },
    )
    stack.jobs.append(name)
    stack.command(name, "start")
    job = stack.wait_job(name, lambda j: j["state"] == "RUNNING", "RUNNING on A", START_TIMEOUT_S)
    assert job["cluster"] == "spark-a"
    source = local(job["current_run"]["checkpoint_location"])
    assert source.is_relative_to(stack.tmp / "storage-spark-a")

    # -- the node's replication loop mirrors the checkpoint into B's root; the API shows it
    def replicated() -> dict[str, Any] | None:
        view = replication(stack, name)
        return view if (view["replica_batch"] or -1) >= 2 else None

    view = wait_until(replicated, timeout=BATCH_TIMEOUT_S, interval=0.5, what="replica batches")
    print("\nreplication as the API shows it:", json.dumps(view, indent=1))
    assert view["enabled"] and view["state"] in ("CURRENT", "LAGGING")
    assert (view["source_cluster"], view["target_cluster"]) == ("spark-a", "spark-b")
    replica = local(view["location"])
    assert replica == stack.tmp / "storage-spark-b" / name / "checkpoint"
    assert view["source_batch"] >= view["replica_batch"] >= 2
    assert view["lag_batches"] == view["source_batch"] - view["replica_batch"]
    assert view["lag_seconds"] >= 0 and view["observed_at"] and not view["stale"]
    assert view["files_copied"] > 0 and view["node"] == "e2e-replication"
    assert stack.job(name)["replication"]["replica_batch"] is not None

    # -- the replicator leaves this job alone from now on (the copies below are the test's)
    rounds = replication_rounds(stack)
    _patch(stack, name, {"replicate": False})

    def settled() -> int | None:  # two more rounds of the node's loop: none is still writing
        view = replication(stack, name)
        done = replication_rounds(stack) >= rounds + 2 and view["held_by"] is None
        return view["replica_batch"] if done else None

    kept = wait_until(settled, timeout=30, interval=0.5, what="the last round to end")
    copied = last_complete_batch(files(replica))
    assert copied is not None and copied >= kept
    state = sorted(p for p in files(replica) if p.startswith("state/"))
    print(f"{provider}: state files of the replica: {state}")
    if provider == "rocksdb":  # a zip per version, and the SST files the zips name
        assert any(p.endswith(".zip") for p in state) and any("/SSTs/" in p for p in state)
    else:
        assert any(p.endswith(".delta") for p in state)

    # -- a copy killed mid-batch: the replica stays at its complete batch
    def ahead() -> int | None:
        batch = last_complete_batch(LocalStorage().list(source.as_uri()))
        return batch if batch is not None and batch >= copied + 2 else None

    wait_until(ahead, timeout=BATCH_TIMEOUT_S, interval=0.5, what="two more batches on A")
    before = {p: b for p, b in files(replica).items() if p in cut(files(replica), copied)}
    once = stack.tmp / "fault-fired"
    code = (
        "from scheduler.loops.replication import sync; import sys; sync(sys.argv[1], sys.argv[2])"
    )
    env = {**os.environ, faults.ENV: f"{MID_BATCH_FAULT}:{once}", "PYTHONPATH": str(ROOT)}
    killed = subprocess.run(
        [sys.executable, "-c", code, source.as_uri(), replica.as_uri()],
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert killed.returncode == faults.EXIT_CODE and once.exists()
    after = files(replica)
    assert last_complete_batch(after) == copied, "the replica moved to a half-copied batch"
    assert {p: after.get(p) for p in before} == before, "a file of the kept batch changed"
    half = {p for p in after if p not in before}
    assert half, "the killed copy wrote nothing of the next batch"
    # what it wrote: state of the next batch (and RocksDB's new SST files, named by no zip the
    # replica's batches use), never an offsets or commit file
    assert all(next_batch(p, copied) for p in half), sorted(half)
    print(f"killed mid-batch: replica at batch {copied}, files of the next batch: {sorted(half)}")

    # -- stop on A, then A's storage is gone
    stack.command(name, "stop")
    stack.wait_job(name, lambda j: j["state"] == "STOPPED", "STOPPED", START_TIMEOUT_S)
    on_a = written(output)
    shutil.rmtree(stack.tmp / "storage-spark-a")

    # -- the failover's CHECKPOINT step: no source, so the replica
    store = Store(stack.database_url)
    try:
        started = time.monotonic()
        got = make_available(
            name,
            source=source.as_uri(),
            replica=replica.as_uri(),
            target=replica.as_uri(),
            target_root=(stack.tmp / "storage-spark-b").as_uri(),
            store=store,
            holder="failover:e2e",
        )
        print(f"make_available in {time.monotonic() - started:.2f} s: {got}")
        assert (got.origin, got.batch, got.location) == (REPLICA, copied, replica.as_uri())
        assert last_complete_batch(files(replica)) == copied
        left = [p for p in files(replica) if p not in before and next_batch(p, copied)]
        assert all(classify(p).kind is Kind.SHARED for p in left), f"half batch left: {left}"
        # the SWITCH step: the job's cluster is B from now on
        with store.transaction() as session:
            row = session.query(Job).filter_by(name=name).one()
            row.cluster_name = "spark-b"
    finally:
        store.dispose()
    assert replication(stack, name)["state"] == "PROMOTED"

    # -- it runs on B from the replica; its output's batch ids continue from the replica's batch
    stack.command(name, "start")
    job = stack.wait_job(
        name,
        lambda j: j["state"] == "RUNNING" and j["current_run"]["cluster"] == "spark-b",
        "RUNNING on B",
        START_TIMEOUT_S,
    )
    assert local(job["current_run"]["checkpoint_location"]) == replica

    def on_b() -> dict[int, frozenset[str]] | None:
        now = written(output)
        new = {b for b in now if now[b] != on_a.get(b)}
        return now if new and max(new) >= copied + 2 else None

    after_b = wait_until(on_b, timeout=BATCH_TIMEOUT_S, interval=0.5, what="batches from B")
    new = sorted(b for b in after_b if after_b[b] != on_a.get(b))
    print(f"A wrote batches {sorted(on_a)}; the replica held {copied}; B wrote {new}")
    assert min(new) == copied + 1, (sorted(on_a), copied, new)
    assert all(after_b[b] == on_a[b] for b in on_a if b <= copied)
    assert batch_ids(output) >= set(range(copied + 1, copied + 3))


def _patch(stack: Stack, name: str, body: dict[str, Any]) -> None:
    import httpx

    node = stack.node
    response = httpx.patch(
        f"{node.url}/v1/jobs/{name}", json=body, headers=node.headers(), timeout=10, trust_env=False
    )
    assert response.status_code == 200, response.text
