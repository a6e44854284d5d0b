"""Runs as a node records them, for tests that need a run (its fencing token) without a node."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from scheduler.core.backend import app_name_for
from scheduler.core.states import JobState
from scheduler.store import jobs as jobs_store
from scheduler.store import ledger


def record_run(session: Any, name: str, *, node_id: str = "n1", started: bool = False) -> Any:
    """A new run of job ``name`` as its owner records it before a submission (the run's record,
    with its fencing token). ``started``: the job is SUBMITTING with it as its current run, and
    then RUNNING (the job must be wanted RUNNING)."""
    job = jobs_store.get_job(session, name)
    run = ledger.create_run(
        session,
        job,
        cluster="local",
        node_id=node_id,
        owner_epoch=0,
        checkpoint_location=f"/ckpt/{name}",
        app_name_for=app_name_for,
    )
    if started:
        version = ledger.transition_job(
            session,
            job,
            JobState.SUBMITTING,
            reason="t",
            cause="test",
            node_id=node_id,
            current_run_id=run.id,
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
