"""Whether a job's pipeline fences itself (checks its run's fencing token before each commit
and exits once superseded), as far as Drover can see -- a pure decision on the job's current
run.

A pipeline fences itself by asking ``GET /v1/jobs/{name}/fence?run_id=<its run>`` before it
commits (``pipelines/drover_runtime.py`` asks as soon as its session exists, then before every
micro-batch). The endpoint records each run's first such check (``fence_checked_at``). A plain
PySpark pipeline never asks. It is started, stopped, restarted and adopted like any other, but
nothing in it stops a driver stranded on a partitioned cluster: only a confirmed kill ends it.
So the job says which kind it runs:

    current run                                                   self_fencing
    none                                                          None (nothing to tell)
    has checked in                                                True
    no check, RUNNING (or ran) for at least CHECK_IN_GRACE_S      False: no fence checks seen
    no check, not started yet / running for less than the grace   None (too early to tell)

The grace covers a pipeline that checks only at its first micro-batch (drover_runtime checks at
start, within a second or two of the application's registration).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from scheduler.core.records import RunRecord

#: how long a run may run without a fence check before it is reported as not self-fencing
CHECK_IN_GRACE_S = 60.0
NOT_SELF_FENCING = "no fence checks seen: not self-fencing"


def self_fencing(
    run: RunRecord | None, now: datetime, grace_s: float = CHECK_IN_GRACE_S
) -> bool | None:
    """True: the run checks its fence; False: it has run for ``grace_s`` without a check
    (:data:`NOT_SELF_FENCING`); None: no run, or too early to tell."""
    if run is None:
        return None
    if run.fence_checked_at is not None:
        return True
    if run.started_at is None:
        return None
    until = run.ended_at or now
    return False if (until - run.started_at).total_seconds() >= grace_s else None


def self_fencing_settles_at(
    run: RunRecord | None, grace_s: float = CHECK_IN_GRACE_S
) -> datetime | None:
    """The instant from which :func:`self_fencing` of ``run`` may answer differently as time
    passes (its answer before it does not depend on the time asked), None when it never will:
    only a started, unfinished run without a check turns from None to False, at the grace's
    end. (A change of the run itself is a different run record, not the passing of time.)"""
    if run is None or run.fence_checked_at is not None or run.started_at is None or run.ended_at:
        return None
    return run.started_at + timedelta(seconds=grace_s)
