"""One backend instance per cluster, built from the cluster's record."""

from __future__ import annotations

import threading

from scheduler.backends.base import ClusterBackend
from scheduler.config import Settings
from scheduler.errors import ClusterError
from scheduler.records import ClusterRecord
from scheduler.states import ClusterKind


class BackendRegistry:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._lock = threading.Lock()
        self._backends: dict[str, tuple[ClusterRecord, ClusterBackend]] = {}

    def for_cluster(self, cluster: ClusterRecord) -> ClusterBackend:
        with self._lock:
            known = self._backends.get(cluster.name)
            if known is not None and known[0] == cluster:
                return known[1]
            backend = self._build(cluster)
            self._backends[cluster.name] = (cluster, backend)
            return backend

    def _build(self, cluster: ClusterRecord) -> ClusterBackend:
        kind = ClusterKind(cluster.kind)
        if kind == ClusterKind.LOCAL:
            from scheduler.backends.local import LocalSparkSubmitBackend

            return LocalSparkSubmitBackend(
                spark_home=self._settings.resolved_spark_home,
                runs_dir=self._settings.runs_dir,
                master=cluster.master_url or self._settings.spark_local_master,
                python=self._settings.resolved_spark_python,
            )
        raise ClusterError(f"cluster {cluster.name!r}: no backend for kind {kind} yet")
