"""Stray applications: a live application of a run Drover has already closed, or a second one of
a run still open (pure).

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
is closed (a final state): an open run belongs to its owner, whatever it is doing -- with one
exception, the *duplicate*.

A duplicate is a second live application of an open run: the cluster created the driver of a
submission whose outcome was unknown (a request that timed out, a node that died after sending
it) after the run was submitted again with a fresh token, or two drivers of the run were listed
when the owner adopted one. The run's recorded submission id names the one its owner follows;
another live application that carries the run's tag and one of the run's tokens -- the current
one's fence tag, or one of a token a reissue superseded (the run keeps their digests) -- is a
duplicate and is killed. Its token was superseded, so a self-fencing pipeline would stop at its
next check, but a plain pipeline would run twice (invariant 1). A run with no recorded
submission id has no duplicate yet: its owner adopts one of its applications first (``find``).

Where the tags come from: YARN keeps them with the application; a Spark standalone driver
carries its fence tag in its launch command (``spark.drover.fenceTag``). An application without
a fence tag of this deployment's run (another deployment's, or a driver submitted before Drover
passed the tag) is never touched.

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
    #: the submission id recorded with the run (None: none yet)
    submission_id: str | None = None
    #: the fence tags of the run's superseded tokens (its reissues replaced them)
    superseded_tags: frozenset[str] = frozenset()

    def carried_by(self, tags: Collection[str]) -> bool:
        """Whether an application with ``tags`` was given one of this run's tokens."""
        return self.fence_tag in tags or not self.superseded_tags.isdisjoint(tags)


@dataclass(frozen=True)
class Stray:
    app_id: str
    job_name: str
    run_id: int
    run_state: str

    #: the handle to kill it by (a driver id on a standalone master; empty: ``app_id``)
    submission_id: str = ""
    #: a duplicate of an open run: the submission id its run has recorded (empty: a stray of
    #: a closed run)
    duplicate_of: str = ""

    @property
    def handle(self) -> str:
        """What the backend's ``kill`` takes."""
        return self.submission_id or self.app_id

    def reason(self, cluster: str) -> str:
        if self.duplicate_of:
            return (
                f"application {self.app_id} is a second live application of run {self.run_id} "
                f"({self.run_state}, submitted as {self.duplicate_of}) on cluster {cluster}: "
                "a submission whose outcome was unknown reached the cluster late; killed"
            )
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
    """The live applications of this deployment's closed runs, and the duplicates of its open
    runs (see the module docstring). ``apps``: one listing of one cluster, with each
    application's tags; ``runs``: read after the listing (a submission recorded meanwhile is
    seen)."""
    found = []
    for info, tags in apps:
        if not info.state.is_alive:
            continue
        parsed = parse_app_name(info.app_name)
        if parsed is None:
            continue
        job, run_id = parsed
        run = runs.get(run_id)
        if run is None or run.job_name != job:
            continue  # not a run of this deployment
        if not run.carried_by(tags):
            continue  # not given a token of this run: another deployment's
        handle = info.app_id or info.submission_id
        if run.final:
            found.append(Stray(handle, job, run_id, run.state, submission_id=info.submission_id))
            continue
        recorded = run.submission_id
        if recorded is None or recorded == info.submission_id:
            continue  # the run's own application, or one its owner adopts first
        found.append(
            Stray(
                handle,
                job,
                run_id,
                run.state,
                submission_id=info.submission_id,
                duplicate_of=recorded,
            )
        )
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
