"""Checkpoints on HDFS (over WebHDFS) and in S3-compatible object stores, through ``fsspec``:
the ``hdfs://`` and ``s3a://`` implementations of :class:`scheduler.storage.base.CheckpointStorage`.

HDFS: the NameNode's WebHDFS REST API (``fsspec.implementations.webhdfs``), which redirects reads
and writes to a DataNode. A write goes to a hidden temporary file next to the final one and is
renamed over it (an existing file is deleted first: WebHDFS's RENAME does not replace); the
rename is atomic in HDFS. Reads and writes are Drover's own, as ``DROVER_WEBHDFS_USER``.

S3: ``s3fs``. An object becomes visible only when its upload completes, so a write goes to the
final key directly; a write that fails midway is discarded (a multipart upload is aborted), never
completed. Listings are never cached (a replica's listing must be the bucket's).

Neither keeps the source's modification time (``preserves_mtime`` False): a copy is stamped when
it is written, and a source file counts as changed when it was modified after that.
"""

from __future__ import annotations

import getpass
import os
import threading
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, BinaryIO, TypeVar
from urllib.parse import urlsplit

from scheduler.core.errors import StorageError, StorageUnavailable
from scheduler.decisions import storage
from scheduler.decisions.checkpoints import FileInfo
from scheduler.storage.base import TEMP_SUFFIX, relative, unavailable

T = TypeVar("T")

#: Hadoop 3's NameNode HTTP port: the WebHDFS address of an ``hdfs://`` authority not configured
DEFAULT_WEBHDFS_PORT = 9870
#: seconds one WebHDFS or S3 request may take
TIMEOUT_S = 30.0


def _failures() -> tuple[type[BaseException], ...]:
    """What an fsspec call raises when storage cannot be used (besides a missing file)."""
    import requests

    return (OSError, requests.RequestException, ValueError)


def webhdfs_addresses(text: str) -> dict[str, str]:
    """``host:port=http://host:port,...`` (``DROVER_WEBHDFS_ADDRESSES``) as a mapping."""
    found: dict[str, str] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        authority, sep, url = item.strip().partition("=")
        if not sep or not url.startswith(("http://", "https://")):
            raise StorageError(
                f"DROVER_WEBHDFS_ADDRESSES: {item!r} is not namenode:port=http://host:port"
            )
        found[authority.strip().lower()] = url.strip().rstrip("/")
    return found


def _call(what: str, call: Callable[[], T]) -> T:
    """``call()``; StorageUnavailable (chained) when storage cannot be used, FileNotFoundError
    as it is (a missing file is an answer)."""
    try:
        return call()
    except FileNotFoundError:
        raise
    except _failures() as exc:
        raise unavailable(what, exc) from exc


class _FsspecStorage:
    """What both implementations do alike through their fsspec file system (``_fs``) once a
    location and a path are resolved (``_where``)."""

    preserves_mtime = False

    @property
    def _fs(self) -> Any:
        raise NotImplementedError

    def _where(self, location: str, path: str) -> str:
        raise NotImplementedError

    def open(self, location: str, path: str) -> BinaryIO:
        where = self._where(location, path)
        what = f"cannot read {path} in {location}"
        try:
            handle: BinaryIO = _call(what, lambda: self._fs.open(where, "rb"))
        except FileNotFoundError as exc:
            raise unavailable(what, exc) from exc
        return handle

    def exists(self, location: str, path: str) -> bool:
        where = self._where(location, path)
        return bool(_call(f"cannot read {location}", lambda: self._fs.isfile(where)))

    def remove(self, location: str, path: str) -> None:
        where = self._where(location, path)
        try:
            _call(f"cannot remove {path} in {location}", lambda: self._fs.rm_file(where))
        except FileNotFoundError:
            pass

    def _find(self, location: str, root: str) -> dict[str, Any]:
        """The entries below ``root`` (of ``location``) by name, with their details; none when
        it does not exist."""
        try:
            found: dict[str, Any] = _call(
                f"cannot list {location}", lambda: self._fs.find(root, detail=True)
            )
        except FileNotFoundError:
            return {}
        return found


