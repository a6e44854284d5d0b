"""Checkpoints in a directory tree (one machine, or a shared file system such as NFS): the
``file://`` implementation of :class:`scheduler.storage.base.CheckpointStorage`.

A write goes to a hidden temporary file (``.<name>.<id>.drover.tmp``), is flushed to disk and
renamed over the final name (atomic), carrying the source's modification time. Errors are
StorageUnavailable, chained to the OSError. A location that does not exist lists as empty.
"""

from __future__ import annotations

import errno
import os
import stat
import uuid
from collections.abc import Iterable
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
    storage_for,
    unavailable,
)

__all__ = [
    "CHUNK",
    "TEMP_SUFFIX",
    "CheckpointStorage",
    "LocalStorage",
    "local_storage",
    "reading",
    "storage_for",
]


def _directory(location: str) -> Path:
    """The local directory of a ``file://`` location (or an absolute path)."""
    parsed = storage.parse_location(location, "checkpoint location")
    if parsed.scheme != "file":
        raise StorageError(f"{location}: not a file:// location")
    return Path("/", *parsed.parts)


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
        for dirpath, _dirs, names in os.walk(root, onerror=failed):
            for name in names:
                full = os.path.join(dirpath, name)
                try:
                    info = os.lstat(full)
                except FileNotFoundError:
                    continue  # deleted (purged by Spark, renamed) while we listed
                except OSError as exc:
                    errors.append(exc)
                    continue
                if not stat.S_ISREG(info.st_mode):
                    continue  # a checkpoint holds regular files only; never follow links
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                files[rel] = FileInfo(info.st_size, info.st_mtime_ns)
        if errors:
            raise unavailable(f"cannot list {location}", errors[0]) from errors[0]
        return files

    def open(self, location: str, path: str) -> BinaryIO:
        full = _directory(location).joinpath(*relative(path).parts)
        try:
            return full.open("rb")
        except OSError as exc:
            raise unavailable(f"cannot read {path} in {location}", exc) from exc

    def write(
        self, location: str, path: str, chunks: Iterable[bytes], *, mtime_ns: int | None = None
    ) -> int:
        rel = relative(path)
        final = _directory(location).joinpath(*rel.parts)
        temp = final.with_name(f".{final.name}.{uuid.uuid4().hex[:12]}{TEMP_SUFFIX}")
        written = 0
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            with temp.open("wb") as out:
                for chunk in chunks:
                    out.write(chunk)
                    written += len(chunk)
                out.flush()
                os.fsync(out.fileno())
            if mtime_ns is not None:
                os.utime(temp, ns=(mtime_ns, mtime_ns))
            # Hadoop's local file system checks a file against ``.<name>.crc`` when there is
            # one: a checksum of older content would make the new file unreadable to Spark
            _unlink(final.with_name(f".{final.name}.crc"))
            os.replace(temp, final)
        except OSError as exc:
            _unlink(temp)
            raise unavailable(f"cannot write {path} in {location}", exc) from exc
        except BaseException:
            _unlink(temp)
            raise
        return written

    def exists(self, location: str, path: str) -> bool:
        try:
            return _directory(location).joinpath(*relative(path).parts).is_file()
        except OSError as exc:
            raise unavailable(f"cannot read {location}", exc) from exc

    def reachable(self, location: str) -> bool:
        try:
            return _directory(location).is_dir()
        except OSError:
            return False

    def remove(self, location: str, path: str) -> None:
        full = _directory(location).joinpath(*relative(path).parts)
        try:
            full.unlink(missing_ok=True)
            _unlink(full.with_name(f".{full.name}.crc"))
        except OSError as exc:
            raise unavailable(f"cannot remove {path} in {location}", exc) from exc


def _unlink(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


_LOCAL = LocalStorage()


def local_storage() -> LocalStorage:
    """The one local implementation (it holds no state)."""
    return _LOCAL
