"""A submission in doubt on the real Spark standalone cluster A: the create request reaches the
master only after Drover's client gave up on it (a proxy holds the request back longer than the
client's timeout), so the reconciler records "outcome unknown", finds nothing for a while, and
then the master creates the driver anyway. The run is held in doubt instead of being submitted
again, and the late driver is adopted: exactly one driver of the run ever exists.

The reconciler runs on the in-memory ledger (``tests/support/fakes.py``) with the real backend.
The pipeline is a plain Python file that sleeps until its driver JVM is gone (no Spark session:
cheap on a shared 2-core machine); every driver of the test's run is killed at the end.
"""

from __future__ import annotations

import secrets
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.nodes import free_port
from scheduler.backends.standalone import StandaloneRestBackend
from scheduler.core.states import JobState
from scheduler.decisions.planning import RestartPolicy
from scheduler.loops.reconciler import Reconciler
from tests.conftest import SparkStandalone, wait_until
from tests.support.drivers import reap_drivers
from tests.support.fakes import FakeBackends
from tests.unit.test_reconciler import ME, World

pytestmark = [pytest.mark.integration, pytest.mark.serial]

#: how long the proxy holds a create back (the client gives up after CLIENT_TIMEOUT_S)
HOLD_S = 6.0
CLIENT_TIMEOUT_S = 1.0
GONE_TIMEOUT_S = 30.0

PIPELINE = """\
import os, time
parent = os.getppid()
while os.getppid() == parent:  # the driver JVM is gone once we are re-parented
    time.sleep(0.5)
"""


class HoldingProxy:
    """A one-way delay: each connection's request is read at once and sent to the target only
    ``hold`` seconds later (its answer is dropped): the client has timed out by then."""

    def __init__(self, target_port: int, hold: float) -> None:
        self.port = free_port()
        self.target = ("127.0.0.1", target_port)
        self.hold = hold
        self.forwarded = 0
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._threads: list[threading.Thread] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._relay, args=(client,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _relay(self, client: socket.socket) -> None:
        started = time.monotonic()
        data = b""
        client.settimeout(0.3)
        with client:
            while True:  # the whole request: the client sends it at once, then waits
                try:
                    chunk = client.recv(65536)
                except (TimeoutError, OSError):
                    break
                if not chunk:
                    break
                data += chunk
        time.sleep(max(0.0, self.hold - (time.monotonic() - started)))
        with socket.create_connection(self.target, timeout=10) as upstream:
            upstream.sendall(data)
            self.forwarded += 1
            upstream.settimeout(10)
            try:
                while upstream.recv(65536):
                    pass
            except (TimeoutError, OSError):
                pass

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for thread in self._threads:
            thread.join(timeout=15)


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "sleeper.py"
    path.write_text(PIPELINE)
    yield path
    reap_drivers(tmp_path, timeout=GONE_TIMEOUT_S)


def test_a_create_that_reaches_the_master_late_is_adopted_not_resubmitted(
    spark_standalone: SparkStandalone, pipeline: Path
) -> None:
    cluster = spark_standalone
    proxy = HoldingProxy(int(cluster.rest_url.rsplit(":", 1)[1]), HOLD_S)
    # the submissions go through the proxy, the lookups (listing, launch commands) do not
    backend = StandaloneRestBackend(
        proxy.url,
        cluster.master_url,
        cluster.ui_url,
        python=sys.executable,
        timeout_s=CLIENT_TIMEOUT_S,
        listing_ttl_s=0.0,
    )
    world = World()
    policy = RestartPolicy(backoff_initial=0.0)  # the default grace
    job = world.ledger.add_job(f"in-doubt-{secrets.token_hex(3)}")  # a tag no other run has
    world.ledger.api_write(job.id, entrypoint=f"file://{pipeline}")
    rec = Reconciler(
        world.ledger,
        FakeBackends(c1=backend),  # type: ignore[arg-type]
        node_id=ME.node_id,
        group="default",
        claim=lambda: world.claim,
        policy=policy,
        clock=world.clock.now,  # the ledger's time: the doubt lasts while the test runs
        monotonic=world.clock.monotonic,
    )
    app_name = ""
    try:
        rec.tick()  # intent, then the create times out: outcome unknown
        run = world.job(job).current_run
        assert run is not None and run.submission_id is None
        app_name = run.app_name
        assert any("submission outcome unknown" in e.message for e in world.ledger.events)

        def ticked() -> bool:
            rec.tick()
            stored = world.job(job)
            assert stored.current_run is not None
            return stored.current_run.submission_id is not None

        seen_in_doubt = False
        deadline = time.monotonic() + 60
        while not ticked():
            assert time.monotonic() < deadline, "the late driver was never adopted"
            reason = world.job(job).state_reason
            seen_in_doubt = seen_in_doubt or "is in doubt until" in reason
            time.sleep(0.5)
        assert seen_in_doubt  # it was looked up, not submitted again, while the master had none
        assert proxy.forwarded == 1
        assert world.ledger.calls.count("ledger.apply Adopted") == 1
        assert not world.ledger.applies("Reissue")
        drivers = [
            a for a in backend.list_applications() if a.app_name == app_name and a.state.is_alive
        ]
        assert len(drivers) == 1 and drivers[0].state.is_alive
        stored = world.job(job)
        assert stored.current_run is not None
        assert stored.current_run.submission_id == drivers[0].submission_id
        assert stored.state in (JobState.SUBMITTING, JobState.STARTING)
    finally:
        direct = StandaloneRestBackend(  # not through the proxy: the kills must land now
            cluster.rest_url, cluster.master_url, cluster.ui_url, python=sys.executable
        )
        try:
            mine = [a for a in direct.list_applications() if app_name and a.app_name == app_name]
            for app in mine:
                if app.state.is_alive:
                    direct.kill(app.submission_id)
            wait_until(
                lambda: (
                    not [
                        a
                        for a in direct.list_applications()
                        if app_name and a.app_name == app_name and a.state.is_alive
                    ]
                ),
                timeout=GONE_TIMEOUT_S,
                what="the test's drivers to end",
            )
        finally:
            direct.close()
            rec.close()
            backend.close()
            proxy.close()
