"""Checkpoint storage on the real HDFS of test clusters A and B (WebHDFS) and in buckets of an
S3-compatible server on loopback (moto's server mode): the five operations, replication between
two HDFS roots and between two buckets as between two directories, the mid-copy fault on HDFS,
and the rule that a cluster only ever writes under its own root."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.s3server import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from scheduler.core import faults
from scheduler.core.errors import InvalidInput
from scheduler.decisions import storage
from scheduler.decisions.checkpoints import last_complete_batch
from scheduler.loops.replication import MID_BATCH_FAULT, REPLICA, SOURCE, make_available, sync
from scheduler.storage.base import TEMP_SUFFIX, reading
from scheduler.storage.remote import HdfsStorage, S3Storage
from scheduler.storage.schemes import forget_instances, storage_for
from tests.support.checkpoints import Checkpoint, visible_cut
from tests.support.yarn import YarnCluster

pytestmark = pytest.mark.integration
#: on the shared YARN + HDFS clusters, which the YARN e2e module stops and kills in part: in the
#: serial part, after it (the rest of the suite runs beside the e2e modules)
ON_SHARED_HDFS = pytest.mark.serial

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Roots:
    a: str
    b: str


def _contents(location: str) -> dict[str, bytes]:
    store = storage_for(location)
    out = {}
    for rel in store.list(location):
        if rel.rsplit("/", 1)[-1].startswith("."):
            continue
        with reading(store, location, rel) as chunks:
            out[rel] = b"".join(chunks)
    return out


def _cut(location: str) -> dict[str, bytes]:
    """The files of the newest complete batch's checkpoint (what Spark would resume from)."""
    listing = _contents(location)
    batch = last_complete_batch(listing)
    assert batch is not None
    from scheduler.decisions.checkpoints import cut

    keep = cut(listing, batch)
    return {p: data for p, data in listing.items() if p in keep}


@pytest.fixture
def hdfs(
    yarn_a: YarnCluster, yarn_b: YarnCluster, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Roots]:
    addresses = ",".join(
        f"{c.hdfs_url.removeprefix('hdfs://')}={c.webhdfs_url}" for c in (yarn_a, yarn_b)
    )
    monkeypatch.setenv("DROVER_WEBHDFS_ADDRESSES", addresses)
    forget_instances()
    run = uuid.uuid4().hex[:8]
    roots = Roots(f"{yarn_a.hdfs_url}/drover-it/{run}/a", f"{yarn_b.hdfs_url}/drover-it/{run}/b")
    for root in (roots.a, roots.b):  # a cluster's root exists before anything is copied there
        store = storage_for(root)
        assert isinstance(store, HdfsStorage)
        store._fs.makedirs(store._path(root), exist_ok=True)
    yield roots
    for root in (roots.a, roots.b):
        store = storage_for(root)
        store._fs.rm(store._path(root), recursive=True)  # type: ignore[attr-defined]
    forget_instances()


