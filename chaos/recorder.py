"""Record a chaos run's history from outside Drover (I/O; the records are ``chaos/history.py``).

Pollers run in threads for the whole run:

- **clusters**: every ``app_interval`` seconds, each simulated cluster's ``GET /sim/drivers``
  (reachable also while the cluster is cut off from Drover): one ``AppSeen`` per Drover driver,
  alive or not. The job is read from the run tag ``drover:<job>:<run>`` the driver carries. On
  real clusters (``masters``), each master's ``GET /json/`` (the master itself, not the proxy
  Drover reaches it through): one ``AppSeen`` per live application named after a job.
- **processes** (real clusters, ``drivers``): every ``process_interval`` seconds the driver
  processes on the machine, one ``AppSeen`` (``source`` ``process``) per live driver.
- **store**: every ``store_interval`` seconds, the ``jobs`` rows (desired and observed state,
  owner, owner epoch): a ``JobSeen`` when a job's states changed and a ``Claim`` when its owner
  or epoch changed. While the database is down the poll is skipped (and counted).

A poll that fails is a ``PollMissed`` record (the checker asks whether a fault explains it).
The operator thread adds ``WriteAcked`` and ``OperationAcked`` records itself (``acked``,
``operation_acked``). At the end ``finish`` reads the jobs' commit logs (``commit_logs``: the
sample pipeline's ``--commit-log`` files, ``BatchCommit`` records) and the store once more:
``FinalJob`` (desired
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
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from chaos import history as h
from chaos.history import (
    Action,
    AppSeen,
    BatchCommit,
    Claim,
    FinalJob,
    FinalOperation,
    History,
    JobSeen,
    OperationAcked,
    PollMissed,
    Record,
    WriteAcked,
)

TAG_PREFIX = "drover:"
#: application states of a real master's listing that mean the application lives
LIVE_APP_STATES = ("RUNNING", "WAITING")
#: (cluster, pid, job, run id, children) of each live driver process
Drivers = Callable[[], list[tuple[str, int, str, str, list[int]]]]


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
        masters: dict[str, str] | None = None,
        jobs: Iterable[str] = (),
        drivers: Drivers | None = None,
        process_interval: float = 0.3,
        commit_logs: Callable[[str], Path] | None = None,
    ) -> None:
        self.path = path
        self.clusters = clusters  # name -> simulator URL
        self.masters = masters or {}  # name -> a real master's UI URL
        self.job_names = set(jobs)
        self.drivers = drivers
        self.process_interval = process_interval
        self.commit_logs = commit_logs
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
        if self.masters:
            self._threads.append(
                threading.Thread(target=self._poll_masters, name="chaos-masters", daemon=True)
            )
        if drivers is not None:
            self._threads.append(
                threading.Thread(target=self._poll_processes, name="chaos-procs", daemon=True)
            )
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

    def missed(self, source: str, error: BaseException) -> None:
        """One poll of ``source`` failed: a record (the checker asks whether a fault explains
        it) and a count."""
        if source == "store":
            self.store_misses += 1
        else:
            self.cluster_misses += 1
        what = f"{type(error).__name__}: {error}".splitlines()[0][:200]
        self.add([PollMissed(time.time(), source, what)])

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
        def drivers(client: httpx.Client, url: str) -> list[tuple[str, str, bool]]:
            return [
                (d["app_id"], job, bool(d["alive"]))
                for d in client.get(f"{url}/sim/drivers").json()
                if (job := job_of_tag(d.get("tag") or "")) is not None
            ]

        self._poll_apps(self.clusters, 2.0, drivers, (httpx.HTTPError, ValueError))

    def _poll_masters(self) -> None:
        def active(client: httpx.Client, url: str) -> list[tuple[str, str, bool]]:
            apps = list(client.get(f"{url}/json/").json().get("activeapps", []))
            return [
                (str(app["id"]), app["name"], True)
                for app in apps
                if app.get("name") in self.job_names and app.get("state") in LIVE_APP_STATES
            ]

        self._poll_apps(self.masters, 5.0, active, (httpx.HTTPError, ValueError, AttributeError))

    def _poll_apps(
        self,
        endpoints: dict[str, str],
        timeout: float,
        read: Callable[[httpx.Client, str], list[tuple[str, str, bool]]],
        errors: tuple[type[Exception], ...],
    ) -> None:
        """Every ``app_interval`` until stopped, the applications of each cluster (name -> URL)
        as ``read`` finds them at its URL (app id, job, alive); a read failing with ``errors``
        is a missed poll."""
        client = httpx.Client(timeout=timeout, trust_env=False)
        try:
            while not self._stop.is_set():
                for name, url in endpoints.items():
                    try:
                        apps = read(client, url)
                    except errors as exc:
                        self.missed(f"cluster:{name}", exc)
                        continue
                    now = time.time()
                    self.add(AppSeen(now, name, app_id, job, alive) for app_id, job, alive in apps)
                self._stop.wait(self.app_interval)
        finally:
            client.close()

    def _poll_processes(self) -> None:
        assert self.drivers is not None
        while not self._stop.is_set():
            try:
                found = self.drivers()
            except Exception as exc:  # noqa: BLE001 - a missed poll, recorded
                self.missed("processes", exc)
            else:
                now = time.time()
                self.add(
                    AppSeen(now, cluster, f"pid:{pid}/run:{run}", job, True, "process")
                    for cluster, pid, job, run, _ in found
                )
            self._stop.wait(self.process_interval)

    def _poll_store(self) -> None:
        query = sa.text("SELECT name, desired_state, state, owner, owner_epoch FROM jobs")
        while not self._stop.is_set():
            try:
                with self.engine.connect() as conn:
                    rows = list(conn.execute(query).all())
            except sa.exc.SQLAlchemyError as exc:
                self.missed("store", exc)
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
                int(op_id): (state, kind, created, finished, created_by)
                for op_id, state, kind, created, finished, created_by in conn.execute(
                    sa.text(
                        "SELECT id, state, kind, created_at, finished_at, created_by "
                        "FROM operations"
                    )
                )
            }
            items: dict[int, list[str]] = {}
            errors: dict[int, list[str]] = {}
            for op_id, job, action, step, why, error in conn.execute(
                sa.text(
                    "SELECT operation_id, job_name, action, step, why, last_error "
                    "FROM operation_items ORDER BY operation_id, position"
                )
            ):
                items.setdefault(int(op_id), []).append(
                    f"{job} {action} -> {step}" + (f" ({error or why})" if error or why else "")
                )
                if error:
                    errors.setdefault(int(op_id), []).append(f"{job}: {error}")
        self.engine.dispose()
        final: list[Record] = []
        if self.commit_logs is not None:
            logs = self.commit_logs
            commits = [b for job in sorted(set(written)) for b in commit_records(job, logs(job))]
            commits.sort(key=lambda b: b.t)
            final += commits
        final += [
            FinalJob(
                name,
                name in jobs,
                jobs[name][0] if name in jobs else None,
                _spec(jobs[name][1]) if name in jobs else None,
            )
            for name in sorted(set(written))
        ]
        acked_ops = {o.operation for o in self.history.operations if o.operation > 0}
        failovers = {op_id for op_id, row in operations.items() if row[1] == "failover"}
        for op_id in sorted(acked_ops | failovers):
            if op_id not in operations:
                final.append(FinalOperation(op_id, False))
                continue
            state, kind, created, finished, created_by = operations[op_id]
            final.append(
                FinalOperation(
                    op_id,
                    True,
                    state,
                    "; ".join(items.get(op_id, [])),
                    _epoch_seconds(_aware(created)) if created is not None else None,
                    _epoch_seconds(_aware(finished)) if finished is not None else None,
                    "; ".join(errors.get(op_id, [])),  # why its items failed
                    kind,
                    created_by or "",
                )
            )
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


def commit_records(job: str, path: Path) -> list[BatchCommit]:
    """One job's commit log (``<batch> <run> <time>`` lines, one per batch a run handed to Spark
    to commit: ``pipelines.drover_runtime.read_commit_log``) as records: each line a batch
    written (``committed`` false); and a batch committed (true, at the time of the later line)
    when the same run went on to a later batch -- Spark begins a micro-batch only after it
    committed the one before, so the last batch of a run may have been written and never
    committed (the next run does it again: a replay, not a double commit)."""
    from pipelines.drover_runtime import read_commit_log

    lines = sorted(read_commit_log(str(path)), key=lambda line: line[2]) if path.exists() else []
    found = [BatchCommit(t, job, batch, run, False) for batch, run, t in lines]
    later: dict[str, list[tuple[int, float]]] = {}
    for batch, run, t in lines:
        later.setdefault(run, []).append((batch, t))
    for run, batches in later.items():
        for batch, _ in batches:
            after = [t for other, t in batches if other > batch]
            if after:
                found.append(BatchCommit(min(after), job, batch, run, True))
    return found


def _spec(args: Any) -> str:
    """The checker's fingerprint of stored arguments (``chaos.faults.spec_of``)."""
    if isinstance(args, str | bytes):
        args = json.loads(args)
    return json.dumps(list(args or []))


def _aware(value: datetime) -> datetime:
    """The store keeps naive UTC datetimes."""
    from datetime import UTC

    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
