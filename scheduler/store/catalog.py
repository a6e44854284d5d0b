"""The catalog: clusters and scheduling groups (a group: the jobs bound to one primary cluster
and its failover cluster). Each function takes a session; the caller owns the transaction.
Changes are checked against the version the caller read (``If-Match``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session

from scheduler.core.clock import utcnow
from scheduler.core.errors import (
    AlreadyExists,
    Conflict,
    InvalidInput,
    NotFound,
)
from scheduler.core.paging import KeyPart, Window
from scheduler.core.records import (
    ClusterRecord,
    GroupRecord,
)
from scheduler.core.states import JobState
from scheduler.decisions import catalog, storage
from scheduler.store import paging
from scheduler.store.db import add_new, load_one
from scheduler.store.mapping import RecordT, cluster_record, cluster_spec, group_record
from scheduler.store.models import Cluster, Group, Job


def _spec_values(spec: catalog.ClusterSpec) -> dict[str, Any]:
    return {name: getattr(spec, name) for name in catalog.CLUSTER_FIELDS}


def _check_catalog_version(kind: str, row: Cluster | Group, expected_version: int | None) -> None:
    if expected_version is not None and row.version != expected_version:
        from scheduler.core.errors import PreconditionFailed

        raise PreconditionFailed(
            f"{kind} {row.name!r} is at version {row.version}, not {expected_version}"
        )


def load_cluster(session: Session, name: str, *, for_update: bool = False) -> Cluster:
    stmt = select(Cluster).where(Cluster.name == name)
    return load_one(session, stmt, f"no cluster named {name!r}", for_update=for_update)


def load_group(session: Session, name: str, *, for_update: bool = False) -> Group:
    stmt = select(Group).where(Group.name == name)
    return load_one(session, stmt, f"no group named {name!r}", for_update=for_update)


def ensure_cluster(session: Session, name: str, **fields: Any) -> ClusterRecord:
    """Create the cluster if it does not exist (existing ones are left as they are)."""
    cluster = session.get(Cluster, name)
    if cluster is None:
        cluster = Cluster(name=name, **fields)
        session.add(cluster)
        session.flush()
    return cluster_record(cluster)


def ensure_group(
    session: Session, name: str, primary_cluster: str, failover_cluster: str | None = None
) -> GroupRecord:
    group = session.get(Group, name)
    if group is None:
        group = Group(name=name, primary_cluster=primary_cluster, failover_cluster=failover_cluster)
        session.add(group)
        session.flush()
    return group_record(group)


def _page_by_name(
    session: Session, table: type[Cluster | Group], record: Callable[[Any], RecordT], window: Window
) -> tuple[list[RecordT], tuple[KeyPart, ...] | None]:
    """One page of ``table``'s rows by name, as records."""
    rows, next_key = paging.read_page(
        session, select(table), (table.name,), window, lambda row: (row.name,)
    )
    return [record(row) for row in rows], next_key


def get_cluster(session: Session, name: str) -> ClusterRecord:
    cluster = session.get(Cluster, name)
    if cluster is None:
        raise NotFound(f"no cluster named {name!r}")
    return cluster_record(cluster)


def list_clusters(session: Session) -> list[ClusterRecord]:
    return [cluster_record(c) for c in session.scalars(select(Cluster).order_by(Cluster.name))]


def page_clusters(
    session: Session, window: Window
) -> tuple[list[ClusterRecord], tuple[KeyPart, ...] | None]:
    """One page of the clusters by name."""
    return _page_by_name(session, Cluster, cluster_record, window)


def count_clusters(session: Session) -> int:
    return paging.count(session, select(Cluster.name))


def create_cluster(session: Session, name: str, spec: catalog.ClusterSpec) -> ClusterRecord:
    """Add a cluster; its storage root may neither contain nor lie inside another's (Conflict)."""
    catalog.validate_cluster_name(name)
    spec = catalog.validate_cluster(spec)
    if session.get(Cluster, name) is not None:
        raise AlreadyExists(f"a cluster named {name!r} already exists")
    _check_root_is_free(session, name, spec.storage_root)
    now = utcnow()
    cluster = Cluster(
        name=name,
        **_spec_values(spec),
        health=catalog.ClusterHealth.NORMAL.value,
        version=1,
        created_at=now,
        updated_at=now,
    )
    add_new(session, cluster, f"a cluster named {name!r} already exists")
    return cluster_record(cluster)


