"""Checkpoint storage roots: where a job may write, and where it may only read (pure).

Every cluster has one storage root in shared storage (``file:///…`` here, ``hdfs://namenode:port/
prefix`` on the cluster's own HDFS, ``s3a://bucket/prefix`` in an object store). The rule:

- a job's checkpoint lives under the root of the cluster it runs on:
  ``<root>/<job name>/checkpoint`` unless the job names an explicit location;
- Drover never hands a job a writable path under another cluster's root; reading there is fine
  (a failed-over job resumes from the checkpoint its previous cluster wrote);
- an explicit ``checkpoint_location`` must lie strictly inside the root of the job's group's
  primary cluster. On another cluster (after a failover) the same path relative to the primary's
  root is used under that cluster's root, so an explicit location never leaks a write elsewhere;
- two clusters' roots never nest or coincide, so every path belongs to at most one root;
- a job's checkpoint is its own: an explicit location lies under ``<root>/<its own name>/`` (its
  *area*) unless a platform admin places it elsewhere (``check_writable(..., job=...)``), and
  no two jobs checkpoint at the same place or one inside the other (:func:`first_overlap`).
  Jobs are compared by their *checkpoint keys*, the path relative to the root the location lies
  under (:func:`checkpoint_key`): that path is what a failover keeps on another cluster, so two
  jobs of different clusters with one key would meet after a failover. Two jobs that both stay
  in their own areas never overlap (their keys begin with different names); only a location a
  platform admin placed can, which is why every job's key records its first directory (its
  ``area``) and the store looks overlaps up by it.

Locations are Hadoop paths, not percent-encoded URIs: Spark hands ``checkpointLocation`` to
``org.apache.hadoop.fs.Path``, which takes the string literally. So ``%``, ``?``, ``#``, ``\\``,
``:`` inside the path, control characters and whitespace other than inner spaces are refused
rather than guessed at.
Paths are normalised lexically, as Hadoop does: ``.`` and empty segments vanish, ``..`` removes
the segment before it (a ``..`` that climbs above ``/`` or the bucket is refused), no trailing
slash. ``/abs``, ``file:/abs``, ``file:///abs`` and ``file://localhost/abs`` are one location,
written ``file:///abs``; ``//x`` is refused (Hadoop reads a host there). The checks are
lexical: symbolic links and bucket policies are enforced by the storage (``docs/storage.md``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from scheduler.core.errors import InvalidInput, RefusedSubmission

#: the longest location the store keeps (``clusters.storage_root``, ``jobs.checkpoint_location``)
MAX_LOCATION_LENGTH = 1024
#: the directory of a job's default checkpoint in its area: ``<root>/<job>/checkpoint``
DEFAULT_CHECKPOINT_DIR = "checkpoint"
#: the longest first directory (area) of a checkpoint key the store indexes
MAX_AREA_LENGTH = 255

#: a checkpoint location relative to its cluster's root, as path segments
Key = tuple[str, ...]
SCHEMES = ("file", "hdfs", "s3a")

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(.*)$", re.DOTALL)
# S3 bucket naming rules: 3-63 of lowercase letters, digits, dots and hyphens
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
# an HDFS authority: a NameNode's host[:port], or an HA nameservice's name
_NAMENODE = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?$")
_FORBIDDEN = frozenset("%?#\\:")


class HasStorageRoot(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def storage_root(self) -> str: ...


class HasCheckpoint(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def checkpoint_location(self) -> str: ...


@dataclass(frozen=True)
class Location:
    """A normalised storage location: scheme, authority (the bucket; empty for files), segments."""

    scheme: str
    authority: str
    parts: tuple[str, ...]

    def __str__(self) -> str:
        path = "/".join(self.parts)
        if self.scheme == "file":
            return f"file:///{path}"
        return f"{self.scheme}://{self.authority}" + (f"/{path}" if path else "")

    def within(self, root: Location) -> bool:
        """This is ``root`` or lies below it, by whole segments (/a/root2 is not in /a/root)."""
        return (
            self.scheme == root.scheme
            and self.authority == root.authority
            and self.parts[: len(root.parts)] == root.parts
        )

    def strictly_within(self, root: Location) -> bool:
        return self.within(root) and len(self.parts) > len(root.parts)

    def child(self, *names: str) -> Location:
        return parse_location("/".join((str(self), *names)))

    def relative_to(self, root: Location) -> tuple[str, ...]:
        if not self.within(root):
            raise ValueError(f"{self} is not within {root}")
        return self.parts[len(root.parts) :]


def parse_location(text: str, what: str = "location") -> Location:
    """Parse and normalise ``text`` (an absolute path, ``file:``, ``hdfs://`` or ``s3a://``
    URI)."""
    if not isinstance(text, str) or not text:
        raise InvalidInput(f"{what} must not be empty")
    if text != text.strip():
        raise InvalidInput(f"{what} {text!r} must not start or end with whitespace")
    for char in text:
        if (char.isspace() and char != " ") or unicodedata.category(char) == "Cc":
            raise InvalidInput(f"{what} {text!r} must not contain control characters")
    if text.startswith("//"):  # Hadoop would read a host (authority) there
        raise InvalidInput(f"{what} {text!r} must not start with '//'")
    if text.startswith("/"):
        scheme, authority, path = "file", "", text
    else:
        match = _SCHEME.match(text)
        if match is None:
            raise InvalidInput(
                f"{what} {text!r} must be an absolute path, a file://, hdfs:// or s3a:// URI"
            )
        scheme, rest = match.group(1).lower(), match.group(2)
        if scheme == "file":
            authority, path = "", _file_path(rest, text, what)
        elif scheme == "s3a":
            authority, path = _s3a_parts(rest, text, what)
        elif scheme == "hdfs":
            authority, path = _hdfs_parts(rest, text, what)
        elif scheme in ("s3", "s3n"):
            raise InvalidInput(f"{what} {text!r}: use the s3a:// scheme (Hadoop's S3A connector)")
        else:
            raise InvalidInput(
                f"{what} {text!r}: scheme {scheme!r} is not supported "
                "(use file://, hdfs:// or s3a://)"
            )
    location = Location(scheme, authority, _normalise(path, text, what))
    if len(str(location)) > MAX_LOCATION_LENGTH:
        raise InvalidInput(f"{what} is longer than {MAX_LOCATION_LENGTH} characters")
    return location


def _file_path(rest: str, text: str, what: str) -> str:
    if rest.startswith("///"):
        return rest[2:]
    if rest.startswith("//"):
        host, slash, path = rest[2:].partition("/")
        if host.lower() != "localhost" or not slash:
            raise InvalidInput(f"{what} {text!r}: a file URI must not name a host")
        return "/" + path
    if rest.startswith("/"):
        return rest
    raise InvalidInput(f"{what} {text!r} must be absolute")


def _s3a_parts(rest: str, text: str, what: str) -> tuple[str, str]:
    if not rest.startswith("//"):
        raise InvalidInput(f"{what} {text!r} must look like s3a://bucket/prefix")
    bucket, _, path = rest[2:].partition("/")
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise InvalidInput(
            f"{what} {text!r}: {bucket!r} is not a valid bucket name "
            "(3-63 lowercase letters, digits, '.' and '-')"
        )
    return bucket, path


def _hdfs_parts(rest: str, text: str, what: str) -> tuple[str, str]:
    """``hdfs://namenode[:port]/path``: the NameNode is required (``hdfs:///path`` means
    whichever file system is the reader's default, which differs from cluster to cluster)."""
    if not rest.startswith("//"):
        raise InvalidInput(f"{what} {text!r} must look like hdfs://namenode:port/path")
    authority, _, path = rest[2:].partition("/")
    authority = authority.lower()
    port = authority.rpartition(":")[2] if ":" in authority else ""
    if not _NAMENODE.match(authority) or (port and not 1 <= int(port) <= 65535):
        raise InvalidInput(
            f"{what} {text!r}: {authority or 'an empty NameNode'!r} is not a NameNode "
            "(host[:port] or a nameservice)"
        )
    return authority, path


