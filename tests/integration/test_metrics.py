"""``/metrics`` parses with the Prometheus text parser, moves with a job
through its states, and keeps a bounded number of series with 10,000 jobs (SQLite and MariaDB).

The reconciler runs in process with a fixed claim against the simulated standalone cluster
(``harness/simcluster.py``), as a node's reconcile loop would; its figures reach ``/metrics``
the way a node's do (the actor's registry, collected and served by the API process).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import insert

from api.app import create_app
from api.deps import NodeContext
from harness.simcluster import SimCluster
from scheduler.config import Settings
from scheduler.core.clock import utcnow
from scheduler.core.metrics import BY_NAME, ActorMetrics, ReconcilerMetrics
from scheduler.store.db import Store
from scheduler.store.models import Job
from tests.support.simulated import claiming_reconciler, register_sim

pytestmark = pytest.mark.integration

DEADLINE = 30.0


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(client: TestClient) -> Samples:
    """``/metrics`` parsed by prometheus_client's parser: (name, labels) -> value."""
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum of ``name`` over the series carrying ``labels`` (and any others)."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= set(ls))


def exported_names(samples: Samples) -> set[str]:
    names = set()
    for name, _ in samples:
        for suffix in ("_bucket", "_sum", "_count", "_created"):
            if name.endswith(suffix) and name[: -len(suffix)] in BY_NAME:
                name = name[: -len(suffix)]
        if not name.startswith("process_"):  # the API process's own (prometheus_client's)
            names.add(name)
    return names


def test_metrics_follow_a_job_through_its_states(
    store: Store,
    settings: Settings,
    admin_headers: dict[str, str],
    sim: SimCluster,
    tmp_path: Path,
) -> None:
    settings = settings.model_copy(update={"metrics_store_ttl": 0.0})
    loops = ReconcilerMetrics()

    def actor_metrics() -> ActorMetrics:  # what the node's relay hands the API, freshly
        return ActorMetrics(loops.collect(), time.monotonic(), 0.001)

    app = create_app(NodeContext(settings, store, actor_metrics=actor_metrics))
    client = TestClient(app, base_url="http://127.0.0.1", headers=admin_headers)
    register_sim(client, sim, tmp_path / "checkpoints")
    job = {"name": "orders", "entrypoint": "/opt/pipelines/p.py", "group": "g"}
    assert client.post("/v1/jobs", json=job).status_code == 201
    reconciler = claiming_reconciler(store, settings)

    def tick() -> None:
        loops.observe("g", reconciler.tick())

    tick()  # claims the job: this node owns it now
    first = scrape(client)
    assert value(first, "drover_jobs", group="g", cluster="sim", state="STOPPED") == 1
    assert value(first, "drover_jobs_owned", group="g") == 1
    assert value(first, "drover_cluster_health", cluster="sim", state="NORMAL") == 1
    assert value(first, "drover_node_info", node=settings.node_id, az="az-1", cloud="local",
                 version=app.version) == 1  # fmt: skip
    assert value(first, "drover_actor_metrics_up") == 1
    assert exported_names(first) <= set(BY_NAME), exported_names(first) - set(BY_NAME)

    assert client.post("/v1/jobs/orders/start").status_code == 202
    seen: list[str] = []
    reads = 0
    deadline = time.monotonic() + DEADLINE
    while True:
        state = client.get("/v1/jobs/orders").json()["state"]
        reads += 1
        samples = scrape(client)
        # the gauge shows the job in the state the API shows, and in no other
        assert value(samples, "drover_jobs", group="g", cluster="sim", state=state) == 1, state
        assert total(samples, "drover_jobs", group="g") == 1
        if not seen or seen[-1] != state:
            seen.append(state)
        if state == "RUNNING":
            break
        assert time.monotonic() < deadline, f"the job did not start: {seen}"
        tick()
        time.sleep(0.05)
    assert seen[0] == "QUEUED" and "STARTING" in seen, seen
    running = scrape(client)
    assert total(running, "drover_reconcile_actions_total", group="g", kind="Submit") == 1
    assert total(running, "drover_reconcile_actions_total", group="g", kind="Observed") >= 1
    assert value(running, "drover_reconcile_ticks_total", group="g", outcome="ok") >= 3
    assert value(running, "drover_reconcile_tick_duration_seconds_count", group="g") >= 3
    assert total(running, "drover_reconcile_phase_duration_seconds_count", phase="observe") >= 3
    # the API's own counters moved with the requests above, by route template
    assert reads == value(
        running, "drover_api_requests_total", method="GET", route="/v1/jobs/{name}", status="200"
    )
    assert total(running, "drover_api_requests_total", route="/v1/jobs/{name}/start") == 1

    assert client.post("/v1/jobs/orders/stop").status_code == 202
    deadline = time.monotonic() + DEADLINE
    while client.get("/v1/jobs/orders").json()["state"] != "STOPPED":
        assert time.monotonic() < deadline, "the job did not stop"
        tick()
        time.sleep(0.05)
    stopped = scrape(client)
    assert value(stopped, "drover_jobs", group="g", cluster="sim", state="STOPPED") == 1
    assert value(stopped, "drover_jobs", group="g", cluster="sim", state="RUNNING") == 0
    assert total(stopped, "drover_reconcile_actions_total", kind="Kill") >= 1
    assert value(stopped, "drover_api_requests_total", method="GET", route="/metrics",
                 status="200") >= len(seen)  # fmt: skip