class HdfsStorage(_FsspecStorage):
    """One HDFS (one NameNode authority) over WebHDFS."""

    def __init__(self, authority: str, webhdfs_url: str, user: str | None = None) -> None:
        self.authority = authority
        self.webhdfs_url = webhdfs_url.rstrip("/")
        self.user = user or _user()
        self._local = threading.local()

    @classmethod
    def for_namenode(cls, authority: str) -> HdfsStorage:
        """From the environment (``DROVER_WEBHDFS_ADDRESSES``, ``DROVER_WEBHDFS_USER``)."""
        addresses = webhdfs_addresses(os.environ.get("DROVER_WEBHDFS_ADDRESSES", ""))
        url = addresses.get(authority)
        if url is None:
            host = authority.rpartition(":")[0] if ":" in authority else authority
            url = f"http://{host}:{DEFAULT_WEBHDFS_PORT}"
        return cls(authority, url, os.environ.get("DROVER_WEBHDFS_USER") or None)

    @property
    def _fs(self) -> Any:
        """This thread's WebHDFS client (a requests session is not shared between threads)."""
        fs = getattr(self._local, "fs", None)
        if fs is None:
            from fsspec.implementations.webhdfs import WebHDFS

            url = urlsplit(self.webhdfs_url)
            fs = WebHDFS(
                host=url.hostname,
                port=url.port or DEFAULT_WEBHDFS_PORT,
                user=self.user,
                use_https=url.scheme == "https",
                skip_instance_cache=True,
            )
            fs.session.trust_env = False  # never through a proxy
            self._local.fs = fs
        return fs

    def _where(self, location: str, path: str) -> str:
        return self._path(location, path)

    def _path(self, location: str, path: str | None = None) -> str:
        parsed = storage.parse_location(location, "checkpoint location")
        if parsed.scheme != "hdfs" or parsed.authority != self.authority:
            raise StorageError(f"{location} is not on hdfs://{self.authority}")
        parts = list(parsed.parts) + (list(relative(path).parts) if path is not None else [])
        return "/" + "/".join(parts)

    def list(self, location: str) -> dict[str, FileInfo]:
        root = self._path(location)
        try:
            info = _call(f"cannot read {location}", lambda: self._fs.info(root))
        except FileNotFoundError:
            return {}
        if str(info.get("type", "")).lower() != "directory":
            raise StorageUnavailable(f"{location} is not a directory")
        files: dict[str, FileInfo] = {}
        for name, entry in self._find(location, root).items():
            if str(entry.get("type", "")).lower() != "file":
                continue
            rel = name[len(root) :].lstrip("/") if name.startswith(root) else name.lstrip("/")
            mtime_ms = int(entry.get("modificationTime") or 0)
            files[rel] = FileInfo(int(entry.get("length", entry.get("size", 0))), mtime_ms * 10**6)
        return files

    def write(
        self, location: str, path: str, chunks: Iterable[bytes], *, mtime_ns: int | None = None
    ) -> int:
        final = self._path(location, path)
        folder, _, name = final.rpartition("/")
        temp = f"{folder}/.{name}.{uuid.uuid4().hex[:12]}{TEMP_SUFFIX}"
        what = f"cannot write {path} in {location}"
        fs = self._fs
        written = 0
        try:
            with fs.open(temp, "wb") as out:
                for chunk in chunks:
                    out.write(chunk)
                    written += len(chunk)
            if fs.exists(final):
                fs.rm(final)
            fs.mv(temp, final)
        except BaseException as exc:
            try:
                fs.rm(temp)
            except Exception:  # noqa: BLE001 - the temporary file is hidden; best effort
                pass
            if isinstance(exc, _failures()):
                raise unavailable(what, exc) from exc
            raise
        return written

    def reachable(self, location: str) -> bool:
        try:
            return bool(self._fs.isdir(self._path(location)))
        except Exception:  # noqa: BLE001 - unreachable, whatever the reason
            return False


class S3Storage(_FsspecStorage):
    """Buckets of one S3-compatible endpoint."""

    def __init__(self, endpoint_url: str | None = None, **options: Any) -> None:
        import s3fs

        client: dict[str, Any] = {"endpoint_url": endpoint_url} if endpoint_url else {}
        self.endpoint_url = endpoint_url
        self._s3 = s3fs.S3FileSystem(
            client_kwargs=client,
            skip_instance_cache=True,
            use_listings_cache=False,
            config_kwargs={"connect_timeout": 5, "read_timeout": TIMEOUT_S},
            **options,
        )

    @classmethod
    def from_environment(cls) -> S3Storage:
        """From ``DROVER_S3_ENDPOINT_URL`` and the standard AWS credentials."""
        return cls(os.environ.get("DROVER_S3_ENDPOINT_URL") or None)

    @property
    def _fs(self) -> Any:
        return self._s3

    def _where(self, location: str, path: str) -> str:
        return self._key(location, path)

    @staticmethod
    def _key(location: str, path: str | None = None) -> str:
        parsed = storage.parse_location(location, "checkpoint location")
        if parsed.scheme != "s3a":
            raise StorageError(f"{location} is not an s3a:// location")
        parts = [parsed.authority, *parsed.parts]
        if path is not None:
            parts += relative(path).parts
        return "/".join(parts)

    def list(self, location: str) -> dict[str, FileInfo]:
        prefix = self._key(location)
        files: dict[str, FileInfo] = {}
        for name, entry in self._find(location, prefix).items():
            if entry.get("type", "file") != "file" or not name.startswith(prefix + "/"):
                continue
            modified = entry.get("LastModified")
            mtime_ns = int(modified.timestamp() * 1e9) if isinstance(modified, datetime) else 0
            files[name[len(prefix) + 1 :]] = FileInfo(int(entry.get("size", 0)), mtime_ns)
        return files

    def write(
        self, location: str, path: str, chunks: Iterable[bytes], *, mtime_ns: int | None = None
    ) -> int:
        key = self._key(location, path)
        what = f"cannot write {path} in {location}"
        written = 0
        out = _call(what, lambda: self._fs.open(key, "wb"))
        try:
            for chunk in chunks:
                out.write(chunk)
                written += len(chunk)
        except BaseException as exc:
            out.discard()  # never complete a partial upload
            out.closed = True  # nor let the file's finaliser try
            if isinstance(exc, _failures()):
                raise unavailable(what, exc) from exc
            raise
        _call(what, out.close)
        return written

    def reachable(self, location: str) -> bool:
        bucket = self._key(location).split("/", 1)[0]
        try:
            return bool(self._fs.exists(bucket))
        except Exception:  # noqa: BLE001 - unreachable, whatever the reason
            return False


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry
        return "drover"
