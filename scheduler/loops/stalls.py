"""The owner's stall check of one group: one round reads the jobs whose verdict may change,
decides (:func:`scheduler.decisions.stalls.decide_stall`, pure) and records each change in a fenced
transaction (an event; with ``on_stall = restart`` a new generation, so the reconcile loop
replaces the run). Blocking I/O: the reconciler actor runs it in a worker thread after a tick,
every ``DROVER_STALL_CHECK_INTERVAL`` seconds.

Cost: a round reads only the jobs this node owns in the group whose current run has not moved
for ``MIN_STALL_AFTER`` seconds while RUNNING, or is marked stalled; a healthy fleet with
triggers of a few seconds reads (almost) nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler.core.clock import utcnow
from scheduler.core.logs import log_context
from scheduler.core.ownership import Claim
from scheduler.core.states import JobState, OnStall
from scheduler.decisions.stalls import (
    MIN_STALL_AFTER,
    StallPolicy,
    decide_stall,
    effective_stall_after,
)
from scheduler.store import progress as progress_store
from scheduler.store.db import Store

log = logging.getLogger("drover.stalls")


@dataclass
class StallRound:
    checked: int = 0
    stalled: int = 0
    recovered: int = 0
    restarted: int = 0
    #: no claim: nothing was looked at
    paused: bool = False
    seconds: float = 0.0


class StallWatcher:
    def __init__(
        self,
        store: Store,
        *,
        group: str,
        policy: StallPolicy,
        max_restarts: int,
        restart_window: float,
        clock: Callable[[], datetime] = utcnow,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._group = group
        self._policy = policy
        self._max_restarts = max_restarts
        self._restart_window = timedelta(seconds=restart_window)
        self._clock = clock
        self._monotonic = monotonic

    def round(self, claim: Claim | None) -> StallRound:
        started = time.perf_counter()
        done = StallRound()
        if claim is None:
            done.paused = True
            return done
        now = self._clock()
        with self._store.session() as session:
            candidates = progress_store.stall_candidates(
                session,
                self._group,
                claim.fence,
                quiet_before=now - timedelta(seconds=MIN_STALL_AFTER),
            )
        done.checked = len(candidates)
        for candidate in candidates:
            with log_context(group=self._group, job=candidate.job, run=candidate.run_id):
                try:
                    self._check(claim, candidate, now, done)
                except Exception:  # one job's error never stops the others
                    log.exception("stall check of job %s failed", candidate.job)
        done.seconds = time.perf_counter() - started
        return done

    def _check(
        self,
        claim: Claim,
        candidate: progress_store.StallCandidate,
        now: datetime,
        done: StallRound,
    ) -> None:
        progress = candidate.progress
        stall_after = effective_stall_after(
            candidate.stall_after, progress.trigger_interval_ms, self._policy
        )
        restarts = 0
        if candidate.on_stall == OnStall.RESTART and progress.stalled_since is None:
            with self._store.session() as session:
                restarts = progress_store.stall_restarts(
                    session, candidate.job_id, now - self._restart_window
                )
        change = decide_stall(
            running=candidate.state == JobState.RUNNING,
            progress=progress,
            stall_after=stall_after,
            run_started_at=candidate.run_started_at,
            now=now,
            on_stall=candidate.on_stall,
            restarts_in_window=restarts,
            max_restarts=self._max_restarts,
        )
        if change is None:
            return
        if not claim.valid(self._monotonic()):
            return  # the lease ran out (a frozen process): the next round, with a fresh claim
        with self._store.transaction() as session:
            landed = progress_store.record_stall(session, claim.fence, candidate, change, now=now)
        if not landed:
            return
        if change.kind == "stalled":
            done.stalled += 1
            done.restarted += int(change.restart)
            log.warning("job %s: %s", candidate.job, change.reason)
        else:
            done.recovered += 1
            log.info("job %s: %s", candidate.job, change.reason)
