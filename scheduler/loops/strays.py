"""One stray sweep of one cluster, without Ray: list, read, decide (``scheduler.decisions.
strays``), kill, record.

The ClusterMonitor (``scheduler.actors.monitor``) runs it after each probe round, on the one live
node :func:`~scheduler.decisions.strays.sweeper` names per cluster, for clusters whose backend
lists applications with their tags (``list_tagged``: YARN, with its applications' YARN tags; a
Spark standalone master, whose drivers carry the run's tag and fence tag in their launch
command). The runs are read after the listing, so a submission recorded meanwhile is seen. A
stray is killed every sweep until the cluster no longer lists it alive; its event is recorded
once per application (per node: a node that takes the sweep over records it again).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from scheduler.core.backend import ClusterBackend, fence_tag_of_digest
from scheduler.core.errors import ClusterUnreachable
from scheduler.core.records import ClusterRecord
from scheduler.decisions.strays import Stray, run_ids, strays
from scheduler.store import strays as strays_store
from scheduler.store.db import Store

log = logging.getLogger("drover.strays")

#: application ids whose kill this sweeper recorded, at most (the oldest are forgotten first)
RECORDED_MAX = 10_000


class StraySweep:
    def __init__(
        self,
        store: Store,
        backend_for: Callable[[ClusterRecord], ClusterBackend],
        *,
        node_id: str,
    ) -> None:
        self._store = store
        self._backend_for = backend_for
        self._node_id = node_id
        self._recorded: dict[str, None] = {}

    def sweeps(self, cluster: ClusterRecord) -> bool:
        """Whether this cluster's backend can be swept (it lists applications with tags)."""
        return callable(getattr(self._backend_for(cluster), "list_tagged", None))

    def sweep(self, cluster: ClusterRecord) -> list[Stray]:
        """Kill the live applications of closed runs and the duplicates of open runs on
        ``cluster``; returns them."""
        backend = self._backend_for(cluster)
        list_tagged = getattr(backend, "list_tagged", None)
        if not callable(list_tagged):
            return []
        apps = list_tagged()
        with self._store.session() as session:
            runs = strays_store.runs_for_sweep(session, run_ids(apps), fence_tag_of_digest)
        found = strays(apps, runs)
        for stray in found:
            try:
                backend.kill(stray.handle)
            except ClusterUnreachable as exc:
                log.warning("cluster %s: cannot kill stray %s: %s", cluster.name, stray.app_id, exc)
                continue
            if stray.app_id in self._recorded:
                continue
            log.warning("cluster %s: %s", cluster.name, stray.reason(cluster.name))
            with self._store.transaction() as session:
                strays_store.record_stray_kill(session, stray, cluster.name, self._node_id)
            self._recorded[stray.app_id] = None
            while len(self._recorded) > RECORDED_MAX:
                self._recorded.pop(next(iter(self._recorded)))
        return found
