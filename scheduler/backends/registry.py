"""One backend instance per cluster, built from the cluster's record.

    kind            backend
    local           LocalSparkSubmitBackend, master = the cluster's (default local[2])
    spark-submit    LocalSparkSubmitBackend in client mode against the cluster's master URL
                    (spark://, yarn, k8s://...); runs under <data_dir>/cluster-runs/<cluster>
                    (both run drivers on this host, as DROVER_DRIVER_USER: production refuses
                    them without one)
    standalone      StandaloneRestBackend on the cluster's REST, master and UI URLs
    yarn            YarnBackend on the ResourceManager's web URL (rest_url) and the cluster's
                    Hadoop client configuration (hadoop_conf_dir); submissions go to the
                    business's YARN queue (``queue_of``, the quotas' ``yarn_queue``)

The simulated cluster (``harness/simcluster.py``) is not a kind: it is registered as a normal
``standalone`` cluster whose URLs point at the simulator.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from urllib.parse import urlsplit

from scheduler.config import Settings
from scheduler.core.backend import ClusterBackend
from scheduler.core.errors import ClusterError
from scheduler.core.records import ClusterRecord
from scheduler.core.states import ClusterKind

log = logging.getLogger(__name__)

_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def is_loopback_master(master: str) -> bool:
    """True for local mode and for masters on this host's loopback address."""
    if master.startswith("local"):
        return True
    return (urlsplit(master).hostname or "") in _LOOPBACK_HOSTS


class BackendRegistry:
    def __init__(
        self, settings: Settings, *, queue_of: Callable[[str], str | None] | None = None
    ) -> None:
        self._settings = settings
        self._queue_of = queue_of
        self._lock = threading.Lock()
        self._backends: dict[str, tuple[ClusterRecord, ClusterBackend]] = {}
        self._warned = False

    def for_cluster(self, cluster: ClusterRecord) -> ClusterBackend:
        with self._lock:
            known = self._backends.get(cluster.name)
            if known is not None and _same_cluster(known[0], cluster):
                return known[1]
            backend = self._build(cluster)
            self._backends[cluster.name] = (cluster, backend)
            if known is not None:
                _close(known[1])
            return backend

    def _build(self, cluster: ClusterRecord) -> ClusterBackend:
        kind = ClusterKind(cluster.kind)
        settings = self._settings
        if kind == ClusterKind.LOCAL:
            from scheduler.backends.local import LocalSparkSubmitBackend

            return LocalSparkSubmitBackend(
                spark_home=settings.resolved_spark_home,
                runs_dir=settings.runs_dir,
                master=cluster.master_url or settings.spark_local_master,
                python=settings.resolved_spark_python,
                env_passthrough=settings.driver_env_names,
                driver_user=self._driver_user(cluster),
            )
        if kind == ClusterKind.SPARK_SUBMIT:
            from scheduler.backends.local import LocalSparkSubmitBackend

            if not cluster.master_url:
                raise ClusterError(f"cluster {cluster.name!r} (spark-submit) has no master URL")
            return LocalSparkSubmitBackend(
                spark_home=settings.resolved_spark_home,
                runs_dir=settings.runs_dir.parent / "cluster-runs" / cluster.name,
                master=cluster.master_url,
                python=settings.resolved_spark_python,
                loopback_driver=is_loopback_master(cluster.master_url),
                env_passthrough=settings.driver_env_names,
                driver_user=self._driver_user(cluster),
            )
        if kind == ClusterKind.STANDALONE:
            from scheduler.backends.standalone import StandaloneRestBackend

            if not (cluster.rest_url and cluster.master_url and cluster.ui_url):
                raise ClusterError(
                    f"cluster {cluster.name!r} (standalone) needs master_url, rest_url and ui_url"
                )
            return StandaloneRestBackend(
                cluster.rest_url,
                cluster.master_url,
                cluster.ui_url,
                python=settings.resolved_spark_python,
            )
        if kind == ClusterKind.YARN:
            from scheduler.backends.yarn import YarnBackend

            if not (cluster.rest_url and cluster.hadoop_conf_dir):
                raise ClusterError(
                    f"cluster {cluster.name!r} (yarn) needs rest_url and hadoop_conf_dir"
                )
            return YarnBackend(
                cluster.rest_url,
                cluster.hadoop_conf_dir,
                spark_home=settings.resolved_spark_home,
                python=settings.resolved_spark_python,
                queue_of=self._queue_of,
                env_passthrough=settings.driver_env_names,
                work_dir=settings.runs_dir.parent / "yarn-submissions",
            )
        raise ClusterError(f"cluster {cluster.name!r}: no backend for kind {kind}")

    def _driver_user(self, cluster: ClusterRecord) -> str:
        """The user the drivers of a cluster that runs them on this host run as
        (``DROVER_DRIVER_USER``). None configured: production refuses the cluster (ClusterError:
        its jobs wait, its probes fail); development runs them as the node's own user, and
        says so loudly once."""
        user = self._settings.driver_user
        if user:
            return user
        if self._settings.environment == "production":
            raise ClusterError(
                f"cluster {cluster.name!r} ({cluster.kind}) runs its drivers on this node's host, "
                "and production mode never runs them as the node's own user: set "
                "DROVER_DRIVER_USER (an unprivileged user, e.g. drover-{team} for one per team)"
            )
        if not self._warned:
            self._warned = True
            log.warning(
                "DROVER_DRIVER_USER is not set: the drivers of cluster %r run as this node's own "
                "user and can read everything the node can (its store, its secrets, every "
                "job's checkpoints). Development only: production refuses it",
                cluster.name,
            )
        return ""

    def close(self) -> None:
        """Release every backend's resources (HTTP clients, timers)."""
        with self._lock:
            backends = [backend for _, backend in self._backends.values()]
            self._backends.clear()
        for backend in backends:
            _close(backend)


class ClusterProbe:
    """Whether a cluster answers a probe now: its backend's ``probe()`` within ``timeout``
    seconds (default: the health probe timeout), on a few threads of its own; an error or no
    answer in time is "unreachable". Built once per user (the node's API, its operations
    executor) and closed with it."""

    def __init__(
        self, settings: Settings, *, timeout: float | None = None, threads: int = 4
    ) -> None:
        self._registry = BackendRegistry(settings)
        self._timeout = settings.health_probe_timeout if timeout is None else timeout
        self._threads = ThreadPoolExecutor(threads, thread_name_prefix="cluster-probe")

    def reachable(self, cluster: ClusterRecord) -> bool:
        future = self._threads.submit(lambda: self._registry.for_cluster(cluster).probe().ok)
        try:
            return bool(future.result(timeout=self._timeout))
        except FutureTimeout:
            return False
        except Exception:  # noqa: BLE001 - a cluster that cannot even be probed is unreachable
            return False

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)
        self._registry.close()


def _same_cluster(a: ClusterRecord, b: ClusterRecord) -> bool:
    """The same backend serves both records: they differ at most in health (a health change
    keeps the backend and its caches; it happens exactly when the cluster is in trouble)."""

    def key(c: ClusterRecord) -> ClusterRecord:
        return replace(c, health="", health_reason="", health_since=None, updated_at=None)

    return key(a) == key(b)


def _close(backend: ClusterBackend) -> None:
    close = getattr(backend, "close", None)
    if callable(close):
        close()
