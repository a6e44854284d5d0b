"""The node's actors, each owning one concern and one loop. Every Ray call of the scheduler is
in this package.

    NodeSupervisor      supervisor.py   one per node, in the node process itself (not a Ray
     │                                  actor: a loop of its own, host.py); starts the
     │                                  JobReconciler, then Membership; pings them every second
     │                                  and re-creates any whose restart budget is spent; drains
     │                                  on stop (reconcilers and hosted loops first, then
     │                                  membership). THE place that hosts the node's loops:
     │   ClusterMonitor monitor.py      probes the clusters of the node's groups, votes, decides
     │                                  their health (``scheduler.loops.monitor``,
     │                                  ``scheduler.decisions.health``)
     │   ReplicationLoop replicator.py  mirrors the checkpoints of the replicated jobs this node
     │                                  owns into their other cluster's root
     │                                  (``scheduler.loops.replication``)
     │   OperationsExecutor operations.py  claims this node's operations (failovers, bulk
     │                                  operations) and advances their items
     │                                  (``scheduler.loops.operations``)
     │   AlertLoop      alerts.py       raises and resolves alerts, sends the outbox
     │                                  (``scheduler.decisions.alerts``)
     ├── Membership     membership.py   Ray actor (its own process: the ZooKeeper session)
     └── JobReconciler  reconcilers.py  Ray actor: one reconcile loop per group, all in one
                                        process (a group costs a loop, not a process); also
                                        resolves membership generations for Membership (it holds
                                        the store)

Every Ray worker process costs a node about 140 MiB resident, so concerns that need no process
of their own (the supervisor, the cluster monitor, the loops of the groups) are asynchronous
components hosted in an existing process, each with its own loop that never dies.

``runtime.py`` (NodeRuntime) is the node process's side: it starts Ray and the supervisor, and is
what the API and the CLI call. ``common.py`` holds what the actors share (names, timeouts, the
Ray import with loopback binding).

Membership holds the node's ZooKeeper session (all of it in ``scheduler.coordination.zookeeper``)
and hands each reconcile loop its current :class:`~scheduler.core.ownership.Claim` at the start of
every tick, decided by the pure :func:`scheduler.decisions.membership.decide_claim`. Actors are
restartable (``max_restarts=-1``): a restarted actor reruns its constructor with no state and
recovers what it needs from the store. Their loops start lazily on the first call
(``ping``/``nudge``), so a supervisor ping after a restart brings them back. Blocking work (store,
clusters) runs in worker threads; the event loops only wait and wake.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scheduler.actors.runtime import NodeRuntime

__all__ = ["NodeRuntime"]


def __getattr__(name: str) -> Any:
    """``NodeRuntime`` on first use, not on import of the package.

    Every actor's worker process imports this package (its actor class lives in a module of
    it); importing the runtime here would load the supervisor and through it every actor and
    their dependencies (SQLAlchemy, the backends, the reconciler) into each of them. Lazily, the
    Membership worker loads only what Membership needs (about 30 MiB less resident memory).
    """
    if name == "NodeRuntime":
        from scheduler.actors.runtime import NodeRuntime

        return NodeRuntime
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
