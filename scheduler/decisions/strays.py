"""Stray applications: a live application of a run Drover has already closed (pure).

A ResourceManager restarted with recovery on brings back the applications it knew; one whose
kill the restart interrupted comes back RUNNING although Drover has confirmed and closed its run
(or superseded it: a failover fenced the run while its cluster could not be reached, and the
cluster returned with its applications). Such an application is a second live application of its
job (invariant 1) that no owner looks at any more: its run is closed. The sweep
(``scheduler.loops.strays``) lists a cluster's Drover applications, reads their runs, and kills
those :func:`strays` names, recording each on its job.

An application is this deployment's only when its fence tag is the hash of the token of the run
its name and tags claim (``scheduler.backends.yarn.fence_tag``): another deployment on the same
cluster with the same job names and run ids is never touched. It is a stray only when that run
is closed (a final state): an open run belongs to its owner, whatever it is doing.

One node sweeps each cluster (:func:`sweeper`), so nodes do not kill and record the same stray at
once: among the live members of the cluster's *home group* (the first by name of the groups whose
primary or failover cluster it is; every member of that group sees the same members), the one at
``crc32(cluster name) % len(members)`` by node id.
"""

from __future__ import annotations

import zlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from scheduler.core.backend import AppInfo, parse_app_name


@dataclass(frozen=True)
class RunView:
    """What the sweep needs of one run from the store."""

    run_id: int
    job_name: str
    state: str
    final: bool
    #: the fence tag of the run's token (``scheduler.backends.yarn.fence_tag``)
    fence_tag: str


@dataclass(frozen=True)
class Stray:
    app_id: str
    job_name: str
    run_id: int
    run_state: str

    def reason(self, cluster: str) -> str:
        return (
            f"application {self.app_id} of run {self.run_id} (closed: {self.run_state}) is alive "
            f"again on cluster {cluster} (a ResourceManager that recovered its applications?): "
            "killed again"
        )


def run_ids(apps: Iterable[tuple[AppInfo, Collection[str]]]) -> list[int]:
    """The runs the listed applications claim to be (to read from the store)."""
    ids = set()
    for info, _ in apps:
        parsed = parse_app_name(info.app_name)
        if parsed is not None:
            ids.add(parsed[1])
    return sorted(ids)


def strays(
    apps: Iterable[tuple[AppInfo, Collection[str]]], runs: Mapping[int, RunView]
) -> list[Stray]:
    """The live applications of this deployment's closed runs."""
    found = []
    for info, tags in apps:
        if not info.state.is_alive:
            continue
        parsed = parse_app_name(info.app_name)
        if parsed is None:
            continue
        job, run_id = parsed
        run = runs.get(run_id)
        if run is None or run.job_name != job or run.fence_tag not in tags:
            continue  # not a run of this deployment
        if run.final:
            found.append(Stray(info.app_id or info.submission_id, job, run_id, run.state))
    return found


def sweeper(
    cluster: str, groups_of_cluster: Collection[str], members: Mapping[str, Collection[str]]
) -> str | None:
    """The node that sweeps ``cluster``, from the live ``members`` of the groups this node sees
    (None: this node does not see the cluster's home group, or it has no live member)."""
    if not groups_of_cluster:
        return None
    pool = sorted(members.get(min(groups_of_cluster), ()))
    if not pool:
        return None
    return pool[zlib.crc32(cluster.encode("utf-8")) % len(pool)]