def _normalise(path: str, text: str, what: str) -> tuple[str, ...]:
    parts: list[str] = []
    for segment in path.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not parts:
                raise InvalidInput(f"{what} {text!r} climbs above its root with '..'")
            parts.pop()
            continue
        bad = _FORBIDDEN.intersection(segment)
        if bad:
            raise InvalidInput(
                f"{what} {text!r} must not contain {' '.join(sorted(bad))} in its path"
            )
        parts.append(segment)
    return tuple(parts)


def normalise_location(text: str, what: str = "location") -> str:
    return str(parse_location(text, what))


def normalise_root(text: str) -> str:
    """A cluster's storage root in its one written form; the file system root is refused."""
    root = parse_location(text, "storage_root")
    if root.scheme == "file" and not root.parts:
        raise InvalidInput("storage_root must not be the file system root")
    return str(root)


def overlapping_root(root: str, others: Iterable[HasStorageRoot]) -> HasStorageRoot | None:
    """The first of ``others`` whose root equals, contains or lies inside ``root``."""
    mine = parse_location(root, "storage_root")
    for other in others:
        theirs = parse_location(other.storage_root, "storage_root")
        if mine.within(theirs) or theirs.within(mine):
            return other
    return None


def default_checkpoint(cluster: HasStorageRoot, job_name: str) -> str:
    """``<cluster storage root>/<job name>/checkpoint``."""
    root = parse_location(cluster.storage_root, f"cluster {cluster.name!r} storage_root")
    return str(root.child(job_name, DEFAULT_CHECKPOINT_DIR))


