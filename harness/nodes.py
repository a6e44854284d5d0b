"""Drover node processes for benches and end-to-end tests: start, wait ready, graceful stop,
kill -9, freeze and thaw (no pytest here; ``tests/support/nodes.py`` adds the test conveniences).

Each node is ``drover node run`` in a session of its own; Ray's processes (GCS, raylet, the
actors' workers) stay in that session, so "the node" is every process of the session: kill -9
goes to all of them at once, as when a machine dies.
"""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from harness import http
from harness.procs import session_pids, signal_all

DROVER = str(Path(sys.executable).with_name("drover"))
T = TypeVar("T")


#: below the kernel's ephemeral ports (32768-60999) and above Ray's worker ports (10000-19999)
PORT_RANGE = (20000, 32000)


def free_port() -> int:
    """A loopback port that was free a moment ago, from :data:`PORT_RANGE`.

    Not a port-0 pick: the kernel hands those out again to the next process binding port 0 (a
    node's own Ray processes did, before its API bound it; the node exited and whatever held the
    port answered its readiness probe)."""
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(*PORT_RANGE)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {PORT_RANGE}")


def poll(
    condition: Callable[[], T | None], *, timeout: float, what: str, interval: float = 0.05
) -> T:
    """Call ``condition`` until it returns something truthy; TimeoutError at the deadline.

    An exception from ``condition`` counts as "not yet" and is shown if the deadline passes.
    """
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            result = condition()
            if result:
                return result
        except Exception as exc:  # noqa: BLE001 - "not yet"
            last = exc
        if time.monotonic() >= deadline:
            detail = f" (last error: {type(last).__name__}: {last})" if last else ""
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}{detail}")
        time.sleep(interval)


#: database URL (or data dir) -> a platform admin token made for it (one per deployment)
_TOKENS: dict[str, str] = {}


def admin_token(env: dict[str, str]) -> str:
    """A platform admin's token for the store ``env`` names, made once per store with
    ``drover token create --admin --force`` (what an operator on the store's host does)."""
    key = env.get("DROVER_DATABASE_URL") or env.get("DROVER_DATA_DIR", "var")
    token = _TOKENS.get(key)
    if token is None:
        made = subprocess.run(
            [
                DROVER,
                "token",
                "create",
                "--admin",
                "--force",
                "--name",
                "harness",
                "--expires-days",
                "2",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if made.returncode != 0:
            raise RuntimeError(f"cannot make an admin token: {made.stderr.strip()}")
        token = _TOKENS[key] = made.stdout.strip()
    return token


@dataclass
class NodeProcess:
    node_id: str
    env: dict[str, str]
    log_path: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None
    #: the credential get/post send (default: a platform admin token of the node's store)
    token: str = ""

    def headers(self) -> dict[str, str]:
        if not self.token:
            self.token = admin_token(self.env)
        return {"Authorization": f"Bearer {self.token}", "X-Drover-Client": "harness"}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        env = {**self.env, "DROVER_NODE_ID": self.node_id, "DROVER_API_PORT": str(self.port)}
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [DROVER, "node", "run"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_ready(self, timeout: float = 180.0) -> None:
        def ready() -> bool:
            if not self.alive:
                raise RuntimeError(f"node {self.node_id} exited:\n{self.log_tail()}")
            return http.get(f"{self.url}/readyz", timeout=2).status_code == 200

        try:
            poll(ready, timeout=timeout, interval=0.3, what=f"node {self.node_id} to be ready")
        except TimeoutError as exc:
            if not self.alive:
                raise RuntimeError(f"node {self.node_id} exited:\n{self.log_tail()}") from exc
            raise

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def get(self, path: str, timeout: float = 5.0, **params: Any) -> Any:
        response = http.get(
            f"{self.url}{path}",
            params=params,
            headers=self.headers(),
            timeout=timeout,
        )
        response.raise_for_status()
        return response.json()

    def post(self, path: str, body: Any = None, timeout: float = 10.0) -> Any:
        """POST ``body`` as JSON; AssertionError with the answer unless it is 2xx."""
        response = http.post(
            f"{self.url}{path}", json=body, headers=self.headers(), timeout=timeout
        )
        assert response.status_code < 300, response.text
        return response.json() if response.content else None

    def terminate(self) -> None:
        """Send SIGTERM (graceful stop: drain, leave ZooKeeper) and return at once."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def wait_exit(self, timeout: float = 60.0) -> None:
        """Wait for the node to exit after :meth:`terminate` (kill -9 at the deadline)."""
        assert self.proc is not None
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill9()
        self._reap_session()

    def stop(self, timeout: float = 60.0) -> float:
        """Graceful stop; returns how long the node took to exit (0 if it never started)."""
        if self.proc is None:
            return 0.0
        started = time.monotonic()
        self.terminate()
        self.wait_exit(timeout)
        return time.monotonic() - started

    def kill9(self) -> None:
        """Every process of the node dies at once (a machine crash)."""
        assert self.proc is not None
        signal_all(session_pids(self.proc.pid))
        self.proc.wait(timeout=30)
        self._reap_session()

    def freeze(self) -> None:
        """SIGSTOP every process of the node (a paused VM, a long GC pause)."""
        assert self.proc is not None
        signal_all(session_pids(self.proc.pid), signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        signal_all(session_pids(self.proc.pid), signal.SIGCONT)

    def _reap_session(self) -> None:
        assert self.proc is not None
        sid = self.proc.pid
        deadline = time.monotonic() + 20
        while session_pids(sid) and time.monotonic() < deadline:
            signal_all(session_pids(sid))
            time.sleep(0.1)


def stop_live(nodes: Iterable[NodeProcess]) -> None:
    """Gracefully stop each of ``nodes`` that is still running (a test's teardown)."""
    for node in nodes:
        if node.alive:
            node.stop()
