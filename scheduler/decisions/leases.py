"""Fence leases: how long a run's driver may go on committing without hearing from Drover. Pure.

Every fence answer that confirms a run's token (``GET /v1/jobs/{name}/fence``, asked by
``pipelines/drover_runtime.py`` before each micro-batch) also grants the run a *lease*: the
driver may commit until the lease ends, measured on its own monotonic clock from *before* it sent
the request, and stops committing (and exits) once it lapses without renewal. So a driver
stranded on a dead or cut-off cluster is gone, or harmless, once its last lease has lapsed, and
Drover may then start the job elsewhere without ever running it twice.

Drover records per run the latest end of a lease it may have granted (``runs.lease_until``),
coarsely, so that a check is not a store write: :func:`grant` extends the recorded end to
``now + L`` only when less than ``L/2`` of it remains, and otherwise answers with what remains of
the recorded end. Either way every answer's lease ends no later than the recorded end (a
property test checks it), and a run is written at most once per ``L/2`` seconds.

A run is *never treated as ended while a lease it holds may still be valid*: a run closed
without its cluster confirming that its application is gone (``LOST``: fenced while its cluster
could not be reached, forgotten by the cluster) may still have a driver that commits until its
recorded lease end. :func:`holds` says so, with a margin for the clocks of the nodes that
granted and that decide (the recorded end is the granting node's wall clock). Who asks:

- a failover's ``FENCING`` step waits for it (``scheduler.decisions.operations.failover``), also
  when the job was drained earlier and the failover only moves it;
- a job's owner submits no new run of the job, anywhere, while its last run holds one
  (``scheduler.decisions.planning``), and resubmits no run whose driver was granted one;
- a job whose last run holds one is not deleted (its name would be free for another job).

A run that never asked with a runtime that honours leases has no lease (``lease_until`` NULL):
the rules of self-fencing without a lease apply to it as before (superseded answer, blind limit,
or an operator's forced fence for a run that never checked in).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler.core.records import RunRecord
from scheduler.core.states import RunState

#: the default lease (seconds): a platform-wide Drover outage longer than this stops pipelines
DEFAULT_LEASE_S = 90.0
#: the default margin (seconds) for the clocks of the nodes that grant and that decide
DEFAULT_MARGIN_S = 5.0
#: the header a runtime that honours leases sends with its fence check
LEASE_HEADER = "X-Drover-Fence-Lease"
#: the exit code of a driver whose lease lapsed (EX_TEMPFAIL: Drover restarts it when back);
#: drover_runtime has the same number
LEASE_LAPSED_EXIT = 75


@dataclass(frozen=True)
class Grant:
    """What one confirming fence answer grants."""

    #: when the answer's lease ends (the answer carries ``ends - now`` in seconds)
    ends: datetime
    #: the run's new recorded lease end to write first (None: the recorded end covers it)
    record: datetime | None

    def seconds(self, now: datetime) -> float:
        """The lease the answer carries: seconds from ``now`` (>= 0)."""
        return max(0.0, (self.ends - now).total_seconds())


def grant(recorded: datetime | None, now: datetime, lease_s: float) -> Grant:
    """The lease a confirming answer at ``now`` grants, given the run's ``recorded`` lease end.

    Extends the recorded end to ``now + lease_s`` when less than half a lease of it remains (or
    none was recorded); else the answer grants what remains of it, at most ``lease_s``."""
    full = now + timedelta(seconds=lease_s)
    if recorded is None or (recorded - now).total_seconds() < lease_s / 2:
        return Grant(full, full)
    return Grant(min(recorded, full), None)


def unconfirmed_end(run: RunRecord) -> bool:
    """Whether ``run`` was closed without its cluster confirming its application gone (LOST:
    fenced, forgotten by the cluster, never found): its driver may be alive somewhere."""
    return run.state == RunState.LOST


def lapses_at(run: RunRecord, margin_s: float) -> datetime | None:
    """When every lease ``run`` may hold has surely lapsed (its recorded end plus the margin);
    None when it was never granted one."""
    if run.lease_until is None:
        return None
    return run.lease_until + timedelta(seconds=margin_s)


def holds(run: RunRecord | None, now: datetime, margin_s: float) -> datetime | None:
    """Until when ``run``'s driver may still commit under a lease although Drover no longer
    counts the run as live (closed LOST); None when it surely cannot (no lease, lapsed, or the
    cluster confirmed the application gone)."""
    if run is None or not run.state.is_final or not unconfirmed_end(run):
        return None
    return held_until(run, now, margin_s)


def held_until(run: RunRecord, now: datetime, margin_s: float) -> datetime | None:
    """Until when a lease granted to ``run`` may still be valid (plus the margin), whatever the
    run's state; None when none may be."""
    until = lapses_at(run, margin_s)
    return until if until is not None and now < until else None


def describe(run: RunRecord, until: datetime) -> str:
    """Why a run is waited for: its driver may hold a lease until ``until``."""
    return (
        f"run {run.id} on {run.cluster} ended without its cluster confirming it ({run.state}) "
        f"and its driver may hold a fence lease until {until.isoformat(timespec='seconds')} "
        "(recorded end plus the clock margin): it may still commit until then"
    )