def checkpoint_key(job_name: str, location: str, clusters: Iterable[HasStorageRoot]) -> Key | None:
    """Where a job checkpoints relative to the root its location lies under: ``(job,
    "checkpoint")`` without an explicit location; None for a location under no cluster's root
    (a store older than the rule may hold one: it overlaps nothing Drover can tell)."""
    if not location:
        return (job_name, DEFAULT_CHECKPOINT_DIR)
    parsed = parse_location(location, "checkpoint_location")
    for cluster in clusters:
        root = parse_location(cluster.storage_root, "storage_root")
        if parsed.strictly_within(root):
            return parsed.relative_to(root)
    return None


def checkpoint_area(key: Key) -> str:
    """A key's first directory: the job's own name unless a platform admin placed it."""
    area = key[0]
    if len(area) > MAX_AREA_LENGTH:
        raise InvalidInput(
            f"checkpoint_location: the directory {area[:40]!r}... under the storage root is "
            f"longer than {MAX_AREA_LENGTH} characters"
        )
    return area


def overlap(a: Key, b: Key) -> bool:
    """The same place, or one inside the other."""
    shorter = min(len(a), len(b))
    return a[:shorter] == b[:shorter]


def first_overlap(key: Key, others: Iterable[tuple[str, Key | None]]) -> str | None:
    """The name of the first of ``others`` (name, key) whose key overlaps ``key``."""
    for name, other in others:
        if other is not None and overlap(key, other):
            return name
    return None


def checkpoint_location(
    cluster: HasStorageRoot, job: HasCheckpoint, clusters: Iterable[HasStorageRoot] = ()
) -> str:
    """Where ``job`` writes its checkpoint when it runs on ``cluster``.

    No explicit location: ``<root>/<job>/checkpoint``. An explicit location inside ``cluster``'s
    root is used as it is; one inside another cluster's root (``clusters``; the job failed over
    from there) is moved to the same relative path under ``cluster``'s root. Anything else raises
    InvalidInput: Drover never hands out a writable path outside the cluster's own root.
    """
    if not job.checkpoint_location:
        return default_checkpoint(cluster, job.name)
    root = parse_location(cluster.storage_root, f"cluster {cluster.name!r} storage_root")
    location = parse_location(job.checkpoint_location, "checkpoint_location")
    if location.strictly_within(root):
        return str(location)
    for other in clusters:
        if other.name == cluster.name:
            continue
        theirs = parse_location(other.storage_root, f"cluster {other.name!r} storage_root")
        if location.strictly_within(theirs):
            return str(root.child(*location.relative_to(theirs)))
    raise InvalidInput(
        f"job {job.name!r}: checkpoint_location {job.checkpoint_location!r} is outside every "
        f"cluster's storage root; it must lie under {root}"
    )


def check_writable(
    path: str,
    cluster: HasStorageRoot,
    clusters: Iterable[HasStorageRoot],
    *,
    job: str | None = None,
) -> str:
    """``path`` normalised, if a job on ``cluster`` may write there; else InvalidInput.

    Refused: a path under another cluster's root (read-only there), a path outside ``cluster``'s
    root, and the root itself (a checkpoint needs its own directory). With ``job`` (a caller who
    is not a platform admin), also a path outside the job's own area ``<root>/<job>``
    (RefusedSubmission).
    """
    location = parse_location(path, "checkpoint_location")
    for other in clusters:
        if other.name == cluster.name:
            continue
        theirs = parse_location(other.storage_root, f"cluster {other.name!r} storage_root")
        if location.within(theirs):
            raise InvalidInput(
                f"checkpoint_location {str(location)!r} is under the storage root of cluster "
                f"{other.name!r} ({theirs}), where jobs of cluster {cluster.name!r} may only read"
            )
    root = parse_location(cluster.storage_root, f"cluster {cluster.name!r} storage_root")
    if not location.strictly_within(root):
        raise InvalidInput(
            f"checkpoint_location {str(location)!r} must lie under the storage root of cluster "
            f"{cluster.name!r} ({root})"
        )
    if job is not None and not location.within(root.child(job)):
        raise RefusedSubmission(
            f"checkpoint_location {str(location)!r} of job {job!r} must lie under "
            f"{root.child(job)} (the job's own directory); only a platform admin places a "
            "checkpoint elsewhere",
            field="checkpoint_location",
        )
    return str(location)


def readable_roots(cluster: HasStorageRoot, clusters: Iterable[HasStorageRoot]) -> tuple[str, ...]:
    """Roots a job on ``cluster`` may read: its own first, then the others' by name (read-only)."""
    others = sorted((c for c in clusters if c.name != cluster.name), key=lambda c: c.name)
    return tuple(normalise_location(c.storage_root, "storage_root") for c in (cluster, *others))


def check_readable(path: str, clusters: Iterable[HasStorageRoot]) -> str:
    """``path`` normalised if it lies under some cluster's root; else InvalidInput."""
    location = parse_location(path)
    for cluster in clusters:
        if location.within(parse_location(cluster.storage_root, "storage_root")):
            return str(location)
    raise InvalidInput(f"{str(location)!r} is outside every cluster's storage root")
