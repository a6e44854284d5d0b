"""Replication on local directories, without Spark or a store: the storage interface, sync, the
fault point (a copy killed mid-batch), and make_available's three origins."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.core import faults
from scheduler.core.errors import InvalidInput, StorageUnavailable
from scheduler.decisions.checkpoints import last_complete_batch
from scheduler.loops.replication import (
    FRESH_START,
    MID_BATCH_FAULT,
    REPLICA,
    SOURCE,
    make_available,
    sync,
)
from scheduler.storage.local import TEMP_SUFFIX, LocalStorage
from scheduler.storage.remote import HdfsStorage, S3Storage
from scheduler.storage.schemes import forget_instances, storage_for
from tests.support.checkpoints import Checkpoint, files, visible_cut

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def source(tmp_path: Path) -> Checkpoint:
    return Checkpoint(tmp_path / "a" / "job" / "checkpoint")


# --------------------------------------------------------------------------- storage


def test_local_storage_lists_writes_atomically_and_removes(tmp_path: Path) -> None:
    store = LocalStorage()
    where = f"file://{tmp_path}/ck"
    assert store.list(where) == {}  # no checkpoint there yet
    (tmp_path / "ck" / "offsets").mkdir(parents=True)
    (tmp_path / "ck" / "offsets" / ".3.crc").write_bytes(b"old checksum")
    written = store.write(where, "offsets/3", [b"v1\n", b"{}"], mtime_ns=1_234_000_000_000)
    assert written == 5
    assert (tmp_path / "ck" / "offsets" / "3").read_bytes() == b"v1\n{}"
    # the checksum of older content would make Hadoop refuse the new file: gone
    assert not (tmp_path / "ck" / "offsets" / ".3.crc").exists()
    listing = store.list(where)
    assert listing["offsets/3"].size == 5 and listing["offsets/3"].mtime_ns == 1_234_000_000_000
    assert store.exists(where, "offsets/3") and not store.exists(where, "offsets/4")
    store.remove(where, "offsets/3")
    store.remove(where, "offsets/3")  # already gone: fine
    assert store.list(where) == {}
    with pytest.raises(InvalidInput):
        store.write(where, "../escape", [b"x"])


def test_a_failed_write_leaves_neither_the_file_nor_its_temporary(tmp_path: Path) -> None:
    def chunks():  # type: ignore[no-untyped-def]
        yield b"half"
        raise RuntimeError("the source went away mid-file")

    with pytest.raises(RuntimeError):
        LocalStorage().write(f"file://{tmp_path}", "state/0/0/3.delta", chunks())
    assert [p.name for p in (tmp_path / "state" / "0" / "0").iterdir()] == []


def test_storage_is_chosen_by_the_locations_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DROVER_WEBHDFS_ADDRESSES", "nn-a:8020=http://nn-a:50070")
    forget_instances()
    try:
        assert isinstance(storage_for("file:///var/ck"), LocalStorage)
        assert isinstance(storage_for("s3a://drover-ckpt/spark-a/job/checkpoint"), S3Storage)
        configured = storage_for("hdfs://nn-a:8020/drover/a")
        assert isinstance(configured, HdfsStorage) and configured.webhdfs_url == "http://nn-a:50070"
        default = storage_for("hdfs://nn-b:8020/drover/b")  # Hadoop 3's NameNode HTTP port
        assert isinstance(default, HdfsStorage) and default.webhdfs_url == "http://nn-b:9870"
        assert storage_for("hdfs://nn-a:8020/other") is configured  # one per NameNode
        with pytest.raises(InvalidInput):
            storage_for("gs://bucket/x")
    finally:
        forget_instances()


def test_an_unreadable_location_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(StorageUnavailable):
        LocalStorage().list(f"file://{tmp_path}/file")


# --------------------------------------------------------------------------- sync


def test_sync_copies_only_what_the_copy_lacks(tmp_path: Path, source: Checkpoint) -> None:
    source.run(3)
    target = f"file://{tmp_path}/b/job/checkpoint"
    first = sync(source.url, target)
    assert first.complete and first.batch == 2 and first.wanted == 2
    assert visible_cut(tmp_path / "b/job/checkpoint") == visible_cut(source.path)
    # the copy carries the source's modification times and no checksum files
    assert LocalStorage().list(target)["offsets/2"] == LocalStorage().list(source.url)["offsets/2"]
    assert not list((tmp_path / "b").rglob("*.crc"))
    source.run(2)
    second = sync(source.url, target)
    assert second.batch == 4
    assert second.files == 2 * (1 + 2 + 1)  # offsets, two deltas, commit per new batch
    assert sync(source.url, target).files == 0


def test_a_copy_stopped_at_its_deadline_stays_at_a_complete_batch(
    tmp_path: Path, source: Checkpoint
) -> None:
    source.run(2)
    target = f"file://{tmp_path}/b/job/checkpoint"
    sync(source.url, target)
    source.run(3)
    ticks = iter(range(100))
    result = sync(source.url, target, deadline=4, clock=lambda: next(ticks))
    assert not result.complete and result.batch in (1, 2)
    assert last_complete_batch(files(tmp_path / "b/job/checkpoint")) == result.batch
    assert sync(source.url, target).batch == 4


def test_a_batch_in_progress_at_the_source_is_not_copied(
    tmp_path: Path, source: Checkpoint
) -> None:
    source.run(2)
    source.run(commit=False)  # offsets/2 and its state written, no commit yet
    target = tmp_path / "b/job/checkpoint"
    assert sync(source.url, f"file://{target}").batch == 1
    assert not (target / "offsets" / "2").exists()
    assert not (target / "state/0/0/3.delta").exists()


def test_relocatable_metadata_names_the_copy_not_the_source(
    tmp_path: Path, source: Checkpoint
) -> None:
    source.run(1)
    schema = f"file:{source.path}/state/0/_stateSchema/default/0_ab12"
    source.put("state/0/_stateSchema/default/0_ab12", "schema")
    source.put("state/0/_metadata/v2/0", f'{{"stateSchemaFilePaths":["{schema}"]}}')
    target = tmp_path / "b/job/checkpoint"
    sync(source.url, f"file://{target}")
    moved = (target / "state/0/_metadata/v2/0").read_text()
    assert str(source.path) not in moved
    assert f"file:{target}/state/0/_stateSchema/default/0_ab12" in moved
    # relocated files differ in size on purpose: they are not copied again
    assert sync(source.url, f"file://{target}").files == 0


def test_a_copy_killed_mid_batch_is_still_an_earlier_complete_batch(
    tmp_path: Path, source: Checkpoint
) -> None:
    """The replicator's process dies (the fault point exits like a SIGKILL) after a state file
    of the next batch was written and before that batch's offsets and commit."""
    source.run(3)
    target = tmp_path / "b/job/checkpoint"
    sync(source.url, f"file://{target}")
    before = visible_cut(target)
    source.run(2)
    once = tmp_path / "fired"
    code = (
        "from scheduler.loops.replication import sync; "
        f"sync({source.url!r}, {'file://' + str(target)!r})"
    )
    env = {**os.environ, faults.ENV: f"{MID_BATCH_FAULT}:{once}", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, timeout=60)
    assert done.returncode == faults.EXIT_CODE and once.exists()
    # a state file of batch 3 is there, its offsets and commit are not: still batch 2
    assert (target / "state/0/0/4.delta").exists() or (target / "state/0/1/4.delta").exists()
    assert not (target / "offsets" / "3").exists()
    assert visible_cut(target) == before
    assert last_complete_batch(files(target)) == 2
    # the next round finishes the job
    assert sync(source.url, f"file://{target}").batch == 4
    assert visible_cut(target) == visible_cut(source.path)


