"""A Structured Streaming checkpoint as a set of files: which batch it holds, which files that
batch needs, and how to bring a copy up to it without ever exposing a half-copied batch (pure).

Layout of a Spark 4 checkpoint (paths relative to ``checkpointLocation``; seen on pyspark 4.3
with the HDFS-backed and the RocksDB state stores, the rate, file and Kafka sources):

==============================================  =================================================
``metadata``                                    the query's id (JSON); no paths
``offsets/N``                                   what batch N reads (source offsets, batch
                                                watermark and timestamp, SQL conf); written
                                                *before* batch N runs. No checkpoint paths
``commits/N``                                   batch N is done (its state is written); written
                                                last. A batch is *complete* when ``offsets/N``
                                                and ``commits/N`` both exist
``sources/<s>/N`` and ``N.compact``             a source's own log (the file source's list of
                                                files per batch -- absolute paths of the *input*
                                                files, which live outside the checkpoint; the
                                                rate source's start time in ``0``)
``state/<op>/<part>/<v>.delta``, ``.snapshot``  the HDFS-backed state store: version ``v`` is
                                                the state after batch ``v - 1``
``state/<op>/<part>/<v>[_<id>].zip|.changelog`` the RocksDB state store (``_<id>``: checkpoint
                                                format v2); a zip names the ``SSTs/`` and
                                                ``logs/`` files it uses, by relative name
``state/<op>/<part>/SSTs/*``, ``logs/*``        RocksDB files shared between versions: written
                                                once under unique names, never changed
``state/<op>/_metadata/metadata``,              operator and state schema metadata (JSON)
``state/<op>/<part>/_metadata/schema``
``state/<op>/_metadata/v2/N``,                  transformWithState (operator metadata v2, state
``state/<op>/_stateSchema/<store>/N_<id>``      schema v3): written per batch; the v2 metadata
                                                holds **absolute paths** of the schema files
==============================================  =================================================

Hidden files are Hadoop's checksums (``.N.crc``) and Spark's temporary files
(``.N.<uuid>.tmp``): never part of a checkpoint's content. Only the transformWithState metadata
names absolute paths inside the checkpoint: :func:`relocate` rewrites them for a copy's new
location (every other file is copied byte for byte, and Spark resolves everything else relative
to the checkpoint location it is given).

**The cut.** A copy that Spark may resume from at batch ``N`` needs ``metadata``, ``offsets``
and ``commits`` up to ``N``, the sources' logs up to ``N``, state versions up to ``N + 1`` (with
the shared RocksDB files) and the operators' metadata (:func:`cut`). Spark itself writes offsets
before state and state before the commit; a copy must not expose ``offsets/N`` or ``commits/N``
before everything of batch ``N``: :func:`plan_sync` orders the copy so that every prefix of it
leaves the copy at a complete earlier batch, and takes back (commits first) the batches of a copy
whose history diverged from the source's before it copies anything of the new one.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

# --------------------------------------------------------------------------- files


@dataclass(frozen=True)
class FileInfo:
    """One file of a checkpoint: its size and last modification (nanoseconds since the epoch)."""

    size: int
    mtime_ns: int


#: relative path (``/``-separated) -> its size and modification time
Files = Mapping[str, FileInfo]


class Kind(enum.Enum):
    #: the query's ``metadata`` file
    QUERY = "query"
    OFFSETS = "offsets"
    COMMITS = "commits"
    #: a source's log file for one batch (``sources/<s>/N`` or ``N.compact``)
    SOURCE_LOG = "source-log"
    #: a state store version (delta, snapshot, RocksDB zip or changelog)
    STATE = "state"
    #: RocksDB files shared between versions (``SSTs/``, ``logs/``): immutable, unique names
    SHARED = "shared"
    #: operator metadata and state schemas; with a batch number when written per batch
    STATE_META = "state-meta"
    #: anything else a Spark version may write: copied, never interpreted
    OTHER = "other"
    #: not content: checksums, temporary files, hidden files, non-numeric log entries
    IGNORED = "ignored"


@dataclass(frozen=True)
class Entry:
    kind: Kind
    #: the batch the file belongs to (for STATE: the batch that wrote it, version - 1); None for
    #: files every batch shares
    batch: int | None = None


_NUMBER = re.compile(r"^(0|[1-9][0-9]*)$")
_SOURCE_LOG = re.compile(r"^(0|[1-9][0-9]*)(\.compact)?$")
_STATE_FILE = re.compile(r"^(0|[1-9][0-9]*)(_[^./]+)?\.(delta|snapshot|zip|changelog)$")
_SCHEMA_FILE = re.compile(r"^(0|[1-9][0-9]*)_[^/]+$")


def classify(path: str) -> Entry:
    """What the file at ``path`` (relative to the checkpoint location) is to a copy of it."""
    parts = path.split("/")
    if any(not p or p.startswith(".") for p in parts) or parts[-1].endswith((".crc", ".tmp")):
        return Entry(Kind.IGNORED)
    head, name = parts[0], parts[-1]
    if len(parts) == 1:
        return Entry(Kind.QUERY) if name == "metadata" else Entry(Kind.OTHER)
    if head in ("offsets", "commits"):
        if len(parts) != 2 or not _NUMBER.match(name):
            return Entry(Kind.IGNORED)  # Spark lists only numeric names there
        return Entry(Kind.OFFSETS if head == "offsets" else Kind.COMMITS, int(name))
    if head == "sources" and len(parts) == 3:
        match = _SOURCE_LOG.match(name)
        return Entry(Kind.SOURCE_LOG, int(match.group(1))) if match else Entry(Kind.OTHER)
    if head == "state" and len(parts) >= 3:
        return _classify_state(parts)
    return Entry(Kind.OTHER)


def _classify_state(parts: list[str]) -> Entry:
    # state/<op>/_metadata/..., state/<op>/_stateSchema/<store>/N_<id>, state/<op>/<part>/...
    name = parts[-1]
    if parts[2] == "_metadata":
        if len(parts) == 5 and parts[3] == "v2" and _NUMBER.match(name):
            return Entry(Kind.STATE_META, int(name))
        return Entry(Kind.STATE_META)
    if parts[2] == "_stateSchema":
        match = _SCHEMA_FILE.match(name)
        return Entry(Kind.STATE_META, int(match.group(1)) if match else None)
    if len(parts) == 4:
        match = _STATE_FILE.match(name)
        if match:
            return Entry(Kind.STATE, int(match.group(1)) - 1)
        return Entry(Kind.OTHER)
    if len(parts) >= 5 and parts[3] in ("SSTs", "logs"):
        return Entry(Kind.SHARED)
    if len(parts) >= 5 and parts[3] == "_metadata":
        return Entry(Kind.STATE_META)
    return Entry(Kind.OTHER)


def relocatable(path: str) -> bool:
    """Files whose content may name the checkpoint's own location (rewritten by a copy)."""
    parts = path.split("/")
    return parts[0] == "state" and "_metadata" in parts[2:]