def _add_jobs(store: Store, count: int, owner: str, start: int = 0) -> None:
    """``count`` jobs owned by ``owner`` spread over three states (a bulk insert: the API
    would take minutes for 10,000 and this test is about what /metrics does with them)."""
    now = utcnow()
    states = ("RUNNING", "QUEUED", "FAILED")
    rows = [
        {
            "name": f"bulk-{i:05d}",
            "group_name": "default",
            "team": f"team-{i % 50}",
            "business": "",
            "priority": "normal",
            "entrypoint": "/opt/pipelines/p.py",
            "args": [],
            "conf": {},
            "checkpoint_location": "",
            "desired_state": "RUNNING",
            "state": states[i % len(states)],
            "state_reason": "",
            "generation": 0,
            "attempts_reset_at": now,
            "owner": owner,
            "owner_epoch": 1,
            "version": 1,
            "spec_version": 1,
            "created_at": now,
            "updated_at": now,
        }
        for i in range(start, start + count)
    ]
    with store.transaction() as session:
        for chunk in range(0, len(rows), 2000):
            session.execute(insert(Job), rows[chunk : chunk + 2000])


def test_series_count_stays_bounded_with_10000_jobs(
    store: Store, settings: Settings, admin_headers: dict[str, str]
) -> None:
    settings = settings.model_copy(update={"metrics_store_ttl": 0.0})
    app = create_app(NodeContext(settings, store))
    client = TestClient(app, base_url="http://127.0.0.1", headers=admin_headers)
    _add_jobs(store, 10, settings.node_id)
    few = scrape(client)
    _add_jobs(store, 9_990, settings.node_id, start=10)
    started = time.perf_counter()
    many = scrape(client)
    seconds = time.perf_counter() - started

    def series(samples: Samples) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
        # the request counters grow by one series per route scraped, not per job
        return {k for k in samples if not k[0].startswith("drover_api_")}

    print(
        f"\n/metrics with 10,000 owned jobs: {len(many)} series, {seconds * 1e3:.1f} ms "
        f"(with 10 jobs: {len(few)} series)"
    )
    assert series(many) == series(few)
    assert total(many, "drover_jobs") == 10_000
    assert value(many, "drover_jobs_owned", group="default") == 10_000
    assert value(many, "drover_jobs", group="default", cluster="local", state="RUNNING") == 3_334
    assert len(many) < 500