def test_a_copy_of_another_history_is_taken_back_before_it_is_overwritten(
    tmp_path: Path, source: Checkpoint
) -> None:
    source.run(4)
    target = tmp_path / "b/job/checkpoint"
    sync(source.url, f"file://{target}")
    other = Checkpoint(tmp_path / "c" / "job" / "checkpoint")  # the job went on elsewhere
    other.run(6)
    result = sync(other.url, f"file://{target}")
    assert result.batch == 5
    assert visible_cut(target) == visible_cut(other.path)


# --------------------------------------------------------------------------- make_available


def test_make_available_syncs_from_a_readable_source(tmp_path: Path, source: Checkpoint) -> None:
    source.run(3)
    target = f"file://{tmp_path}/b/job/checkpoint"
    sync(source.url, target)  # the replica, one batch behind after the next run
    source.run(1)
    done = make_available(
        "job", source=source.url, replica=target, target=target, target_root=f"file://{tmp_path}/b"
    )
    assert (done.origin, done.batch, done.location) == (SOURCE, 3, target)
    assert done.files_copied == 4  # only the batch the replica lacked
    assert make_available("job", source=source.url, replica=target, target=target).files_copied == 0


def test_make_available_falls_back_to_the_replica_when_the_source_is_gone(
    tmp_path: Path, source: Checkpoint
) -> None:
    source.run(3)
    target = tmp_path / "b/job/checkpoint"
    sync(source.url, f"file://{target}")
    # a half-copied next batch in the replica: its state only
    source.run(1)
    (target / "state/0/0/4.delta").write_bytes(source.content("state/0/0/4.delta"))
    import shutil

    shutil.rmtree(tmp_path / "a")  # cluster A's storage directory is gone
    done = make_available(
        "job", source=source.url, replica=f"file://{target}", target=f"file://{target}"
    )
    assert (done.origin, done.batch) == (REPLICA, 2)
    assert "no source checkpoint" in done.detail and "resumes after batch 2" in done.detail
    assert not (target / "state/0/0/4.delta").exists()  # nothing past the batch it resumes from