def update_cluster(
    session: Session, name: str, changes: Mapping[str, Any], *, expected_version: int | None
) -> ClusterRecord:
    """Change writable fields (``catalog.CLUSTER_FIELDS``); bumps the version if anything changed.

    Conflict when ``storage_root`` or ``kind`` would change while jobs are live on the cluster,
    or ``storage_root`` while a job's explicit checkpoint location lies under the old root.
    Checkpoints are never moved: a job started after the change begins under the new root.
    """
    cluster = load_cluster(session, name, for_update=True)
    _check_catalog_version("cluster", cluster, expected_version)
    spec = catalog.validate_cluster(catalog.spec_with(cluster_spec(cluster), dict(changes)))
    changed = {k: v for k, v in _spec_values(spec).items() if getattr(cluster, k) != v}
    if not changed:
        return cluster_record(cluster)
    if "storage_root" in changed or "kind" in changed:
        what = "storage_root" if "storage_root" in changed else "kind"
        busy = _live_jobs_on(session, cluster)
        if busy:
            raise Conflict(
                f"cannot change {what} of cluster {name!r} while jobs are live on it: "
                + _names(busy)
            )
    if "storage_root" in changed:
        _check_root_is_free(session, name, spec.storage_root)
        old_root = storage.parse_location(cluster.storage_root, "storage_root")
        pinned = [
            job_name
            for job_name, location in session.execute(
                select(Job.name, Job.checkpoint_location).where(Job.checkpoint_location != "")
            )
            if storage.parse_location(location).within(old_root)
        ]
        if pinned:
            raise Conflict(
                f"cannot change storage_root of cluster {name!r}: these jobs set a "
                f"checkpoint_location under it: {_names(pinned)}"
            )
    for key, value in changed.items():
        setattr(cluster, key, value)
    cluster.version += 1
    cluster.updated_at = utcnow()
    session.flush()
    return cluster_record(cluster)


def _check_root_is_free(session: Session, name: str, root: str) -> None:
    others = [cluster_record(c) for c in session.scalars(select(Cluster)) if c.name != name]
    clash = storage.overlapping_root(root, others)
    if clash is not None:
        raise Conflict(
            f"storage_root {root!r} overlaps the storage root of cluster {clash.name!r} "
            f"({clash.storage_root}): every cluster needs a root of its own"
        )


def _live_jobs_on(session: Session, cluster: Cluster) -> list[str]:
    """Jobs not at rest on ``cluster``, or queued in a group whose primary cluster it is."""
    at_rest = [s.value for s in (JobState.STOPPED, JobState.FINISHED, JobState.FAILED)]
    primary_of = select(Group.name).where(Group.primary_cluster == cluster.name)
    stmt = (
        select(Job.name)
        .where(
            Job.state.not_in(at_rest),
            (Job.cluster_name == cluster.name)
            | (Job.cluster_name.is_(None) & Job.group_name.in_(primary_of)),
        )
        .order_by(Job.name)
    )
    return list(session.scalars(stmt))