# --------------------------------------------------------------------------- batches and cuts


def last_complete_batch(files: Iterable[str]) -> int | None:
    """The newest batch with both its offsets and its commit (None: no batch completed)."""
    offsets: set[int] = set()
    commits: set[int] = set()
    for path in files:
        entry = classify(path)
        if entry.kind is Kind.OFFSETS:
            offsets.add(entry.batch)  # type: ignore[arg-type]
        elif entry.kind is Kind.COMMITS:
            commits.add(entry.batch)  # type: ignore[arg-type]
    done = offsets & commits
    return max(done) if done else None


def in_cut(entry: Entry, batch: int) -> bool:
    """Whether a file is part of the checkpoint as of complete batch ``batch``."""
    if entry.kind is Kind.IGNORED:
        return False
    return entry.batch is None or entry.batch <= batch


def cut(files: Iterable[str], batch: int) -> frozenset[str]:
    """The files a copy needs to resume from complete batch ``batch``: every file of a batch up
    to it (state versions up to ``batch + 1``) and every file all batches share."""
    return frozenset(p for p in files if in_cut(classify(p), batch))


def commit_times(files: Files) -> dict[int, int]:
    """batch -> modification time (ns) of its commit."""
    times = {}
    for path, info in files.items():
        entry = classify(path)
        if entry.kind is Kind.COMMITS:
            times[entry.batch] = info.mtime_ns
    return times  # type: ignore[return-value]


