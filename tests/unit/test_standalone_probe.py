"""StandaloneRestBackend.probe(): REST readyz, the master's /json/ answering ALIVE with an alive
worker; free cores reported, not judged; never raises (httpx MockTransport, no cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from scheduler.backends.registry import BackendRegistry
from scheduler.backends.standalone import StandaloneRestBackend
from scheduler.config import Settings
from scheduler.core.records import ClusterRecord


def backend(readyz: Any, listing: Any) -> StandaloneRestBackend:
    def handle(request: httpx.Request) -> httpx.Response:
        answer = readyz if request.url.path.endswith("/readyz") else listing
        if isinstance(answer, Exception):
            raise answer
        status, body = answer
        return httpx.Response(status, json=body)

    return StandaloneRestBackend(
        "http://rest:6066",
        "spark://master:7077",
        "http://ui:8080",
        transport=httpx.MockTransport(handle),
    )


READY = (200, {"success": True})


def worker(state: str = "ALIVE", free: int = 4) -> dict[str, Any]:
    return {"id": "w", "state": state, "coresfree": free, "webuiaddress": "http://w:8081"}


def test_a_ready_master_with_an_alive_worker_is_ok_even_without_free_cores() -> None:
    probe = backend(READY, (200, {"status": "ALIVE", "workers": [worker(free=0)]})).probe()
    assert probe.ok
    assert probe.detail == "master ALIVE, 1 of 1 workers alive, 0 cores free"


def test_the_probe_reads_the_top_level_status_not_an_application_named_like_it() -> None:
    """The probe decodes only the status and the workers; names that spell keys stay names."""
    apps = [{"id": f"app-{i}", "name": 'x","status":"DEAD', "state": "RUNNING"} for i in range(3)]
    drivers = [{"id": "driver-1", "state": "RUNNING", "worker": "w", "mainclass": "workers"}]
    listing = {
        "url": "spark://master:7077",
        "activeapps": apps,
        "activedrivers": drivers,
        "workers": [worker(free=2)],
        "status": "ALIVE",
    }
    probe = backend(READY, (200, listing)).probe()
    assert probe.ok, probe.detail
    assert probe.detail == "master ALIVE, 1 of 1 workers alive, 2 cores free"


@pytest.mark.parametrize(
    ("readyz", "listing", "expected"),
    [
        (httpx.ConnectError("refused"), READY, "REST http://rest:6066/v1/submissions/readyz: no"),
        ((503, {"success": False}), READY, "not ready (503)"),
        ((200, {"success": False}), READY, "not ready (200)"),
        (READY, httpx.ConnectError("refused"), "master http://ui:8080/json/: no answer"),
        (READY, (500, {}), "answered 500"),
        (READY, (200, {"status": "STANDBY", "workers": [worker()]}), "master STANDBY"),
        (READY, (200, {"status": "ALIVE", "workers": [worker("DEAD")]}), "no alive worker"),
        (READY, (200, {"status": "ALIVE", "workers": []}), "0 of 0 workers alive"),
        (READY, (200, ["garbled"]), "unexpected answer"),
    ],
)
def test_failures_say_what_failed(readyz: Any, listing: Any, expected: str) -> None:
    probe = backend(readyz, listing).probe()
    assert not probe.ok
    assert expected in probe.detail
    assert probe.latency_s >= 0


def test_a_health_change_keeps_the_clusters_backend(tmp_path: Path) -> None:
    from dataclasses import replace

    registry = BackendRegistry(Settings(data_dir=tmp_path, node_id="t"))
    cluster = ClusterRecord(
        "a",
        "standalone",
        "spark://m:7077",
        "http://m:6066",
        "http://m:8080",
        "",
        "",
        "/data/a",
        "NORMAL",
        0,
    )
    try:
        first = registry.for_cluster(cluster)
        abnormal = replace(cluster, health="VOTE_ABNORMAL", health_reason="down")
        assert registry.for_cluster(abnormal) is first
        moved = replace(abnormal, rest_url="http://n:6066", version=2)
        assert registry.for_cluster(moved) is not first
    finally:
        registry.close()