def _names(names: list[str], most: int = 5) -> str:
    shown = ", ".join(repr(n) for n in names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")


def get_group(session: Session, name: str) -> GroupRecord:
    return group_record(load_group(session, name))


def list_groups(session: Session) -> list[GroupRecord]:
    return [group_record(g) for g in session.scalars(select(Group).order_by(Group.name))]


def page_groups(
    session: Session, window: Window
) -> tuple[list[GroupRecord], tuple[KeyPart, ...] | None]:
    """One page of the groups by name."""
    return _page_by_name(session, Group, group_record, window)


def count_groups(session: Session) -> int:
    return paging.count(session, select(Group.name))


def _check_group_clusters(session: Session, primary: str, failover: str | None) -> None:
    catalog.check_group(primary, failover)
    for role, cluster in (("primary_cluster", primary), ("failover_cluster", failover)):
        if cluster is not None and session.get(Cluster, cluster) is None:
            raise InvalidInput(f"{role}: no cluster named {cluster!r}")


def create_group(
    session: Session, name: str, *, primary_cluster: str, failover_cluster: str | None = None
) -> GroupRecord:
    catalog.validate_group_name(name)
    _check_group_clusters(session, primary_cluster, failover_cluster)
    if session.get(Group, name) is not None:
        raise AlreadyExists(f"a group named {name!r} already exists")
    now = utcnow()
    group = Group(
        name=name,
        primary_cluster=primary_cluster,
        failover_cluster=failover_cluster,
        version=1,
        created_at=now,
        updated_at=now,
    )
    add_new(session, group, f"a group named {name!r} already exists")
    return group_record(group)


GROUP_FIELDS = frozenset({"primary_cluster", "failover_cluster"})


def update_group(
    session: Session, name: str, changes: Mapping[str, Any], *, expected_version: int | None
) -> GroupRecord:
    """Change a group's clusters. The primary cluster only changes while no job of the group is
    live (moving live jobs is a failover, not an edit)."""
    unknown = set(changes) - GROUP_FIELDS
    if unknown:
        raise InvalidInput(f"fields cannot be changed: {', '.join(sorted(unknown))}")
    group = load_group(session, name, for_update=True)
    _check_catalog_version("group", group, expected_version)
    primary = changes.get("primary_cluster", group.primary_cluster)
    failover = changes.get("failover_cluster", group.failover_cluster)
    if primary is None:
        raise InvalidInput("primary_cluster cannot be null")
    _check_group_clusters(session, primary, failover)
    if (primary, failover) == (group.primary_cluster, group.failover_cluster):
        return group_record(group)
    if primary != group.primary_cluster:
        at_rest = [s.value for s in (JobState.STOPPED, JobState.FINISHED, JobState.FAILED)]
        live = list(
            session.scalars(
                select(Job.name)
                .where(Job.group_name == name, Job.state.not_in(at_rest))
                .order_by(Job.name)
            )
        )
        if live:
            raise Conflict(
                f"cannot change the primary cluster of group {name!r} while its jobs are live "
                f"({_names(live)}); stop them or run a failover"
            )
    group.primary_cluster = primary
    group.failover_cluster = failover
    group.version += 1
    group.updated_at = utcnow()
    session.flush()
    return group_record(group)


def delete_group(session: Session, name: str, *, expected_version: int | None) -> GroupRecord:
    """Delete an empty group. Refused (Conflict) while any job, live or at rest, belongs to it:
    jobs name their group, and deleting one must never orphan or cascade to them. The group's
    membership generations stay: a group recreated under the same name keeps growing epochs."""
    group = load_group(session, name, for_update=True)
    _check_catalog_version("group", group, expected_version)
    jobs = list(
        session.scalars(select(Job.name).where(Job.group_name == name).order_by(Job.name).limit(6))
    )
    if jobs:
        total = session.scalar(select(func.count()).select_from(Job).where(Job.group_name == name))
        raise Conflict(
            f"group {name!r} still has {total} job(s) ({_names(jobs)}): delete them or move "
            "them to another group first"
        )
    record = group_record(group)
    session.delete(group)
    session.flush()
    return record


def validate_checkpoint_location(
    session: Session, group: str, location: str, *, job: str | None = None
) -> str:
    """A job's explicit checkpoint location, normalised; "" stays "" (the cluster default).

    It must lie strictly under the storage root of the group's primary cluster and under no
    other cluster's root (``storage.check_writable``), and with ``job`` (a caller who is not a
    platform admin) in that job's own area; InvalidInput otherwise.
    """
    if not location:
        return ""
    row = session.get(Group, group)
    if row is None:
        raise InvalidInput(f"no group named {group!r}")
    clusters = list_clusters(session)
    primary = next(c for c in clusters if c.name == row.primary_cluster)
    return storage.check_writable(location, primary, clusters, job=job)


def set_artifact_roots(
    session: Session, name: str, roots: list[str], *, expected_version: int | None = None
) -> ClusterRecord:
    """Replace a cluster's artifact roots (bumps its version when they change)."""
    cluster = load_cluster(session, name, for_update=True)
    _check_catalog_version("cluster", cluster, expected_version)
    if list(cluster.artifact_roots or []) != roots:
        cluster.artifact_roots = list(roots)
        cluster.version += 1
        cluster.updated_at = utcnow()
        session.flush()
    return cluster_record(cluster)


_GROUPS = Group.__table__
_PRIMARY = Cluster.__table__.alias("primary_of_group")
_FAILOVER = Cluster.__table__.alias("failover_of_group")
#: a group's clusters and their artifact roots, as columns beside its name (:func:`roots_of_group`
#: reads them from a row); a cluster's name is None when the catalog has none such
GROUP_ROOTS_COLUMNS = (
    _GROUPS.c.primary_cluster,
    _PRIMARY.c.name.label("primary_found"),
    _PRIMARY.c.artifact_roots.label("primary_roots"),
    _GROUPS.c.failover_cluster,
    _FAILOVER.c.name.label("failover_found"),
    _FAILOVER.c.artifact_roots.label("failover_roots"),
)
#: what :data:`GROUP_ROOTS_COLUMNS` select from
GROUP_ROOTS_FROM = _GROUPS.outerjoin(
    _PRIMARY, _PRIMARY.c.name == _GROUPS.c.primary_cluster
).outerjoin(_FAILOVER, _FAILOVER.c.name == _GROUPS.c.failover_cluster)
#: groups' clusters and their artifact roots, one statement (the submission check of a spec
#: change runs it; a batch of creations reads the same columns among its facts)
_GROUP_ROOTS = (
    select(_GROUPS.c.name, *GROUP_ROOTS_COLUMNS)
    .select_from(GROUP_ROOTS_FROM)
    .where(_GROUPS.c.name.in_(bindparam("names", expanding=True)))
)


def roots_of_group(row: Any) -> dict[str, tuple[str, ...]]:
    """cluster -> artifact roots of a group's primary and failover clusters, from a row with the
    columns of :data:`GROUP_ROOTS_COLUMNS`. A group naming a cluster the catalog lacks maps to no
    clusters: the submission policy has no roots to check a job against."""
    roots: dict[str, tuple[str, ...]] = {}
    for name, cluster, artifact_roots in (
        (row.primary_cluster, row.primary_found, row.primary_roots),
        (row.failover_cluster, row.failover_found, row.failover_roots),
    ):
        if not name:
            continue
        if cluster is None:
            return {}
        roots[name] = tuple(artifact_roots or ())
    return roots


def artifact_roots_of_groups(
    session: Session, groups: Iterable[str]
) -> dict[str, dict[str, tuple[str, ...]]]:
    """group -> cluster -> artifact roots (:func:`roots_of_group`), for those of ``groups`` that
    exist (one statement)."""
    rows = session.connection().execute(_GROUP_ROOTS, {"names": sorted(set(groups))})
    return {row.name: roots_of_group(row) for row in rows}
