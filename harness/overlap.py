"""Double-run checkers for real Spark (no pytest here): live applications of one job on several
masters at once, and batches committed by two runs.

:class:`MasterChecker` polls the masters' ``/json/`` directly (not through any proxy a test cuts)
every ``interval`` seconds in a thread, and records, per application name (one per job), the
most live applications seen at once across all masters, every instant two were live, and when
each (master, application) was seen live. A failed poll is counted (a checker that could not
look proves nothing: callers assert ``failed == 0`` or bound it).

:func:`double_commits` reads commit logs (``drover_runtime.RunContext.fenced(commit_log=...)``:
one ``<batch> <run> <time>`` line per batch a run handed to Spark to commit) and names the
batches two runs committed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from harness import http
from pipelines.drover_runtime import read_commit_log


def master_state(ui_url: str, timeout: float = 2.0) -> dict[str, Any]:
    """A standalone master's ``/json/`` (workers, active and completed apps and drivers)."""
    response = http.get(f"{ui_url.rstrip('/')}/json/", timeout=timeout)
    response.raise_for_status()
    state: dict[str, Any] = response.json()
    return state


@dataclass
class Overlap:
    at: float
    name: str
    apps: list[tuple[str, str]]


@dataclass
class MasterChecker:
    """Polls ``masters`` (label -> master UI URL) for the live applications named ``names``."""

    #: label -> master UI URL (a test may drop a master it killed, and add it back)
    masters: dict[str, str]
    names: set[str]
    interval: float = 0.2
    #: how to read one master (tests may pass their own)
    read: Callable[[str], dict[str, Any]] = master_state
    most: dict[str, int] = field(default_factory=dict)
    overlaps: list[Overlap] = field(default_factory=list)
    #: (label, app id) -> (name, first seen live, last seen live), monotonic seconds
    seen: dict[tuple[str, str], tuple[str, float, float]] = field(default_factory=dict)
    polls: int = 0
    failed: int = 0
    #: failed polls per master
    failures: dict[str, int] = field(default_factory=dict)
    #: the last failure, for the report
    last_error: str = ""
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def watch(self, *names: str) -> None:
        """Look for these application names too from now on."""
        with self._lock:
            self.names.update(names)

    def start(self) -> MasterChecker:
        self._thread = threading.Thread(target=self._run, name="master-checker", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll_once()
            self._stop.wait(self.interval)

    def poll_once(self) -> None:
        now = time.monotonic()
        live: dict[str, list[tuple[str, str]]] = {}
        with self._lock:
            names = set(self.names)
        for label, url in list(self.masters.items()):
            try:
                state = self.read(url)
            except Exception as exc:  # noqa: BLE001 - counted: a missed poll proves nothing
                with self._lock:
                    self.failed += 1
                    self.failures[label] = self.failures.get(label, 0) + 1
                    self.last_error = f"{label} {url}: {type(exc).__name__}: {exc}"
                continue
            for app in state.get("activeapps", []):
                if app.get("name") in names:
                    live.setdefault(app["name"], []).append((label, app["id"]))
        with self._lock:
            self.polls += 1
            for name, apps in live.items():
                self.most[name] = max(self.most.get(name, 0), len(apps))
                if len(apps) > 1:
                    self.overlaps.append(Overlap(now, name, apps))
                for label, app_id in apps:
                    first = self.seen.get((label, app_id), (name, now, now))[1]
                    self.seen[(label, app_id)] = (name, first, now)

    def apps(self, name: str, label: str) -> list[tuple[float, float]]:
        """(first seen, last seen) of each live application of ``name`` on master ``label``."""
        with self._lock:
            return sorted(
                (first, last)
                for (where, _), (n, first, last) in self.seen.items()
                if where == label and n == name
            )

    def live_now(self, name: str, label: str, within: float = 1.0) -> bool:
        """Whether an application of ``name`` was seen live on ``label`` in the last ``within``
        seconds."""
        apps = self.apps(name, label)
        return bool(apps) and apps[-1][1] >= time.monotonic() - within


def double_commits(logs: Iterable[str]) -> dict[int, set[str]]:
    """Per batch id committed by more than one run (across the commit logs ``logs``, which are
    one job's: batch ids are per job): the runs. Empty: every batch was committed by one run."""
    runs: dict[int, set[str]] = {}
    for path in logs:
        for batch, run, _ in read_commit_log(path):
            runs.setdefault(batch, set()).add(run)
    return {batch: found for batch, found in sorted(runs.items()) if len(found) > 1}


def commits_by_run(log: str) -> dict[str, list[int]]:
    """run id -> the batches it committed, in order (one commit log)."""
    out: dict[str, list[int]] = {}
    for batch, run, _ in read_commit_log(log):
        out.setdefault(run, []).append(batch)
    return out
