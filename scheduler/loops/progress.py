"""The progress sink of a node's API process: what pipelines report with their fence checks,
buffered and written to the store in batches.

The fence check runs before every micro-batch of every pipeline, so it must stay cheap: taking a
report is a dictionary update under a lock, no I/O. A flusher thread writes what arrived every
``flush_interval`` seconds in one transaction (the latest progress of each run that reported,
merged with what the store holds by :func:`scheduler.decisions.stalls.merge`, in one upsert), adds a
history sample for a job at most every ``sample_interval`` seconds, and forgets samples older
than ``keep`` seconds. A node that dies loses at most one interval of reports, which the next
batch's report replaces (progress is telemetry; nothing else depends on a lost report).

With ``flush_interval`` 0 every report is written at once (tests, tools).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from scheduler.core.clock import utcnow
from scheduler.core.records import ProgressRecord
from scheduler.decisions.stalls import ProgressReport, merge
from scheduler.store import progress as progress_store
from scheduler.store.db import Store

log = logging.getLogger("drover.progress")

#: reports kept per run between two flushes (older ones add nothing the newest does not)
PENDING_PER_RUN = 8
#: old samples are pruned once every this many flushes
PRUNE_EVERY = 60


@dataclass
class SinkStats:
    """What the sink did (the API process's metrics)."""

    accepted: int = 0
    invalid: int = 0
    flushes: int = 0
    flush_errors: int = 0
    last_flush_seconds: float = 0.0
    pending_runs: int = 0
    dropped: int = 0


class ProgressSink:
    def __init__(
        self,
        store: Store,
        *,
        flush_interval: float = 2.0,
        sample_interval: float = 30.0,
        keep: float = 3600.0,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self._store = store
        self._flush_interval = flush_interval
        self._sample_interval = sample_interval
        self._keep = keep
        self._clock = clock
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        #: run id -> (job id, [(report, received at)])
        self._pending: dict[int, tuple[int, list[tuple[ProgressReport, datetime]]]] = {}
        #: job id -> when this node last took a history sample of it
        self._sampled: dict[int, datetime] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.stats = SinkStats()

    # -- the fence check's side (cheap) ------------------------------------------------------

    def report(self, run_id: int, job_id: int, report: ProgressReport) -> None:
        now = self._clock()
        with self._lock:
            entry = self._pending.get(run_id)
            if entry is None:
                entry = self._pending[run_id] = (job_id, [])
            reports = entry[1]
            reports.append((report, now))
            if len(reports) > PENDING_PER_RUN:
                del reports[0]
                self.stats.dropped += 1
            self.stats.accepted += 1
            self.stats.pending_runs = len(self._pending)
        if self._flush_interval <= 0:
            self.flush()
        else:
            self._ensure_thread()

    def invalid(self) -> None:
        with self._lock:
            self.stats.invalid += 1

    # -- the flusher -------------------------------------------------------------------------

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            with self._lock:
                if self._thread is None or not self._thread.is_alive():
                    self._stop.clear()
                    self._thread = threading.Thread(
                        target=self._run, name="progress-flush", daemon=True
                    )
                    self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._flush_interval):
            try:
                self.flush()
            except Exception:  # the loop never dies; the reports are retried next round
                log.exception("writing the pipelines' progress failed")

    def flush(self) -> int:
        """Write what arrived since the last flush; returns how many runs were written."""
        with self._flush_lock:
            with self._lock:
                pending, self._pending = self._pending, {}
                self.stats.pending_runs = 0
            if not pending:
                return 0
            started = time.perf_counter()
            try:
                written = self._write(pending)
            except Exception:
                with self._lock:  # put them back (newer reports of the same runs come after)
                    for run_id, (job_id, reports) in pending.items():
                        entry = self._pending.setdefault(run_id, (job_id, []))
                        entry[1][:0] = reports
                        del entry[1][:-PENDING_PER_RUN]
                    self.stats.flush_errors += 1
                    self.stats.pending_runs = len(self._pending)
                raise
            self.stats.flushes += 1
            self.stats.last_flush_seconds = time.perf_counter() - started
            return written

    def _write(self, pending: dict[int, tuple[int, list[tuple[ProgressReport, datetime]]]]) -> int:
        now = self._clock()
        with self._store.transaction() as session:
            known = progress_store.load(session, pending)
            merged: list[ProgressRecord] = []
            for run_id, (job_id, reports) in pending.items():
                record = known.get(run_id)
                for report, at in reports:
                    record = merge(record, report, run_id=run_id, job_id=job_id, now=at)
                assert record is not None
                merged.append(record)
            progress_store.save(session, merged)
            due = [
                r
                for r in merged
                if r.batch_id is not None
                and now - self._sampled.get(r.job_id, datetime.min.replace(tzinfo=now.tzinfo))
                >= timedelta(seconds=self._sample_interval)
            ]
            progress_store.add_samples(session, due, now)
            if self.stats.flushes % PRUNE_EVERY == 0:
                progress_store.prune_samples(session, now - timedelta(seconds=self._keep))
        for record in due:
            self._sampled[record.job_id] = now
        if len(self._sampled) > 100_000:  # jobs long gone
            self._sampled.clear()
        return len(merged)

    def close(self) -> None:
        """Stop the flusher after writing what is pending."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self.flush()
        except Exception:
            log.exception("the last progress reports could not be written")
