"""Checkpoint storage behind one narrow interface: list, read, write atomically, exists, remove.

Replication (:mod:`scheduler.loops.replication`) copies checkpoint files through this interface only
(and asks whether a storage root is reachable before it writes under it).
Locations are the normalised locations of :mod:`scheduler.decisions.storage` (``file:///a/b``; plain
absolute paths are accepted too); paths inside a location are relative, ``/``-separated.

:class:`LocalStorage` implements it over a directory tree (one machine, or a shared file system
such as NFS). An object store (``s3a://``) is a second implementation of the same five
operations (list with sizes and modification times, ranged reads, a write made visible at once
by a single PUT, delete); :func:`storage_for` says where it would plug in. Until it exists,
``s3a://`` locations raise StorageError.

Errors are StorageUnavailable (a location cannot be read or written: gone, refused, I/O error),
chained to the OSError. A location that does not exist lists as empty: "no checkpoint there".

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
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Protocol

from scheduler.core.errors import InvalidInput, StorageError, StorageUnavailable
from scheduler.decisions import storage
from scheduler.decisions.checkpoints import FileInfo

#: bytes per read/write when copying a file
CHUNK = 1 << 20
#: the suffix of the temporary files a write goes through (hidden: ``.<name>.<id>.drover.tmp``)
TEMP_SUFFIX = ".drover.tmp"


class CheckpointStorage(Protocol):
    """What replication needs of a storage system."""

    #: a write can set the file's modification time (copies then carry the source's, and
    #: "changed" means "another modification time"); object stores stamp their own
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


def _relative(path: str) -> PurePosixPath:
    rel = PurePosixPath(path)
    if rel.is_absolute() or not rel.parts or any(p in ("", ".", "..") for p in rel.parts):
        raise InvalidInput(f"{path!r} is not a relative path inside a checkpoint")
    return rel


def _unavailable(what: str, exc: OSError) -> StorageUnavailable:
    return StorageUnavailable(f"{what}: {exc.strerror or type(exc).__name__}")


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
            raise _unavailable(f"cannot read {location}", exc) from exc
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
            raise _unavailable(f"cannot list {location}", errors[0]) from errors[0]
        return files

    def open(self, location: str, path: str) -> BinaryIO:
        rel = _relative(path)
        try:
            with _beneath(location, rel.parts[:-1]) as directory:
                fd = os.open(rel.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise OSError(errno.EINVAL, "not a regular file")
            return os.fdopen(fd, "rb")
        except OSError as exc:
            raise _unavailable(f"cannot read {path} in {location}", exc) from exc

    def write(
        self, location: str, path: str, chunks: Iterable[bytes], *, mtime_ns: int | None = None
    ) -> int:
        rel = _relative(path)
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
            raise _unavailable(f"cannot write {path} in {location}", exc) from exc
        return written

    def exists(self, location: str, path: str) -> bool:
        rel = _relative(path)
        try:
            with _beneath(location, rel.parts[:-1]) as directory:
                info = os.stat(rel.name, dir_fd=directory, follow_symlinks=False)
            return stat.S_ISREG(info.st_mode)
        except FileNotFoundError:
            return False
        except OSError as exc:
            if exc.errno in _LINKED:
                return False
            raise _unavailable(f"cannot read {location}", exc) from exc

    def reachable(self, location: str) -> bool:
        try:
            return _directory(location).is_dir()
        except OSError:
            return False

    def remove(self, location: str, path: str) -> None:
        rel = _relative(path)
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
            raise _unavailable(f"cannot remove {path} in {location}", exc) from exc


def _unlink_at(directory: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=directory)
    except OSError:
        pass


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
                    raise _unavailable(f"cannot read {path} in {location}", exc) from exc
                if not chunk:
                    return
                yield chunk

        yield chunks()
    finally:
        handle.close()


_LOCAL = LocalStorage()


def storage_for(location: str) -> CheckpointStorage:
    """The storage implementation for a location (``file://`` only, today)."""
    _directory(location)  # raises StorageError for schemes without an implementation
    return _LOCAL