# --------------------------------------------------------------------------- the sync plan


def copy_key(path: str) -> tuple[int, int, str]:
    """The order files are copied in: shared files first, then per batch its sources' logs, its
    operator metadata, the state version it wrote, its offsets, and its commit last."""
    entry = classify(path)
    rank = {
        Kind.SOURCE_LOG: 0,
        Kind.STATE_META: 1,
        Kind.STATE: 2,
        Kind.OFFSETS: 3,
        Kind.COMMITS: 4,
    }.get(entry.kind, 0)
    if entry.batch is None:
        # the query's metadata last among the shared files: the copy is not a checkpoint of
        # this query until its operators' metadata is there
        return (-1, 1 if entry.kind is Kind.QUERY else 0, path)
    return (entry.batch, rank, path)


def changed(source: FileInfo, copy: FileInfo, *, path: str, preserves_mtime: bool) -> bool:
    """Whether the copy of a file is not the source's current content.

    A storage that keeps the source's modification time on the copy (a file system):
    any other time means another write. A storage that stamps its own time (an object store):
    the source written after the copy was made. Relocated files differ in size on purpose.
    """
    if not relocatable(path) and source.size != copy.size:
        return True
    if preserves_mtime:
        return source.mtime_ns != copy.mtime_ns
    return source.mtime_ns > copy.mtime_ns


@dataclass(frozen=True)
class SyncPlan:
    """How to bring a copy to the source's complete batch ``batch``, step by step.

    1. ``retract``: delete these, in this order (commits before offsets, newest batch first):
       the copy's batches past ``batch``, and those whose offsets or commit differ from the
       source's (another history). After each delete the copy is at a complete earlier batch.
    2. ``copy``: copy these, in this order (:func:`copy_key`): a batch's offsets and commit only
       after everything it needs.
    3. ``remove``: then delete these: files the source no longer keeps (Spark purged them) or
       that are not part of the cut. Only once every copy succeeded.
    """

    batch: int | None
    retract: tuple[str, ...]
    copy: tuple[str, ...]
    remove: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not (self.retract or self.copy or self.remove)


def plan_sync(
    source: Files, copy: Files, batch: int | None = None, *, preserves_mtime: bool = True
) -> SyncPlan:
    """The plan that makes ``copy`` the cut of ``source`` at ``batch`` (default: the source's
    newest complete batch). With no complete batch at the source, the copy is emptied: callers
    that must not lose a copy (the replicator) check the source's batch first.

    A complete batch of the copy is taken back before anything it relies on is written: its
    own offsets or commit differ from the source's (another history), it is past ``batch``, or
    a file of that batch or an earlier one is to be written (changed, or one the copy's history
    lacks, e.g. a snapshot written since) -- or a file every batch shares changed (another
    query). Taken-back batches that the source still has are copied again, in order.
    """
    if batch is None:
        batch = last_complete_batch(source)
    wanted = cut(source, batch) if batch is not None else frozenset()
    to_copy = {
        p
        for p in wanted
        if p not in copy or changed(source[p], copy[p], path=p, preserves_mtime=preserves_mtime)
    }
    copied = last_complete_batch(copy)
    first_bad: int | None = None

    def bad(number: int) -> None:
        nonlocal first_bad
        first_bad = number if first_bad is None else min(first_bad, number)

    logs: list[tuple[int, int, str]] = []  # (batch, commits first, path) of the copy
    for path in copy:
        entry = classify(path)
        if entry.kind in (Kind.OFFSETS, Kind.COMMITS) and entry.batch is not None:
            logs.append((entry.batch, 0 if entry.kind is Kind.COMMITS else 1, path))
            if batch is None or entry.batch > batch:
                bad(entry.batch)
    if copied is not None:
        for path in to_copy:
            entry = classify(path)
            if entry.batch is None:
                if path in copy:  # a shared file changed: another query's checkpoint
                    bad(0)
            elif entry.batch <= copied:
                bad(max(entry.batch, 0))
    retract = [
        path
        for number, _, path in sorted(logs, key=lambda t: (-t[0], t[1]))
        if first_bad is not None and number >= first_bad
    ]
    retracted = set(retract)
    to_copy |= retracted & wanted
    return SyncPlan(
        batch=batch,
        retract=tuple(retract),
        copy=tuple(sorted(to_copy, key=copy_key)),
        remove=tuple(sorted(p for p in copy if p not in wanted and p not in retracted)),
    )


