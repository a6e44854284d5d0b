"""Rows to records: the store hands out frozen records (scheduler.core.records), never ORM rows."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar, cast

from scheduler.core.backend import app_name_for
from scheduler.core.directive import Directive
from scheduler.core.records import (
    ClusterRecord,
    GroupRecord,
    JobRecord,
    RunRecord,
)
from scheduler.core.states import DesiredState, JobState, OnStall, Priority, RunState
from scheduler.decisions import catalog
from scheduler.store.models import Cluster, Group, Job, Run

RecordT = TypeVar("RecordT")
#: record class -> its field names
_FIELDS: dict[type, tuple[str, ...]] = {}


def from_row(record: type[RecordT], row: object, **given: Any) -> RecordT:
    """A ``record`` (a dataclass) of ``row``: each field is the row's attribute of the same name,
    but those ``given`` (a column of another name, a converted or computed value). The job and
    run records, read by the thousand, spell their fields out instead."""
    names = _FIELDS.get(record)
    if names is None:
        names = _FIELDS[record] = tuple(f.name for f in dataclasses.fields(cast(Any, record)))
    return record(**{name: getattr(row, name) for name in names if name not in given}, **given)


def values_of(record: object, **given: Any) -> dict[str, Any]:
    """The fields of a dataclass ``record`` by name (a row's columns of the same names), with
    ``given`` values added or replacing them."""
    fields = dataclasses.fields(cast(Any, record))
    return {**{f.name: getattr(record, f.name) for f in fields}, **given}


def run_record(run: Run, job_name: str) -> RunRecord:
    return RunRecord(
        id=run.id,
        job_name=job_name,
        attempt=run.attempt,
        generation=run.generation,
        cluster=run.cluster_name,
        node_id=run.node_id,
        owner_epoch=run.owner_epoch,
        fencing_token=run.fencing_token,
        # empty until the run is submitted (the ledger saves a statement on the intent)
        app_name=run.app_name or app_name_for(job_name, run.id),
        checkpoint_location=run.checkpoint_location,
        submission_id=run.submission_id,
        app_id=run.app_id,
        state=RunState(run.state),
        reason=run.reason,
        exit_code=run.exit_code,
        created_at=run.created_at,
        submitted_at=run.submitted_at,
        started_at=run.started_at,
        ended_at=run.ended_at,
        fence_checked_at=run.fence_checked_at,
        fenced_at=run.fenced_at,
        fence_superseded_at=run.fence_superseded_at,
        drain_deadline=run.drain_deadline,
        stop_batch=run.stop_batch,
        lease_until=run.lease_until,
        submit_intent_at=run.submit_intent_at,
        superseded_tokens=run.superseded_tokens or "",
    )


def job_record(job: Job, current_run: Run | None = None) -> JobRecord:
    return JobRecord(
        id=job.id,
        name=job.name,
        group=job.group_name,
        team=job.team,
        business=job.business,
        priority=Priority(job.priority),
        entrypoint=job.entrypoint,
        args=tuple(job.args or ()),
        conf=dict(job.conf or {}),
        checkpoint_location=job.checkpoint_location,
        desired_state=DesiredState(job.desired_state),
        state=JobState(job.state),
        state_reason=job.state_reason,
        cluster=job.cluster_name,
        current_run_id=job.current_run_id,
        generation=job.generation,
        attempts_reset_at=job.attempts_reset_at,
        not_before=job.not_before,
        owner=job.owner,
        owner_epoch=job.owner_epoch,
        version=job.version,
        spec_version=job.spec_version,
        created_at=job.created_at,
        updated_at=job.updated_at,
        current_run=run_record(current_run, job.name) if current_run is not None else None,
        replicate=job.replicate,
        labels=dict(job.labels or {}),
        directive=Directive.from_json(job.directive),
        stall_after=job.stall_after,
        on_stall=OnStall(job.on_stall or OnStall.ALERT),
        grace_seconds=job.grace_seconds,
        upgrade_deadline=job.upgrade_deadline,
        upgrade_from=job.upgrade_from,
    )


def cluster_record(c: Cluster) -> ClusterRecord:
    return from_row(
        ClusterRecord,
        c,
        health_reason=c.health_reason or "",
        artifact_roots=tuple(c.artifact_roots or ()),
        hadoop_conf_dir=c.hadoop_conf_dir or "",
    )


def group_record(g: Group) -> GroupRecord:
    return from_row(GroupRecord, g)


def cluster_spec(c: Cluster) -> catalog.ClusterSpec:
    return from_row(catalog.ClusterSpec, c, hadoop_conf_dir=c.hadoop_conf_dir or "")
