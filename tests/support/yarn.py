"""The YARN + HDFS test clusters of ``scripts/services.sh`` (``HADOOP_CLUSTERS=2``), as the
tests see them: the ResourceManager's REST API, HDFS over WebHDFS, and the launcher's control
server (a ResourceManager restart with recovery)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from harness import http

LIVE = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING")


@dataclass(frozen=True)
class YarnCluster:
    name: str
    #: the ResourceManager's web address (REST API)
    rm_url: str
    #: ``hdfs://127.0.0.1:<NameNode RPC port>``
    hdfs_url: str
    #: the NameNode's HTTP address (WebHDFS)
    webhdfs_url: str
    #: a HADOOP_CONF_DIR for clients
    conf_dir: str
    #: the launcher's control server
    control_url: str

    def _get(self, path: str, **params: str) -> Any:
        response = http.get(f"{self.rm_url}{path}", params=params, timeout=5.0)
        response.raise_for_status()
        return response.json()

    def apps(self, *, tag: str | None = None, live: bool = False) -> list[dict[str, Any]]:
        """The applications the ResourceManager knows (with a tag, or only the live ones)."""
        params = {}
        if tag is not None:
            params["applicationTags"] = tag
        if live:
            params["states"] = ",".join(LIVE)
        body = self._get("/ws/v1/cluster/apps", **params)
        return list((body.get("apps") or {}).get("app") or [])

    def app(self, app_id: str) -> dict[str, Any]:
        return dict(self._get(f"/ws/v1/cluster/apps/{app_id}")["app"])

    def info(self) -> dict[str, Any]:
        return dict(self._get("/ws/v1/cluster/info")["clusterInfo"])

    def control(self, what: str, timeout: float = 120.0) -> None:
        """``rm/stop``, ``rm/start`` or ``rm/restart`` through the launcher."""
        response = http.post(f"{self.control_url}/{what}", timeout=timeout)
        response.raise_for_status()

    # -- an AZ lost: the scaffolding of the AZ-loss tests on YARN ---------------------------

    @property
    def launcher_pid(self) -> int:
        """The test cluster's JVM (``var/services/hadoop-<name>.pid``, next to its conf)."""
        state = Path(self.conf_dir).parent.parent
        return int((state / f"hadoop-{self.name}.pid").read_text().strip())

    def lose(self) -> list[int]:
        """The whole cluster dies at once, as its AZ would: the ResourceManager, the NodeManager
        with every container it runs, the NameNode and the DataNode (SIGKILL to the JVM and to
        its descendants: containers run in sessions of their own). Every process of the tree is
        stopped first (SIGSTOP: none forks a child the kill would miss), then all are killed.
        Returns the PIDs killed."""
        root = self.launcher_pid
        doomed: list[int] = []
        frontier = [root]
        while frontier:  # stop the tree from its root down until no new process shows up
            for pid in frontier:
                _signal(pid, signal.SIGSTOP)
            doomed.extend(frontier)
            frontier = [p for p in descendants(root) if p not in doomed]
        for pid in doomed:
            _signal(pid, signal.SIGKILL)
        return doomed

    @property
    def services_checkout(self) -> Path:
        """The checkout whose ``scripts/services.sh`` started the cluster (its state directory
        ``var/services`` holds the cluster's conf)."""
        return Path(self.conf_dir).parents[3]

    def restore(self, repo: Path | None = None, timeout: float = 300.0) -> None:
        """Start the lost cluster again (empty: a new HDFS, a new ResourceManager state) through
        ``scripts/services.sh up hadoop`` of ``repo`` (by default the checkout that started it),
        which starts only the clusters not running."""
        repo = repo or self.services_checkout
        subprocess.run(
            [str(repo / "scripts" / "services.sh"), "up", "hadoop"],
            check=True,
            timeout=timeout,
            env={**os.environ, "HADOOP_CLUSTERS": "2"},
        )

    def kill(self, app_id: str) -> None:
        """Kill one application (what a test left behind)."""
        http.put(
            f"{self.rm_url}/ws/v1/cluster/apps/{app_id}/state",
            params={"user.name": "root"},
            json={"state": "KILLED"},
            timeout=5.0,
        )


@dataclass
class DoubleRunChecker:
    """Polls every cluster's ResourceManager every ``interval`` seconds, for as long as it runs,
    and remembers every sample in which one run tag's job had two RUNNING applications across
    the clusters (invariant 1 as the ResourceManagers see it)."""

    clusters: list[YarnCluster]
    interval: float = 0.2
    samples: int = 0
    violations: list[str] = field(default_factory=list)
    #: cluster looks that got no answer
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def sample(self) -> None:
        """One look at every cluster (a cluster that does not answer -- its ResourceManager
        restarting -- is missed; the others are still looked at)."""
        running: dict[str, list[str]] = {}
        for cluster in self.clusters:
            try:
                apps = cluster.apps(live=True)
            except httpx.HTTPError:
                self.errors += 1
                continue
            for app in apps:
                if app.get("state") != "RUNNING":
                    continue
                job_tags = [
                    t
                    for t in str(app.get("applicationTags", "")).split(",")
                    if t.startswith("drover-job-")
                ]
                for tag in job_tags:
                    running.setdefault(tag, []).append(f"{cluster.name}:{app['id']}")
        for tag, apps in running.items():
            if len(apps) > 1:
                self.violations.append(f"{time.strftime('%H:%M:%S')} {tag}: {apps}")
        self.samples += 1

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    @contextmanager
    def running(self) -> Iterator[DoubleRunChecker]:
        thread = threading.Thread(target=self._run, name="double-run-checker", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join(timeout=10)


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def descendants(root: int) -> list[int]:
    """Every live descendant of process ``root`` (from ``/proc``)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_bytes()
        except OSError:
            continue
        parent[int(entry.name)] = int(raw[raw.rindex(b")") + 2 :].split()[1])
    found, frontier = [], [root]
    while frontier:
        pid = frontier.pop()
        children = [p for p, pp in parent.items() if pp == pid]
        found.extend(children)
        frontier.extend(children)
    return found