def test_make_available_copies_a_replica_kept_elsewhere(tmp_path: Path, source: Checkpoint) -> None:
    source.run(2)
    replica = f"file://{tmp_path}/b/replicas/job"
    sync(source.url, replica)
    target = f"file://{tmp_path}/b/job/checkpoint"
    gone = f"file://{tmp_path}/gone/job/checkpoint"
    done = make_available("job", source=gone, replica=replica, target=target)
    assert (done.origin, done.batch) == (REPLICA, 1)
    assert visible_cut(tmp_path / "b/job/checkpoint") == visible_cut(tmp_path / "b/replicas/job")


def test_make_available_starts_fresh_without_any_complete_batch(tmp_path: Path) -> None:
    target = tmp_path / "b/job/checkpoint"
    (target / "offsets").mkdir(parents=True)
    (target / "offsets" / "0").write_text("v1\n{}")  # a batch planned, never committed
    done = make_available(
        "job", source=f"file://{tmp_path}/a/job/checkpoint", replica=None, target=f"file://{target}"
    )
    assert (done.origin, done.batch) == (FRESH_START, None)
    assert files(target) == {}


def test_make_available_refuses_a_target_outside_the_target_root(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="not inside"):
        make_available(
            "job",
            source=f"file://{tmp_path}/a/job/checkpoint",
            replica=None,
            target=f"file://{tmp_path}/a/job/elsewhere",
            target_root=f"file://{tmp_path}/b",
        )


def test_temporary_files_of_a_killed_write_are_cleaned_by_the_next_sync(
    tmp_path: Path, source: Checkpoint
) -> None:
    source.run(1)
    target = tmp_path / "b/job/checkpoint"
    (target / "offsets").mkdir(parents=True)
    (target / "offsets" / f".1.0123456789ab{TEMP_SUFFIX}").write_text("half")
    sync(source.url, f"file://{target}")
    assert not list(target.rglob(f"*{TEMP_SUFFIX}"))


def test_a_big_file_stops_at_the_deadline_without_leaving_a_part(
    tmp_path: Path, source: Checkpoint
) -> None:
    source.run(1)
    big = source.path / "state/0/0/SSTs/000009-a1b2.sst"
    big.parent.mkdir(parents=True)
    big.write_bytes(b"x" * (3 << 20))  # three chunks
    target = tmp_path / "b/job/checkpoint"
    calls = iter(range(1000))
    result = sync(
        source.url, f"file://{target}", deadline=3, clock=lambda: next(calls)
    )  # a clock that passes the deadline while the big file is being written
    assert not result.complete and "deadline" in result.note
    assert not (target / "state/0/0/SSTs/000009-a1b2.sst").exists()
    assert not list(target.rglob(f"*{TEMP_SUFFIX}"))
    assert sync(source.url, f"file://{target}").complete
    assert (target / "state/0/0/SSTs/000009-a1b2.sst").stat().st_size == 3 << 20
