"""The setting of the integration tests that drive jobs on a simulated standalone cluster
(``harness/simcluster.py``) without a node: the simulator, its cluster and group registered
through the API, and a reconciler holding a fixed claim on the group, ticked by the test as a
node's reconcile loop would."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fastapi.testclient import TestClient

from harness.simcluster import SimCluster
from scheduler.backends.registry import BackendRegistry
from scheduler.config import Settings
from scheduler.core.backend import app_name_for
from scheduler.core.ownership import Claim, Fence
from scheduler.decisions.planning import RestartPolicy
from scheduler.loops.reconciler import Reconciler
from scheduler.store.db import Store
from scheduler.store.ledger import SqlLedger


@contextmanager
def running_sim(app_start_delay: float) -> Iterator[SimCluster]:
    """A simulated cluster whose applications reach RUNNING ``app_start_delay`` s after
    submission; stopped on the way out."""
    cluster = SimCluster(app_start_delay=app_start_delay).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def register_sim(client: TestClient, sim: SimCluster, storage_root: Path, group: str = "g") -> None:
    """Cluster ``sim`` (the simulator, checkpoints under ``storage_root``) and ``group`` on it."""
    cluster = {
        "name": "sim",
        "kind": "standalone",
        "master_url": sim.master_url,
        "rest_url": sim.rest_url,
        "ui_url": sim.ui_url,
        "storage_root": str(storage_root),
    }
    assert client.post("/v1/clusters", json=cluster).status_code == 201
    created = client.post("/v1/groups", json={"name": group, "primary_cluster": "sim"})
    assert created.status_code == 201, created.text


def fixed_claim(settings: Settings, group: str = "g") -> Claim:
    """This node's claim on ``group`` at epoch 1, as if it were the group's only member."""
    return Claim(group, Fence(settings.node_id, 1), 0, 1)


def claiming_reconciler(
    store: Store,
    settings: Settings,
    group: str = "g",
    policy: RestartPolicy | None = None,
) -> Reconciler:
    """The reconciler of ``group`` on this node, holding :func:`fixed_claim`."""
    claim = fixed_claim(settings, group)
    return Reconciler(
        SqlLedger(store, node_id=settings.node_id, app_name_for=app_name_for),
        BackendRegistry(settings),
        node_id=settings.node_id,
        group=group,
        claim=lambda: claim,
        policy=policy or RestartPolicy(),
    )