@pytest.fixture
def buckets(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[Roots]:
    monkeypatch.setenv("DROVER_S3_ENDPOINT_URL", s3_server.endpoint_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    forget_instances()
    run = uuid.uuid4().hex[:8]
    for side in ("a", "b"):
        s3_server.create_bucket(f"drover-{side}-{run}")
    yield Roots(f"s3a://drover-a-{run}/checkpoints", f"s3a://drover-b-{run}/checkpoints")
    forget_instances()


@ON_SHARED_HDFS
def test_hdfs_storage_keeps_the_five_operations(hdfs: Roots) -> None:
    where = f"{hdfs.a}/job/checkpoint"
    store = storage_for(where)
    assert store.list(where) == {}  # nothing there yet
    assert store.write(where, "offsets/3", [b"v1\n", b"{}"]) == 5
    assert store.write(where, "offsets/3", [b'v1\n{"b":3}']) == 10  # replaced, atomically
    listing = store.list(where)
    assert set(listing) == {"offsets/3"} and listing["offsets/3"].size == 10
    assert store.exists(where, "offsets/3") and not store.exists(where, "offsets/4")
    with reading(store, where, "offsets/3") as chunks:
        assert b"".join(chunks) == b'v1\n{"b":3}'
    store.remove(where, "offsets/3")
    store.remove(where, "offsets/3")  # already gone: fine
    assert store.list(where) == {}
    assert store.reachable(hdfs.a) and not store.reachable(f"{hdfs.a}-missing")
    with pytest.raises(InvalidInput):
        store.write(where, "../escape", [b"x"])


@ON_SHARED_HDFS
def test_a_failed_hdfs_write_leaves_neither_the_file_nor_its_temporary(hdfs: Roots) -> None:
    def chunks():  # type: ignore[no-untyped-def]
        yield b"half"
        raise RuntimeError("the source went away mid-file")

    where = f"{hdfs.a}/job/checkpoint"
    with pytest.raises(RuntimeError):
        storage_for(where).write(where, "state/0/0/3.delta", chunks())
    assert storage_for(where).list(where) == {}


@ON_SHARED_HDFS
def test_replication_from_hdfs_to_hdfs(hdfs: Roots, tmp_path: Path) -> None:
    spark = Checkpoint(tmp_path / "job" / "checkpoint")
    spark.run(3)
    source, replica = f"{hdfs.a}/job/checkpoint", f"{hdfs.b}/job/checkpoint"
    assert sync(spark.url, source).batch == 2  # what Spark on A wrote
    first = sync(source, replica)
    assert first.complete and first.batch == 2
    assert _cut(replica) == visible_cut(spark.path)
    assert not [p for p in storage_for(replica).list(replica) if p.endswith(TEMP_SUFFIX)]
    # incrementally: only the new batches' files
    spark.run(2)
    sync(spark.url, source)
    second = sync(source, replica)
    assert second.batch == 4 and second.files == 2 * (1 + 2 + 1)
    assert sync(source, replica).files == 0
    # a failover makes it available under the target's root from the readable source
    moved = f"{hdfs.b}/job-moved/checkpoint"
    done = make_available("job", source=source, target=moved, target_root=hdfs.b)
    assert done.origin == SOURCE and done.batch == 4
    # ... or from the replica when the source is gone
    storage_for(source)._fs.rm(storage_for(source)._path(source), recursive=True)  # type: ignore[attr-defined]
    again = make_available(
        "job", source=source, target=f"{hdfs.b}/job-again/checkpoint", replica=replica
    )
    assert again.origin == REPLICA and again.batch == 4


@ON_SHARED_HDFS
def test_a_copy_killed_mid_batch_on_hdfs_is_still_an_earlier_complete_batch(
    hdfs: Roots, tmp_path: Path
) -> None:
    spark = Checkpoint(tmp_path / "job" / "checkpoint")
    spark.run(3)
    source, replica = f"{hdfs.a}/job/checkpoint", f"{hdfs.b}/job/checkpoint"
    sync(spark.url, source)
    sync(source, replica)
    before = _cut(replica)
    spark.run(2)
    sync(spark.url, source)
    once = tmp_path / "fired"
    code = f"from scheduler.loops.replication import sync; sync({source!r}, {replica!r})"
    env = {**os.environ, faults.ENV: f"{MID_BATCH_FAULT}:{once}", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, timeout=120)
    assert done.returncode == faults.EXIT_CODE and once.exists()
    listing = storage_for(replica).list(replica)
    assert any(p.startswith("state/0/") and p.endswith("/4.delta") for p in listing)
    assert "offsets/3" not in listing
    assert _cut(replica) == before
    assert sync(source, replica).batch == 4
    assert _cut(replica) == visible_cut(spark.path)


def test_replication_from_bucket_to_bucket(buckets: Roots, tmp_path: Path) -> None:
    spark = Checkpoint(tmp_path / "job" / "checkpoint")
    spark.run(3)
    source, replica = f"{buckets.a}/job/checkpoint", f"{buckets.b}/job/checkpoint"
    assert isinstance(storage_for(source), S3Storage)
    assert sync(spark.url, source).batch == 2
    assert sync(source, replica).batch == 2
    assert _cut(replica) == visible_cut(spark.path)
    spark.run(2)
    sync(spark.url, source)
    assert sync(source, replica).batch == 4
    assert sync(source, replica).files == 0
    done = make_available("job", source=source, target=f"{buckets.b}/job-moved/checkpoint")
    assert done.origin == SOURCE and done.batch == 4
    # a bucket that is gone is never created by a copy
    assert not storage_for(source).reachable("s3a://drover-no-such-bucket/x")


@dataclass(frozen=True)
class _C:
    name: str
    storage_root: str


def test_a_cluster_writes_only_under_its_own_root_and_reads_the_others(buckets: Roots) -> None:
    """One bucket per cluster: Drover hands a job a writable path under its own cluster's
    bucket only; the other cluster's bucket is readable (a failed-over job resumes from it)."""
    a, b = _C("a", buckets.a), _C("b", buckets.b)
    mine = storage.check_writable(f"{buckets.a}/job/checkpoint", a, [a, b])
    assert mine == f"{buckets.a}/job/checkpoint"
    with pytest.raises(InvalidInput):
        storage.check_writable(f"{buckets.b}/job/checkpoint", a, [a, b])
    assert storage.check_readable(f"{buckets.b}/job/checkpoint", [a, b])
    # a failover target's copy lands under the target's root, never elsewhere
    with pytest.raises(InvalidInput):
        make_available(
            "job",
            source=f"{buckets.a}/job/checkpoint",
            target=f"{buckets.a}/job2/checkpoint",
            target_root=buckets.b,
        )
