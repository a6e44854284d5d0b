"""Checkpoint storage behind one narrow interface: list, read, write atomically, exists, remove
(and whether a root is reachable).

Replication (:mod:`scheduler.loops.replication`) copies checkpoint files through this interface
only. Locations are the normalised locations of :mod:`scheduler.decisions.storage`; paths inside a
location are relative, ``/``-separated. :func:`scheduler.storage.schemes.storage_for` picks the
implementation by the location's scheme:

    file://   scheduler.storage.local.LocalStorage   (a directory tree; NFS)
    hdfs://   scheduler.storage.remote.HdfsStorage   (WebHDFS, through fsspec)
    s3a://    scheduler.storage.remote.S3Storage     (an S3-compatible object store, through s3fs)

What "atomic" means per implementation: a local or HDFS write goes to a hidden temporary name in
the same directory and is renamed over the final one (a rename is atomic on both); an object
store makes an object visible only once its PUT (or multipart upload) is complete, so it is
written under its final key directly. Either way a reader sees the old content or the whole new
one, never a part, and replication (which writes a batch's offsets and commit after the files
they refer to) never leaves a half batch.

Where the remote ones are (every process reads the same environment):

- ``DROVER_WEBHDFS_ADDRESSES``: ``namenode-host:rpc-port=http://namenode-host:http-port`` pairs,
  comma separated: the NameNode's WebHDFS address for an ``hdfs://`` authority (default: the
  same host on Hadoop 3's NameNode HTTP port, 9870); ``DROVER_WEBHDFS_USER`` (default: this
  process's user) is the HDFS user of Drover's own reads and writes (simple authentication);
- ``DROVER_S3_ENDPOINT_URL``: an S3-compatible endpoint (default: AWS); credentials as every AWS
  client finds them (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, profiles, roles).

The rule that a cluster only ever writes under its own root is the caller's
(``scheduler.decisions.storage.check_writable``; replication writes only under a replica's
target root). Buckets and HDFS permissions enforce it for the clusters themselves
(``docs/storage.md``).

Errors are StorageUnavailable (a location cannot be read or written: gone, refused, I/O error),
chained to the cause. A location that does not exist lists as empty: "no checkpoint there".
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import PurePosixPath
from typing import BinaryIO, Protocol

from scheduler.core.errors import InvalidInput, StorageUnavailable
from scheduler.decisions.checkpoints import FileInfo

#: bytes per read/write when copying a file
CHUNK = 1 << 20
#: the suffix of the temporary files a write goes through (hidden: ``.<name>.<id>.drover.tmp``)
TEMP_SUFFIX = ".drover.tmp"


class CheckpointStorage(Protocol):
    """What replication needs of a storage system."""

    #: a write can set the file's modification time (copies then carry the source's, and
    #: "changed" means "another modification time"); object stores and HDFS over WebHDFS stamp
    #: their own ("changed" then means "modified after the copy was made")
    preserves_mtime: bool

    def list(self, location: str) -> dict[str, FileInfo]:
        """Every file under ``location`` (relative path -> size and mtime); {} if it does not
        exist. Hidden files (checksums, temporary files) included."""
        ...

    def open(self, location: str, path: str) -> BinaryIO:
        """A file for reading (the caller closes it); StorageUnavailable if it cannot be read,
        FileNotFoundError (chained in StorageUnavailable) if it is gone."""
        ...

    def write(
        self, location: str, path: str, chunks: Iterable[bytes], *, mtime_ns: int | None = None
    ) -> int:
        """Write a file atomically: readers see the old content or the whole new one, never a
        part. Returns the bytes written."""
        ...

    def exists(self, location: str, path: str) -> bool: ...

    def reachable(self, location: str) -> bool:
        """Whether ``location`` (a storage root) exists and can be used: a root that is gone (an
        unmounted file system, a deleted bucket) is never created by a copy."""
        ...

    def remove(self, location: str, path: str) -> None:
        """Delete a file; a file already gone is not an error."""
        ...


def relative(path: str) -> PurePosixPath:
    """A path inside a checkpoint: relative, without ``.``/``..``/empty segments."""
    rel = PurePosixPath(path)
    if rel.is_absolute() or not rel.parts or any(p in ("", ".", "..") for p in rel.parts):
        raise InvalidInput(f"{path!r} is not a relative path inside a checkpoint")
    return rel


def unavailable(what: str, exc: BaseException) -> StorageUnavailable:
    detail = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return StorageUnavailable(f"{what}: {detail}")


@contextmanager
def reading(store: CheckpointStorage, location: str, path: str) -> Iterator[Iterator[bytes]]:
    """The chunks of one file, closed afterwards."""
    handle = store.open(location, path)
    try:

        def chunks() -> Iterator[bytes]:
            while True:
                try:
                    chunk = handle.read(CHUNK)
                except OSError as exc:
                    raise unavailable(f"cannot read {path} in {location}", exc) from exc
                if not chunk:
                    return
                yield chunk

        yield chunks()
    finally:
        handle.close()