# --------------------------------------------------------------------------- relocation


def location_forms(location: str) -> tuple[str, ...]:
    """The ways Hadoop may write a normalised location (``scheduler.decisions.storage`` form) in
    text, longest first: ``file:///a/b`` also appears as ``file:/a/b`` (``Path.toString``) and as
    ``/a/b``."""
    if location.startswith("file:///"):
        path = location[len("file://") :]
        return (location, f"file:{path}", path)
    return (location,)


#: a location inside text ends at one of these (or at the end)
_AFTER = r"(?=[/\"'\s,\]}):]|$)"
#: and does not continue a longer path or word before it
_BEFORE = r"(?<![A-Za-z0-9_.~/-])"


def relocate(data: bytes, source: str, target: str) -> bytes:
    """``data`` with the source checkpoint's location replaced by the target's, in each form
    Hadoop writes it, whole path segments only (``/ck/a`` does not match ``/ck/ab`` nor
    ``/x/ck/a``), in one pass (a replaced location is never replaced again).

    Undecodable (binary) content is returned unchanged."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    olds = location_forms(source)
    news = location_forms(target)
    if len(news) < len(olds):  # another scheme: every form of the source becomes the target
        news = news + (news[0],) * (len(olds) - len(news))
    mapping = dict(zip(olds, news, strict=True))
    pattern = _BEFORE + "(" + "|".join(re.escape(o) for o in olds) + ")" + _AFTER
    result = re.sub(pattern, lambda m: mapping[m.group(1)], text)
    return result.encode("utf-8") if result != text else data


# --------------------------------------------------------------------------- lag


@dataclass(frozen=True)
class Lag:
    """How far a copy is behind its source."""

    #: the source's newest complete batch, and when its commit was written
    source_batch: int | None
    source_batch_at: datetime | None
    #: the copy's newest complete batch, and when the source committed it
    replica_batch: int | None
    replica_batch_at: datetime | None
    #: complete batches the source has and the copy has not
    batches: int
    #: when the source committed the oldest batch the copy is missing (None: none missing)
    oldest_missing_at: datetime | None

    def seconds(self, now: datetime) -> float:
        """Seconds of the source's committed work the copy is missing, as of ``now``: 0 when
        it holds the source's newest batch, else the age of the oldest batch it lacks."""
        if self.oldest_missing_at is None:
            return 0.0
        return max(0.0, (now - self.oldest_missing_at).total_seconds())


def _at(ns: int | None) -> datetime | None:
    return None if ns is None else datetime.fromtimestamp(ns / 1e9, UTC)


def lag(source: Files, replica_batch: int | None) -> Lag:
    """The lag of a copy at ``replica_batch`` behind ``source``. Spark numbers batches without
    gaps, so the copy misses the batches after its own up to the source's."""
    commits = commit_times(source)
    source_batch = last_complete_batch(source)
    if source_batch is None:
        return Lag(None, None, replica_batch, None, 0, None)
    at = _at(commits[source_batch])
    replica_at = _at(commits.get(replica_batch)) if replica_batch is not None else None
    if replica_batch is not None and replica_batch >= source_batch:
        return Lag(source_batch, at, replica_batch, replica_at, 0, None)
    floor = -1 if replica_batch is None else replica_batch
    # the oldest missing batch's commit; if Spark purged it, the oldest one still kept
    oldest = min(ns for batch, ns in commits.items() if batch > floor)
    return Lag(source_batch, at, replica_batch, replica_at, source_batch - floor, _at(oldest))
