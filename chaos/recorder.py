"""Record a chaos run's history from outside Drover (I/O; the records are ``chaos/history.py``).

Two pollers run in threads for the whole run:

- **clusters**: every ``app_interval`` seconds, each simulated cluster's ``GET /sim/drivers``
  (reachable also while the cluster is cut off from Drover): one ``AppSeen`` per Drover driver,
  alive or not. The job is read from the run tag ``drover:<job>:<run>`` the driver carries.
- **store**: every ``store_interval`` seconds, the ``jobs`` rows (desired and observed state,
  owner, owner epoch): a ``JobSeen`` when a job's states changed and a ``Claim`` when its owner
  or epoch changed. While the database is down the poll is skipped (and counted).

The operator thread adds ``WriteAcked`` and ``OperationAcked`` records itself (``acked``,
``operation_acked``). At the end ``finish`` reads the store once more: ``FinalJob`` (desired
state and arguments) for every job the run wrote, ``FinalOperation`` for every operation the
API acknowledged, one ``Action`` per run row (a submission, recorded by the fenced intent under
the epoch and node it names) and one per kill intent (the reconciler's event of the move to
``STOPPING``, which names the node and the epoch of the claim its fenced write proved). Records
are appended to the history file as they come, so a run that dies still leaves its history.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from chaos import history as h
from chaos.history import (
    Action,
    AppSeen,
    Claim,
    FinalJob,
    FinalOperation,
    History,
    JobSeen,
    OperationAcked,
    Record,
    WriteAcked,
)

TAG_PREFIX = "drover:"


def job_of_tag(tag: str) -> str | None:
    """``drover:<job>:<run>`` -> ``<job>`` (job names hold no ``:``)."""
    if not tag.startswith(TAG_PREFIX):
        return None
    job, sep, _ = tag[len(TAG_PREFIX) :].rpartition(":")
    return job if sep and job else None


def _epoch_seconds(value: datetime) -> float:
    return value.timestamp()


class Recorder:
    def __init__(
        self,
        path: Path,
        clusters: dict[str, str],
        database_url: str,
        *,
        app_interval: float = 0.2,
        store_interval: float = 0.25,
    ) -> None:
        self.path = path
        self.clusters = clusters  # name -> simulator URL
        self.engine = sa.create_engine(database_url, poolclass=sa.NullPool)
        self.app_interval = app_interval
        self.store_interval = store_interval
        self.history = History()
        self.store_misses = 0
        self.cluster_misses = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._poll_clusters, name="chaos-apps", daemon=True),
            threading.Thread(target=self._poll_store, name="chaos-store", daemon=True),
        ]
        self._last_job: dict[str, tuple[str, str]] = {}
        self._last_claim: dict[str, tuple[str | None, int]] = {}

    # -------------------------------------------------------------------------- records

    def add(self, records: Iterable[Record]) -> None:
        records = list(records)
        if not records:
            return
        with self._lock:
            for record in records:
                self.history.add(record)
            h.write(self.path, records)

    def acked(self, job: str, op: str, desired: str | None, spec: str | None = None) -> None:
        self.add([WriteAcked(time.time(), job, op, desired, spec)])

    def operation_acked(self, operation: int, kind: str, detail: str) -> None:
        self.add([OperationAcked(time.time(), operation, kind, detail)])

    # -------------------------------------------------------------------------- pollers

    def start(self) -> Recorder:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _poll_clusters(self) -> None:
        client = httpx.Client(timeout=2.0, trust_env=False)
        try:
            while not self._stop.is_set():
                for name, url in self.clusters.items():
                    try:
                        drivers = client.get(f"{url}/sim/drivers").json()
                    except (httpx.HTTPError, ValueError):
                        self.cluster_misses += 1
                        continue
                    now = time.time()
                    self.add(
                        AppSeen(now, name, d["app_id"], job, bool(d["alive"]))
                        for d in drivers
                        if (job := job_of_tag(d.get("tag") or "")) is not None
                    )
                self._stop.wait(self.app_interval)
        finally:
            client.close()

    def _poll_store(self) -> None:
        query = sa.text("SELECT name, desired_state, state, owner, owner_epoch FROM jobs")
        while not self._stop.is_set():
            try:
                with self.engine.connect() as conn:
                    rows = list(conn.execute(query).all())
            except sa.exc.SQLAlchemyError:
                self.store_misses += 1
            else:
                self._saw_jobs(time.time(), rows)
            self._stop.wait(self.store_interval)

    def _saw_jobs(self, now: float, rows: list[Any]) -> None:
        records: list[Record] = []
        for name, desired, state, owner, epoch in rows:
            if self._last_job.get(name) != (desired, state):
                self._last_job[name] = (desired, state)
                records.append(JobSeen(now, name, desired, state))
            if owner is not None and self._last_claim.get(name) != (owner, int(epoch)):
                self._last_claim[name] = (owner, int(epoch))
                records.append(Claim(now, name, owner, int(epoch)))
        self.add(records)

    # -------------------------------------------------------------------------- the end

    def seen_running(self, job: str, since: float) -> bool:
        """Whether ``job`` was RUNNING at ``since`` (its latest state before) or after it."""
        with self._lock:
            seen = [s for s in self.history.jobs if s.job == job]
        before = [s for s in seen if s.t <= since]
        if before and max(before, key=lambda s: s.t).observed == "RUNNING":
            return True
        return any(s.t > since and s.observed == "RUNNING" for s in seen)

    def finish(self, written: Iterable[str]) -> History:
        """Stop the pollers, read the store's final word, every run and kill; the history."""
        self.stop()
        with self.engine.connect() as conn:
            jobs = {
                name: (desired, args)
                for name, desired, args in conn.execute(
                    sa.text("SELECT name, desired_state, args FROM jobs")
                )
            }
            runs = conn.execute(
                sa.text(
                    "SELECT j.name, r.node_id, r.owner_epoch, r.created_at FROM runs r "
                    "JOIN jobs j ON j.id = r.job_id"
                )
            ).all()
            kills = conn.execute(
                sa.text(
                    "SELECT j.name, e.node_id, e.owner_epoch, e.at FROM job_events e "
                    "JOIN jobs j ON j.id = e.job_id "
                    "WHERE e.to_state = 'STOPPING' AND e.cause = 'reconciler'"
                )
            ).all()
            operations = {
                int(op_id): state
                for op_id, state in conn.execute(sa.text("SELECT id, state FROM operations"))
            }
            items: dict[int, list[str]] = {}
            for op_id, job, action, step, why, error in conn.execute(
                sa.text(
                    "SELECT operation_id, job_name, action, step, why, last_error "
                    "FROM operation_items ORDER BY operation_id, position"
                )
            ):
                items.setdefault(int(op_id), []).append(
                    f"{job} {action} -> {step}" + (f" ({error or why})" if error or why else "")
                )
        self.engine.dispose()
        final: list[Record] = [
            FinalJob(
                name,
                name in jobs,
                jobs[name][0] if name in jobs else None,
                _spec(jobs[name][1]) if name in jobs else None,
            )
            for name in sorted(set(written))
        ]
        acked_ops = sorted({o.operation for o in self.history.operations if o.operation > 0})
        final += [
            FinalOperation(
                op_id, op_id in operations, operations.get(op_id), "; ".join(items.get(op_id, []))
            )
            for op_id in acked_ops
        ]
        actions: list[Record] = [
            Action(_epoch_seconds(_aware(created)), name, node, int(epoch), "submit")
            for name, node, epoch, created in runs
        ]
        actions += [
            Action(
                _epoch_seconds(_aware(at)),
                name,
                node,
                None if epoch is None else int(epoch),
                "kill",
            )
            for name, node, epoch, at in kills
        ]
        self.add(final + actions)
        return self.history


def _spec(args: Any) -> str:
    """The checker's fingerprint of stored arguments (``chaos.faults.spec_of``)."""
    if isinstance(args, str | bytes):
        args = json.loads(args)
    return json.dumps(list(args or []))


def _aware(value: datetime) -> datetime:
    """The store keeps naive UTC datetimes."""
    from datetime import UTC

    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
