"""Checkpoint storage (``scheduler/storage/local.py``) never follows a link inside a checkpoint.

Drivers of local clusters own their checkpoint directories; the node (root) reads them to
replicate and writes replicas and failover copies into them. A driver that plants a symbolic
link -- to a file, or in place of a directory -- must not get the node to read, write or delete
anything outside the checkpoint through it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scheduler.core.errors import StorageUnavailable
from scheduler.storage.local import LocalStorage, reading


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    checkpoint = tmp_path / "root" / "job" / "checkpoint"
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "offsets" / "0").write_text("batch 0")
    outside = tmp_path / "node"
    outside.mkdir()
    (outside / "secret").write_text("the node's secret")
    return checkpoint, outside


def test_a_linked_file_is_neither_listed_nor_read(layout: tuple[Path, Path]) -> None:
    checkpoint, outside = layout
    (checkpoint / "offsets" / "1").symlink_to(outside / "secret")
    store = LocalStorage()
    assert set(store.list(str(checkpoint))) == {"offsets/0"}
    with pytest.raises(StorageUnavailable):
        store.open(str(checkpoint), "offsets/1")
    assert not store.exists(str(checkpoint), "offsets/1")
    with reading(store, str(checkpoint), "offsets/0") as chunks:
        assert b"".join(chunks) == b"batch 0"


def test_a_linked_directory_is_never_entered(layout: tuple[Path, Path]) -> None:
    checkpoint, outside = layout
    (checkpoint / "state").symlink_to(outside)
    store = LocalStorage()
    assert set(store.list(str(checkpoint))) == {"offsets/0"}
    with pytest.raises(StorageUnavailable):
        store.open(str(checkpoint), "state/secret")
    assert not store.exists(str(checkpoint), "state/secret")
    with pytest.raises(StorageUnavailable):
        store.write(str(checkpoint), "state/secret", [b"overwritten"])
    with pytest.raises(StorageUnavailable):
        store.write(str(checkpoint), "state/new", [b"planted"])
    store.remove(str(checkpoint), "state/secret")  # nothing there: not an error, nothing done
    assert (outside / "secret").read_text() == "the node's secret"
    assert sorted(os.listdir(outside)) == ["secret"]


def test_a_write_replaces_a_planted_link_never_its_target(layout: tuple[Path, Path]) -> None:
    checkpoint, outside = layout
    (checkpoint / "offsets" / "2").symlink_to(outside / "secret")
    store = LocalStorage()
    assert store.write(str(checkpoint), "offsets/2", [b"batch 2"]) == 7
    assert (checkpoint / "offsets" / "2").read_text() == "batch 2"
    assert not (checkpoint / "offsets" / "2").is_symlink()
    assert (outside / "secret").read_text() == "the node's secret"
    store.write(str(checkpoint), "commits/0", [b"done"], mtime_ns=10**18)
    assert (checkpoint / "commits" / "0").stat().st_mtime_ns == 10**18
    store.remove(str(checkpoint), "commits/0")
    assert not (checkpoint / "commits" / "0").exists()
