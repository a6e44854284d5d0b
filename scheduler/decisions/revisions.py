"""Revisions of a job's spec, upgrades and rollbacks: the pure decisions.

Every spec change is a *revision*: revision ``n`` of a job is the whole spec as it was once its
``spec_version`` became ``n`` (creation is revision 1). A revision is never changed; a rollback
to revision ``m`` is one more spec change (revision ``n+1`` whose spec equals ``m``'s).

A spec change that touches what the running application was started with (:data:`RESTART_FIELDS`:
entrypoint, args, Spark conf, checkpoint location) while the job is to run is an **upgrade**: the
job's generation is bumped so its owner replaces the live run -- a graceful stop (the pipeline
finishes its micro-batch and exits; a kill after the grace period), then a new run of the new
spec from the same checkpoint. One application at a time holds throughout: the new run is
submitted only once the cluster confirmed the old one gone (``planning``).

An upgrade may carry a deadline (``rollback_after_seconds``). Its states::

    PENDING    the upgrade's deadline is set (jobs.upgrade_deadline), its new run not RUNNING
      -> DONE        a run of the upgrade's generation reached RUNNING: the deadline is cleared
      -> ROLL BACK   the deadline passed (or the restart budget of the new spec is spent) first:
                     the owner applies the previous revision as a new spec change (an event
                     says so), which is itself an upgrade without a deadline

:func:`upgrade_step` is that decision; the owner's ledger writes it (fenced).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scheduler.core.records import JobRecord
from scheduler.core.states import DesiredState, JobState

#: the spec fields a revision holds, in the order a diff lists them
SPEC_FIELDS: tuple[str, ...] = (
    "entrypoint",
    "args",
    "conf",
    "checkpoint_location",
    "team",
    "business",
    "priority",
    "replicate",
    "labels",
    "stall_after",
    "on_stall",
)
#: spec fields the running application was started with: changing one of them on a job that
#: runs replaces its run (an upgrade); the others take effect without a restart
RESTART_FIELDS = frozenset({"entrypoint", "args", "conf", "checkpoint_location"})
#: map fields, diffed key by key
_MAP_FIELDS = frozenset({"conf", "labels"})


def spec_of(job: JobRecord) -> dict[str, Any]:
    """The job's spec as a revision keeps it (JSON: lists, dicts, strings, numbers, null)."""
    return {
        "entrypoint": job.entrypoint,
        "args": list(job.args),
        "conf": dict(job.conf),
        "checkpoint_location": job.checkpoint_location,
        "team": job.team,
        "business": job.business,
        "priority": job.priority.value,
        "replicate": job.replicate,
        "labels": dict(job.labels),
        "stall_after": job.stall_after,
        "on_stall": job.on_stall.value,
    }


@dataclass(frozen=True)
class Change:
    """One difference between two specs: ``path`` is a field (``args``) or a key of a map field
    (``conf.spark.sql.shuffle.partitions``); ``before``/``after`` are absent (None with
    ``added``/``removed``) when the key exists on one side only."""

    path: str
    before: Any
    after: Any
    kind: str  # "changed" | "added" | "removed"


def diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """What changes from spec ``before`` to spec ``after``, field by field (map fields key by
    key, keys sorted). A field missing from an older revision counts as null."""
    changes: list[Change] = []
    for name in SPEC_FIELDS:
        old, new = before.get(name), after.get(name)
        if name in _MAP_FIELDS and isinstance(old or {}, dict) and isinstance(new or {}, dict):
            old_map: Mapping[str, Any] = old or {}
            new_map: Mapping[str, Any] = new or {}
            for key in sorted(set(old_map) | set(new_map)):
                path = f"{name}.{key}"
                if key not in old_map:
                    changes.append(Change(path, None, new_map[key], "added"))
                elif key not in new_map:
                    changes.append(Change(path, old_map[key], None, "removed"))
                elif old_map[key] != new_map[key]:
                    changes.append(Change(path, old_map[key], new_map[key], "changed"))
        elif old != new:
            changes.append(Change(name, old, new, "changed"))
    return changes


def changed_fields(before: Mapping[str, Any], after: Mapping[str, Any]) -> frozenset[str]:
    """The top-level spec fields whose values differ."""
    return frozenset(n for n in SPEC_FIELDS if before.get(n) != after.get(n))


def is_upgrade(job: JobRecord, fields: frozenset[str] | set[str]) -> bool:
    """Whether changing ``fields`` of ``job`` replaces its run: the job is to run (or still has
    a live run) and a field its application was started with changes."""
    if not RESTART_FIELDS & set(fields):
        return False
    return job.desired_state == DesiredState.RUNNING or job.state.has_live_run


def rollback_changes(current: Mapping[str, Any], target: Mapping[str, Any]) -> dict[str, Any]:
    """The spec changes that turn ``current`` into revision ``target`` (the fields that differ,
    with ``target``'s values); empty when they are equal."""
    return {n: target.get(n) for n in SPEC_FIELDS if current.get(n) != target.get(n)}


class UpgradeStep(enum.Enum):
    """What :func:`upgrade_step` decides for a job with a pending upgrade deadline."""

    WAIT = "wait"
    DONE = "done"
    ROLL_BACK = "roll-back"


def upgrade_step(job: JobRecord, now: datetime, *, given_up: bool) -> UpgradeStep | None:
    """The next step of the job's pending upgrade (None: no upgrade is pending).

    DONE once a run of the job's current generation is RUNNING (the upgrade reached RUNNING);
    ROLL_BACK once the deadline passed first, or the new spec's restart budget is spent
    (``given_up``: waiting would change nothing); else WAIT. A job no longer desired RUNNING
    ends the upgrade as DONE (there is nothing to reach)."""
    if job.upgrade_deadline is None:
        return None
    if job.desired_state != DesiredState.RUNNING:
        return UpgradeStep.DONE
    run = job.current_run
    if (
        run is not None
        and run.generation == job.generation
        and job.state == JobState.RUNNING
        and not run.state.is_final
    ):
        return UpgradeStep.DONE
    if job.upgrade_from is None:
        return UpgradeStep.DONE  # nothing to roll back to
    if given_up or now >= job.upgrade_deadline:
        return UpgradeStep.ROLL_BACK
    return UpgradeStep.WAIT
