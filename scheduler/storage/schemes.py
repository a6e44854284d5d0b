"""Which checkpoint storage serves a location: the implementation for its scheme
(``scheduler.storage.base`` lists them), one instance per HDFS NameNode or S3 endpoint in this
process. The remote ones (fsspec, s3fs) are imported only when a location needs them."""

from __future__ import annotations

import threading

from scheduler.core.errors import StorageError
from scheduler.decisions import storage
from scheduler.storage.base import CheckpointStorage
from scheduler.storage.local import local_storage

_lock = threading.Lock()
_remote: dict[tuple[str, str], CheckpointStorage] = {}


def storage_for(location: str) -> CheckpointStorage:
    """The storage implementation for a location, by its scheme (one instance per HDFS
    NameNode or per S3 endpoint in this process)."""
    parsed = storage.parse_location(location, "checkpoint location")
    if parsed.scheme == "file":
        return local_storage()
    key = (parsed.scheme, parsed.authority if parsed.scheme == "hdfs" else "")
    with _lock:
        found = _remote.get(key)
        if found is None:
            from scheduler.storage import remote

            if parsed.scheme == "hdfs":
                found = remote.HdfsStorage.for_namenode(parsed.authority)
            elif parsed.scheme == "s3a":
                found = remote.S3Storage.from_environment()
            else:  # pragma: no cover - parse_location refuses other schemes
                raise StorageError(f"{location}: no storage implementation for {parsed.scheme}")
            _remote[key] = found
        return found


def forget_instances() -> None:
    """Drop the remote instances made so far (tests that change the environment)."""
    with _lock:
        _remote.clear()
