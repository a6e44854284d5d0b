"""Real Drover node processes for end-to-end tests: start, stop, kill -9, freeze, thaw.

Each node is ``drover node run`` in a session of its own; Ray's processes (GCS, raylet, the
actors' workers) stay in that session, so "the node" is every process of the session: kill -9
and SIGSTOP/SIGCONT go to all of them, as when a machine dies or a VM is paused.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import wait_until

DROVER = str(Path(sys.executable).with_name("drover"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def session_pids(sid: int) -> list[int]:
    """Every live process whose session id is ``sid``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        if int(fields[3]) == sid and fields[0] != b"Z":
            pids.append(int(entry.name))
    return pids


@dataclass
class NodeProcess:
    node_id: str
    env: dict[str, str]
    log_path: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, timeout: float = 10.0) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout)

    def start(self) -> None:
        env = {
            **self.env,
            "DROVER_NODE_ID": self.node_id,
            "DROVER_API_PORT": str(self.port),
        }
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [DROVER, "node", "run"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, timeout: float = 120.0) -> None:
        def ready() -> bool:
            assert self.alive, f"node {self.node_id} exited:\n{self.log_tail()}"
            with self.client(timeout=2) as client:
                return client.get("/readyz").status_code == 200

        wait_until(ready, timeout=timeout, interval=0.3, what=f"node {self.node_id} to be ready")

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, timeout: float = 60.0) -> float:
        """Graceful stop (SIGTERM); returns how long the process took to exit."""
        assert self.proc is not None
        started = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill9()
        self._reap_session()
        return time.monotonic() - started

    def kill9(self) -> None:
        """Every process of the node dies at once (a machine crash)."""
        assert self.proc is not None
        for pid in session_pids(self.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=30)
        self._reap_session()

    def _reap_session(self) -> None:
        assert self.proc is not None
        sid = self.proc.pid
        deadline = time.monotonic() + 20
        while session_pids(sid) and time.monotonic() < deadline:
            for pid in session_pids(sid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)

    def freeze(self) -> None:
        """SIGSTOP every process of the node (a paused VM, a long GC pause)."""
        assert self.proc is not None
        for pid in session_pids(self.proc.pid):
            os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        for pid in session_pids(self.proc.pid):
            os.kill(pid, signal.SIGCONT)

    # -- API helpers ------------------------------------------------------------------------

    def get(self, path: str, **params: Any) -> Any:
        with self.client() as client:
            response = client.get(path, params=params)
            response.raise_for_status()
            return response.json()

    def post(self, path: str, body: Any = None) -> Any:
        with self.client() as client:
            response = client.post(path, json=body)
            assert response.status_code < 300, response.text
            return response.json() if response.content else None


@contextmanager
def running(nodes: Iterable[NodeProcess]) -> Iterator[list[NodeProcess]]:
    """Start ``nodes`` together and wait until each is ready; stop every one at the end."""
    nodes = list(nodes)
    try:
        for node in nodes:
            node.start()
        for node in nodes:
            node.wait_ready()
        yield nodes
    finally:
        for node in nodes:
            if node.proc is not None:
                if node.alive:
                    node.thaw()
                node.stop()


def owners(node: NodeProcess, group: str | None = None) -> dict[str, str | None]:
    """job name -> owner, as the store says (read through any node's API)."""
    params: dict[str, Any] = {"limit": 1000}
    if group is not None:
        params["group"] = group
    page = node.get("/v1/jobs", **params)
    return {job["name"]: job["owner"] for job in page["data"]}
