"""Runs as a node records them, for tests that need a run (its fencing token) without a node."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from scheduler.core.backend import app_name_for
from scheduler.core.states import JobState
from scheduler.store import jobs as jobs_store
from scheduler.store import ledger


def record_run(
    session: Any,
    name: str,
    *,
    node_id: str = "n1",
    started: bool = False,
    checkpoint_location: str | None = None,
) -> Any:
    """A new run of job ``name`` as its owner records it before a submission (the run's record,
    with its fencing token). ``started``: the job is SUBMITTING with it as its current run, and
    then RUNNING (the job must be wanted RUNNING). ``checkpoint_location``: the run's, when not
    ``/ckpt/<name>``."""
    checkpoint = checkpoint_location or f"/ckpt/{name}"
    if not started:
        return _create_run(session, jobs_store.get_job(session, name), node_id, checkpoint)
    job, run, version = submitting_run(
        session, name, node_id=node_id, checkpoint_location=checkpoint
    )
    ledger.transition_job(
        session,
        replace(job, state=JobState.SUBMITTING, version=version),
        JobState.RUNNING,
        reason="t",
        cause="test",
        node_id=node_id,
    )
    return run


def submitting_run(
    session: Any, name: str, *, node_id: str = "n1", checkpoint_location: str | None = None
) -> tuple[Any, Any, int]:
    """What node ``node_id`` writes when it submits job ``name`` (wanted RUNNING): a run, and the
    job SUBMITTING with it as its current run. (The job read before, the run, the new version.)"""
    job = jobs_store.get_job(session, name)
    run = _create_run(session, job, node_id, checkpoint_location or f"/ckpt/{name}")
    version = ledger.transition_job(
        session,
        job,
        JobState.SUBMITTING,
        reason="t",
        cause="test",
        node_id=node_id,
        current_run_id=run.id,
    )
    return job, run, version


def _create_run(session: Any, job: Any, node_id: str, checkpoint_location: str) -> Any:
    return ledger.create_run(
        session,
        job,
        cluster="local",
        node_id=node_id,
        owner_epoch=0,
        checkpoint_location=checkpoint_location,
        app_name_for=app_name_for,
    )
