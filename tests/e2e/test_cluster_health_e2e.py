"""Cluster health end to end: two Drover node processes in one group
(ZooKeeper membership, MariaDB), a PRIVATE Spark standalone cluster started by the test on ports
of its own (the shared clusters A and B are left alone), the runbook CLI against a node's API.

1. Both nodes vote the cluster ok: NORMAL.
2. Its master and worker are stopped: both nodes' probes fail, the cluster is VOTE_ABNORMAL
   within the configured window, the transition's evidence holds both failed votes, and a job
   that should run is held (QUEUED, never submitted) with the cluster's health and reason.
3. The cluster is restarted: NORMAL again, only once no probe had failed for the quiet period.
4. ``drover clusters mark-abnormal`` / ``clear``: the monitor leaves the manual mark alone; both
   appear in the jobs' events and the audit log.

Short intervals (probe every 1 s, quiet period 8 s) keep the test's wall time small; it prints
its timings.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from harness.nodes import stop_live
from harness.spark import PrivateSparkCluster
from scheduler.decisions import catalog
from scheduler.store import catalog as catalog_store
from scheduler.store import journal
from scheduler.store.db import Store
from tests.conftest import wait_until
from tests.support.nodes import NodeProcess
from tests.support.world import drover_cli as drover
from tests.support.world import zk_node_env

pytestmark = pytest.mark.e2e

CLUSTER = "private"
GROUP = "gh"
PROBE_INTERVAL = 1.0
PROBE_TIMEOUT = 2.0
VOTE_FRESHNESS = 5.0
QUIET_PERIOD = 8.0
#: the latest votes of both nodes fail within two jittered rounds plus a probe timeout; the
#: rest is slack for a machine shared with other agents' tests
ABNORMAL_WITHIN = 2 * PROBE_INTERVAL * 1.2 + PROBE_TIMEOUT + 10.0
HEALTH_ENV = {
    "DROVER_HEALTH_PROBE_INTERVAL": str(PROBE_INTERVAL),
    "DROVER_HEALTH_PROBE_TIMEOUT": str(PROBE_TIMEOUT),
    "DROVER_HEALTH_VOTE_FRESHNESS": str(VOTE_FRESHNESS),
    # failures over a threshold are not what this test shows: VOTE_ABNORMAL is
    "DROVER_HEALTH_THRESHOLD_COUNT": "1000",
    "DROVER_HEALTH_THRESHOLD_WINDOW": "10",
    "DROVER_HEALTH_QUIET_PERIOD": str(QUIET_PERIOD),
}


@pytest.fixture
def spark(tmp_path: Path) -> Iterator[PrivateSparkCluster]:
    cluster = PrivateSparkCluster(tmp_path / "spark", cores=1, memory="512m")
    try:
        print(f"\nprivate Spark up in {cluster.start():.1f} s on {cluster.ui_url}")
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def nodes(
    tmp_path: Path,
    fresh_mysql_url: Callable[[], str],
    zk_hosts: str,
    spark: PrivateSparkCluster,
) -> Iterator[tuple[Store, list[NodeProcess]]]:
    url = fresh_mysql_url()
    env = zk_node_env(
        tmp_path,
        url,
        zk_hosts,
        "e2e-health",
        DROVER_ZK_SESSION_TIMEOUT="4",
        DROVER_RECONCILE_INTERVAL="1",
        DROVER_GROUPS=f"{GROUP}:active",
        DROVER_ARTIFACT_ROOTS="/p.py",  # the placeholder entrypoint these jobs name
        **HEALTH_ENV,
    )
    store = Store(url)
    with store.transaction() as session:
        catalog_store.create_cluster(
            session,
            CLUSTER,
            catalog.ClusterSpec(
                kind="standalone",
                storage_root=(tmp_path / "storage").as_uri(),
                master_url=spark.master_url,
                rest_url=spark.rest_url,
                ui_url=spark.ui_url,
            ),
        )
        catalog_store.create_group(session, GROUP, primary_cluster=CLUSTER)
    procs = [
        NodeProcess(
            node_id,
            {**env, "DROVER_DATA_DIR": str(tmp_path / node_id), "DROVER_AZ": f"az-{i}"},
            tmp_path / f"{node_id}.log",
        )
        for i, node_id in enumerate(("h1", "h2"))
    ]
    try:
        started = time.monotonic()
        for node in procs:
            node.start()
        for node in procs:
            node.wait_ready()
        print(f"2 nodes ready in {time.monotonic() - started:.1f} s")
        yield store, procs
    finally:
        stop_live(procs)
        store.dispose()


def health(node: NodeProcess) -> dict[str, Any]:
    data: dict[str, Any] = node.get(f"/v1/clusters/{CLUSTER}/health")
    return data


def wait_health(node: NodeProcess, state: str, timeout: float, what: str) -> dict[str, Any]:
    def reached() -> dict[str, Any] | None:
        data = health(node)
        return data if data["state"] == state else None

    try:
        return wait_until(reached, timeout=timeout, interval=0.2, what=what)
    except pytest.fail.Exception as exc:
        pytest.fail(f"{exc}\nhealth: {health(node)}\nnode log:\n{node.log_tail()}")


def counted_votes(data: dict[str, Any]) -> dict[str, bool]:
    return {v["node_id"]: v["ok"] for v in data["votes"] if v["counted"]}


def health_events(node: NodeProcess, job: str) -> list[str]:
    page = node.get(f"/v1/jobs/{job}/events", limit=1000)
    return [e["message"] for e in reversed(page["data"]) if e["cause"] == "cluster-health"]


def test_vote_abnormal_quiet_recovery_and_manual_mark(
    nodes: tuple[Store, list[NodeProcess]], spark: PrivateSparkCluster
) -> None:
    store, (h1, h2) = nodes

    # 1. both nodes vote ok
    wait_until(
        lambda: counted_votes(health(h1)) == {"h1": True, "h2": True},
        timeout=60,
        interval=0.2,
        what="both nodes to vote the private cluster ok",
    )
    assert health(h2)["state"] == "NORMAL"
    h1.post("/v1/jobs", {"name": "idle", "group": GROUP, "entrypoint": "/p.py"})

    # 2. master and worker gone: VOTE_ABNORMAL within the window, with the votes as evidence
    stopped_at = time.monotonic()
    print(f"private Spark stopped in {spark.stop():.1f} s")
    down = wait_health(h2, "VOTE_ABNORMAL", ABNORMAL_WITHIN, "VOTE_ABNORMAL after the stop")
    abnormal_after = time.monotonic() - stopped_at
    print(f"VOTE_ABNORMAL {abnormal_after:.1f} s after the stop (bound {ABNORMAL_WITHIN:.1f} s)")
    event = down["history"][0]
    assert (event["from_state"], event["to_state"], event["decided_by"]) == (
        "NORMAL",
        "VOTE_ABNORMAL",
        "monitor",
    )
    evidence = {v["node_id"]: v["ok"] for v in event["evidence"]["votes"]}
    assert evidence == {"h1": False, "h2": False}
    assert "2 of 2 live nodes" in down["reason"]

    h1.post(
        "/v1/jobs",
        {"name": "held", "group": GROUP, "entrypoint": "/p.py", "desired_state": "RUNNING"},
    )
    held = wait_until(
        lambda: (
            (j := h1.get("/v1/jobs/held"))["state_reason"].startswith(
                f"waiting: cluster {CLUSTER} is VOTE_ABNORMAL (2 of 2 live nodes"
            )
            and j
        ),
        timeout=30,
        interval=0.2,
        what="the job on the abnormal cluster to show why it waits",
    )
    assert held["state"] == "QUEUED"
    assert len(h1.get("/v1/jobs/held/runs")["data"]) == 0  # never submitted there
    h1.post("/v1/jobs/held/stop")  # it must not start once the cluster is back

    # 3. restarted: NORMAL only after the quiet period
    print(f"private Spark restarted in {spark.start():.1f} s")
    restarted_at = time.monotonic()
    up = wait_health(
        h1, "NORMAL", QUIET_PERIOD + ABNORMAL_WITHIN + 20, "NORMAL after restart and quiet period"
    )
    print(f"NORMAL {time.monotonic() - restarted_at:.1f} s after the restart was ready")
    back = up["history"][0]
    assert (back["to_state"], back["decided_by"]) == ("NORMAL", "monitor")
    last_failure = datetime.fromisoformat(back["evidence"]["last_failure"])
    quiet_for = (datetime.fromisoformat(back["at"]) - last_failure).total_seconds()
    print(f"quiet for {quiet_for:.1f} s before NORMAL (quiet period {QUIET_PERIOD:.0f} s)")
    assert quiet_for >= QUIET_PERIOD
    assert all(counted_votes(up).values()) and counted_votes(up)
    assert len(h1.get("/v1/jobs/held/runs")["data"]) == 0

    # 4. a manual mark and clear through the runbook CLI
    out = drover(h2, "clusters", "mark-abnormal", CLUSTER, "--reason", "rack maintenance")
    assert out.strip() == f"cluster {CLUSTER}: NORMAL -> MANUAL_ABNORMAL (rack maintenance)"
    marked_at = datetime.fromisoformat(health(h1)["history"][0]["at"])
    # the monitors keep voting ok, and leave the mark alone
    wait_until(
        lambda: (
            all(
                datetime.fromisoformat(v["at"]) > marked_at
                for v in health(h1)["votes"]
                if v["counted"]
            )
            and len(counted_votes(health(h1))) == 2
        ),
        timeout=30,
        interval=0.2,
        what="both nodes to vote after the mark",
    )
    table = drover(h1, "clusters", "health", CLUSTER)
    assert "state    MANUAL_ABNORMAL" in table and "operator:user:harness" in table
    assert health(h2)["reason"] == "marked abnormal by user:harness: rack maintenance"
    out = drover(h1, "clusters", "clear", CLUSTER, "--reason", "done")
    assert out.strip() == f"cluster {CLUSTER}: MANUAL_ABNORMAL -> NORMAL"
    assert health(h2)["state"] == "NORMAL"

    transitions = [(e["from_state"], e["to_state"]) for e in reversed(health(h1)["history"])]
    assert transitions[0] == ("NORMAL", "VOTE_ABNORMAL")
    assert transitions[-2:] == [("NORMAL", "MANUAL_ABNORMAL"), ("MANUAL_ABNORMAL", "NORMAL")]
    for job in ("idle", "held"):
        messages = health_events(h2, job)
        assert messages[-2:] == [
            f"cluster {CLUSTER} marked abnormal by user:harness: rack maintenance",
            f"cluster {CLUSTER} cleared by user:harness: done",
        ], messages
    assert any(
        "is VOTE_ABNORMAL (decided by the monitor on h" in m for m in health_events(h1, "idle")
    )
    with store.session() as session:
        audit = [
            (a.action, a.target_name, a.detail["reason"])
            for a in journal.list_audit(session, limit=20)
            if a.target_kind == "cluster"
        ]
    assert audit[:2] == [
        ("cluster.clear", CLUSTER, "done"),
        ("cluster.mark-abnormal", CLUSTER, "rack maintenance"),
    ]
