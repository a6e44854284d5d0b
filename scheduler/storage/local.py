"""Checkpoints in a directory tree (one machine, or a shared file system such as NFS): the
``file://`` implementation of :class:`scheduler.storage.base.CheckpointStorage`.

A write goes to a hidden temporary file (``.<name>.<id>.drover.tmp``), is flushed to disk and
renamed over the final name (atomic), carrying the source's modification time. Errors are
StorageUnavailable, chained to the OSError. A location that does not exist lists as empty.

Nothing inside a location is trusted: drivers of local clusters run as their own users and own
their checkpoint directories, while this code runs as the node (root). So below a location every
step goes through a directory descriptor and never follows a symbolic link (``O_NOFOLLOW``, the
``*at`` calls, ``os.fwalk``): a link a driver planted -- to a file, or in place of a directory --
is not listed, not read, not written through and not deleted through; a write replaces the link
itself. The location and its parents are the node's (it makes them) and are taken as they are.
"""

from __future__ import annotations

import errno
import os
import stat
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from scheduler.core.errors import StorageError, StorageUnavailable
from scheduler.decisions import storage
from scheduler.decisions.checkpoints import FileInfo
from scheduler.storage.base import (
    CHUNK,
    TEMP_SUFFIX,
    CheckpointStorage,
    reading,
    relative,
    unavailable,
)

__all__ = [
    "CHUNK",
    "TEMP_SUFFIX",
    "CheckpointStorage",
    "LocalStorage",
    "local_storage",
    "reading",
]


def _directory(location: str) -> Path:
    """The local directory of a ``file://`` location (or an absolute path)."""
    parsed = storage.parse_location(location, "checkpoint location")
    if parsed.scheme != "file":
        raise StorageError(
            f"{location}: only file:// checkpoint storage can be replicated today "
            "(an object store implementation of scheduler.storage.local is needed for "
            f"{parsed.scheme}://)"
        )
    return Path("/", *parsed.parts)


#: a directory below a location: opened through its parent's descriptor, never through a link
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: what an open of a file or directory through a planted link (or a file where a directory was
#: expected) fails with
_LINKED = frozenset({errno.ELOOP, errno.ENOTDIR})


@contextmanager
def _beneath(location: str, parts: Sequence[str], *, create: bool = False) -> Iterator[int]:
    """A descriptor of the directory ``parts`` below ``location``'s directory, reached one
    directory at a time without following a link; ``create``: the location and the directories
    made when missing. FileNotFoundError when missing, an OSError with ELOOP or ENOTDIR when a
    step is not a directory (a link)."""
    directory = _directory(location)
    if create:
        directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory, _DIRECTORY)
    try:
        for part in parts:
            try:
                child = os.open(part, _DIRECTORY, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(part, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile
                child = os.open(part, _DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


class LocalStorage:
    """Checkpoints in a local (or network-mounted) directory tree."""

    preserves_mtime = True

    def list(self, location: str) -> dict[str, FileInfo]:
        root = _directory(location)
        files: dict[str, FileInfo] = {}
        errors: list[OSError] = []

        def failed(exc: OSError) -> None:
            if exc.errno != errno.ENOENT:  # a directory Spark deleted while we walked
                errors.append(exc)

        try:
            if not root.is_dir():
                if root.exists():
                    raise StorageUnavailable(f"{location} is not a directory")
                return {}
        except OSError as exc:
            raise unavailable(f"cannot read {location}", exc) from exc
        for dirpath, _dirs, names, dirfd in os.fwalk(root, onerror=failed):
            for name in names:
                try:
                    info = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                except FileNotFoundError:
                    continue  # deleted (purged by Spark, renamed) while we listed
                except OSError as exc:
                    errors.append(exc)
                    continue
                if not stat.S_ISREG(info.st_mode):
                    continue  # a checkpoint holds regular files only; never follow links
                rel = os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")
                files[rel] = FileInfo(info.st_size, info.st_mtime_ns)
        if errors:
            raise unavailable(f"cannot list {location}", errors[0]) from errors[0]
        return files

    def open(self, location: str, path: str) -> BinaryIO:
        rel = relative(path)
        try:
            with _beneath(location, rel.parts[:-1]) as directory:
                fd = os.open(rel.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise OSError(errno.EINVAL, "not a regular file")
            return os.fdopen(fd, "rb")
        except OSError as exc:
            raise unavailable(f"cannot read {path} in {location}", exc) from exc

    def write(
        self, location: str, path: str, chunks: Iterable[bytes], *, mtime_ns: int | None = None
    ) -> int:
        rel = relative(path)
        name = rel.name
        temp = f".{name}.{uuid.uuid4().hex[:12]}{TEMP_SUFFIX}"
        written = 0
        try:
            with _beneath(location, rel.parts[:-1], create=True) as directory:
                try:
                    fd = os.open(
                        temp,
                        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                        0o666,
                        dir_fd=directory,
                    )
                    with os.fdopen(fd, "wb") as out:
                        for chunk in chunks:
                            out.write(chunk)
                            written += len(chunk)
                        out.flush()
                        os.fsync(out.fileno())
                        if mtime_ns is not None:
                            os.utime(out.fileno(), ns=(mtime_ns, mtime_ns))
                    # Hadoop's local file system checks a file against ``.<name>.crc`` when
                    # there is one: a checksum of older content would make the new file
                    # unreadable to Spark
                    _unlink_at(directory, f".{name}.crc")
                    os.replace(temp, name, src_dir_fd=directory, dst_dir_fd=directory)
                except BaseException:
                    _unlink_at(directory, temp)
                    raise
        except OSError as exc:
            raise unavailable(f"cannot write {path} in {location}", exc) from exc
        return written

    def exists(self, location: str, path: str) -> bool:
        rel = relative(path)
        try:
            with _beneath(location, rel.parts[:-1]) as directory:
                info = os.stat(rel.name, dir_fd=directory, follow_symlinks=False)
            return stat.S_ISREG(info.st_mode)
        except FileNotFoundError:
            return False
        except OSError as exc:
            if exc.errno in _LINKED:
                return False
            raise unavailable(f"cannot read {location}", exc) from exc

    def reachable(self, location: str) -> bool:
        try:
            return _directory(location).is_dir()
        except OSError:
            return False

    def remove(self, location: str, path: str) -> None:
        rel = relative(path)
        try:
            with _beneath(location, rel.parts[:-1]) as directory:
                try:
                    os.unlink(rel.name, dir_fd=directory)
                except FileNotFoundError:
                    pass
                _unlink_at(directory, f".{rel.name}.crc")
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno in _LINKED:
                return  # not a directory of the checkpoint's: nothing of it to remove there
            raise unavailable(f"cannot remove {path} in {location}", exc) from exc


def _unlink_at(directory: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=directory)
    except OSError:
        pass


_LOCAL = LocalStorage()


def local_storage() -> LocalStorage:
    """The one local implementation (it holds no state)."""
    return _LOCAL
