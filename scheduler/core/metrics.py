"""What a node exports at ``/metrics``: the catalog of every metric, and the actor processes' side.

A node is several processes: the node process (the API, and the supervisor with the loops it
hosts, such as the cluster monitor) and, in Ray worker processes, membership and the reconcile
loops. Each keeps the figures it knows in a registry of its own (:mod:`prometheus_client`, not
its global registry). The supervisor collects the actors' families every
``DROVER_METRICS_INTERVAL`` seconds; the API serves the last collection with its own figures
and those it reads from the store (``api/metrics.py``): a scrape never waits on an actor.

Rules every metric here follows (Prometheus conventions): a ``drover_`` prefix, the unit in the
name (``_seconds``, ``_bytes``), counters ending in ``_total``, and bounded label sets: groups,
clusters, states, phases, kinds, routes and status codes, never a job or a run (a fleet of
10,000 jobs exports as many series as a fleet of 10). :data:`CATALOG` lists them all; a test
holds ``/metrics`` and ``docs/prometheus/`` to it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.core import GaugeMetricFamily, Metric

# no ``<name>_created`` series beside every counter and histogram: they double the series count
# and Prometheus does not need them (a counter reset is seen from the values)
disable_created_metrics()

__all__ = [
    "CATALOG",
    "ActorMetrics",
    "MetricSpec",
    "MonitorMetrics",
    "ReconcilerMetrics",
    "families_of",
    "membership_families",
]


@dataclass(frozen=True)
class MetricSpec:
    name: str
    kind: str  # counter | gauge | histogram | info
    help: str
    labels: tuple[str, ...] = ()
    #: which process knows it: api | store (read by the API) | supervisor | membership |
    #: reconciler | monitor
    source: str = "api"


def _spec(
    name: str, kind: str, help: str, labels: tuple[str, ...] = (), source: str = "api"
) -> MetricSpec:
    return MetricSpec(name, kind, help, labels, source)


#: every metric a node exports (the name as exposed; a histogram's series add _bucket/_sum/_count)
CATALOG: tuple[MetricSpec, ...] = (
    # -- the node and its API (the API process) --
    _spec("drover_node_info", "gauge", "This node: always 1", ("node", "az", "cloud", "version")),
    _spec(
        "drover_api_requests_total",
        "counter",
        "API requests answered, by route template and status code",
        ("method", "route", "status"),
    ),
    _spec(
        "drover_api_request_duration_seconds",
        "histogram",
        "Time to answer an API request, by route template",
        ("method", "route"),
    ),
    _spec("drover_api_requests_in_flight", "gauge", "API requests being answered now"),
    _spec(
        "drover_api_job_documents_total",
        "counter",
        "Job documents GET /v1/jobs (its pages) and GET /v1/jobs/{name} answered, by whether "
        "the memo had them (hit) or they were made from their rows (miss)",
        ("result",),
    ),
    _spec(
        "drover_actor_metrics_up",
        "gauge",
        "1 when the last collection of the actors' figures succeeded and is recent",
    ),
    _spec(
        "drover_actor_metrics_age_seconds",
        "gauge",
        "Age of the actors' figures served here (collected every DROVER_METRICS_INTERVAL)",
    ),
    _spec(
        "drover_actor_metrics_collection_duration_seconds",
        "gauge",
        "How long the last collection of the actors' figures took",
    ),
    # -- from the store: this node's owned jobs (the sum over nodes is the fleet) --
    _spec(
        "drover_jobs",
        "gauge",
        "Jobs this node owns, by group, cluster and observed state",
        ("group", "cluster", "state"),
        "store",
    ),
    _spec("drover_jobs_owned", "gauge", "Jobs this node owns, by group", ("group",), "store"),
    _spec(
        "drover_cluster_health",
        "gauge",
        "1 for the cluster's current health state, 0 for the others (every node reports it)",
        ("cluster", "state"),
        "store",
    ),
    _spec(
        "drover_replicas",
        "gauge",
        "Checkpoint replicas of the jobs this node owns, by source and target cluster and state",
        ("source_cluster", "target_cluster", "state"),
        "store",
    ),
    _spec(
        "drover_replica_lag_batches",
        "gauge",
        "The largest replication lag in batches among the replicas of the jobs this node owns",
        ("source_cluster", "target_cluster"),
        "store",
    ),
    _spec(
        "drover_replica_lag_seconds",
        "gauge",
        "The oldest committed batch a replica of a job this node owns lacks: its age in seconds",
        ("source_cluster", "target_cluster"),
        "store",
    ),
    _spec(
        "drover_store_collection_duration_seconds",
        "gauge",
        "How long the last read of the store's figures for /metrics took",
        (),
        "store",
    ),
    _spec(
        "drover_store_collection_errors_total",
        "counter",
        "Reads of the store's figures for /metrics that failed",
        (),
        "store",
    ),
    _spec(
        "drover_jobs_stalled",
        "gauge",
        "RUNNING jobs this node owns whose run is stalled (no progress for stall_after)",
        ("group", "cluster"),
        "store",
    ),
    _spec(
        "drover_alerts_firing",
        "gauge",
        "Alerts firing now, by kind and severity (every node reports the fleet's: use max)",
        ("kind", "severity"),
        "store",
    ),
    _spec(
        "drover_alert_deliveries_pending",
        "gauge",
        "Alert messages waiting in the outbox (every node reports the fleet's: use max)",
        (),
        "store",
    ),
    _spec(
        "drover_alert_deliveries_given_up",
        "gauge",
        "Alert messages given up after their last attempt (every node reports the fleet's)",
        (),
        "store",
    ),
    _spec(
        "drover_progress_reports_total",
        "counter",
        "Progress reports pipelines sent with their fence checks to this node, by result "
        "(accepted, invalid)",
        ("result",),
    ),
    _spec(
        "drover_progress_pending_runs",
        "gauge",
        "Runs whose progress reports wait for the next write to the store",
    ),
    _spec(
        "drover_progress_flush_duration_seconds",
        "gauge",
        "How long the last write of the progress reports took",
    ),
    _spec(
        "drover_progress_flush_errors_total",
        "counter",
        "Writes of the progress reports that failed (retried with the next write)",
    ),
    # -- the supervisor --
    _spec(
        "drover_actor_up",
        "gauge",
        "1 when the node's actor answered the supervisor's last ping",
        ("actor",),
        "supervisor",
    ),
    # -- membership (built by the supervisor from membership's snapshot) --
    _spec(
        "drover_zookeeper_connection_state",
        "gauge",
        "1 for this node's ZooKeeper connection state (CONNECTED, SUSPENDED, LOST; NONE: "
        "standalone; UNKNOWN: membership not answering), 0 for the others",
        ("state",),
        "membership",
    ),
    _spec(
        "drover_membership_epoch",
        "gauge",
        "Membership epoch of the group as this node sees it",
        ("group",),
        "membership",
    ),
    _spec(
        "drover_membership_members",
        "gauge",
        "Live members of the group, by role",
        ("group", "role"),
        "membership",
    ),
    _spec(
        "drover_membership_pool_size",
        "gauge",
        "Members of the group's ownership pool",
        ("group",),
        "membership",
    ),
    _spec(
        "drover_membership_in_pool",
        "gauge",
        "1 when this node is in the group's ownership pool (owns a share of its jobs)",
        ("group",),
        "membership",
    ),
    _spec(
        "drover_claim_lease_age_seconds",
        "gauge",
        "Seconds since the last confirmed ZooKeeper round trip (claims are valid while this is "
        "below the lease)",
        (),
        "membership",
    ),
    _spec(
        "drover_claim_lease_seconds",
        "gauge",
        "Length of a claim's lease (half the ZooKeeper session timeout)",
        (),
        "membership",
    ),
    # -- the reconcile loops --
    _spec(
        "drover_reconcile_tick_duration_seconds",
        "histogram",
        "Duration of one reconcile tick of a group",
        ("group",),
        "reconciler",
    ),
    _spec(
        "drover_reconcile_phase_duration_seconds",
        "histogram",
        "Time one tick spent in a phase (claim, read, observe, plan, act, record)",
        ("group", "phase"),
        "reconciler",
    ),
    _spec(
        "drover_reconcile_ticks_total",
        "counter",
        "Reconcile ticks, by outcome (ok, paused: no claim, error)",
        ("group", "outcome"),
        "reconciler",
    ),
    _spec(
        "drover_reconcile_actions_total",
        "counter",
        "Actions the reconcile loop took, by kind (Submit, Kill, CloseRun, Observed, ...)",
        ("group", "kind"),
        "reconciler",
    ),
    _spec(
        "drover_reconcile_errors_total",
        "counter",
        "Jobs whose reconcile step failed (retried next tick)",
        ("group",),
        "reconciler",
    ),
    _spec(
        "drover_reconcile_jobs",
        "gauge",
        "Jobs the group's loop keeps working on (desired RUNNING or not at rest)",
        ("group",),
        "reconciler",
    ),
    _spec(
        "drover_reconcile_rows_read_total",
        "counter",
        "Job rows the loop read from the store",
        ("group",),
        "reconciler",
    ),
    _spec(
        "drover_reconcile_last_tick_timestamp_seconds",
        "gauge",
        "When the group's loop last finished a tick (Unix time)",
        ("group",),
        "reconciler",
    ),
    _spec(
        "drover_stall_transitions_total",
        "counter",
        "Stall verdicts recorded by this node, by kind (stalled, recovered, restarted)",
        ("group", "kind"),
        "reconciler",
    ),
    _spec(
        "drover_alert_deliveries_total",
        "counter",
        "Alert messages this node sent, by channel kind and result (delivered, retried, given_up)",
        ("channel_kind", "result"),
        "supervisor",
    ),
    # -- the cluster monitor --
    _spec(
        "drover_cluster_probe_duration_seconds",
        "histogram",
        "Time a health probe of the cluster took (a failed probe included)",
        ("cluster",),
        "monitor",
    ),
    _spec(
        "drover_cluster_probes_total",
        "counter",
        "Health probes of the cluster by this node, by result (ok, failed)",
        ("cluster", "result"),
        "monitor",
    ),
)


@dataclass(frozen=True)
class ActorMetrics:
    """The last collection of the actors' figures, as the API process keeps it."""

    #: Prometheus metric families (empty before the first collection)
    families: list[Metric] = field(default_factory=list)
    #: when they were collected (``time.monotonic``; None: never)
    collected_at: float | None = None
    #: how long the collection took (seconds)
    seconds: float = 0.0
    #: why the last attempt failed (None: it did not)
    error: str | None = None


#: spec by name
BY_NAME: Mapping[str, MetricSpec] = {spec.name: spec for spec in CATALOG}

TICK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
PHASE_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
PROBE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0)


def _metric(cls: Any, name: str, registry: CollectorRegistry, **kwargs: Any) -> Any:
    """A metric of :data:`CATALOG` (its help and labels from there) in ``registry``."""
    spec = BY_NAME[name]
    # prometheus_client adds _total to counters itself
    base = name[: -len("_total")] if spec.kind == "counter" else name
    return cls(base, spec.help, list(spec.labels), registry=registry, **kwargs)


def families_of(registry: CollectorRegistry) -> list[Metric]:
    """The registry's families as plain values (picklable: they cross process boundaries)."""
    return list(registry.collect())


class ReconcilerMetrics:
    """The reconcile loops' figures (one per JobReconciler actor process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.tick = _metric(
            Histogram, "drover_reconcile_tick_duration_seconds", r, buckets=TICK_BUCKETS
        )
        self.phase = _metric(
            Histogram, "drover_reconcile_phase_duration_seconds", r, buckets=PHASE_BUCKETS
        )
        self.ticks = _metric(Counter, "drover_reconcile_ticks_total", r)
        self.actions = _metric(Counter, "drover_reconcile_actions_total", r)
        self.errors = _metric(Counter, "drover_reconcile_errors_total", r)
        self.jobs = _metric(Gauge, "drover_reconcile_jobs", r)
        self.rows_read = _metric(Counter, "drover_reconcile_rows_read_total", r)
        self.last_tick = _metric(Gauge, "drover_reconcile_last_tick_timestamp_seconds", r)
        self.stalls = _metric(Counter, "drover_stall_transitions_total", r)

    def observe_stalls(self, group: str, done: Any) -> None:
        """Record one stall check's :class:`~scheduler.loops.stalls.StallRound`."""
        for kind in ("stalled", "recovered", "restarted"):
            count = getattr(done, kind, 0)
            if count:
                self.stalls.labels(group, kind).inc(count)

    def observe(self, group: str, stats: Any, *, at: float | None = None) -> None:
        """Record one tick's :class:`~scheduler.loops.reconciler.TickStats`."""
        outcome = "paused" if stats.paused else ("error" if stats.errors else "ok")
        self.ticks.labels(group, outcome).inc()
        self.tick.labels(group).observe(stats.seconds)
        for phase, seconds in getattr(stats, "phases", {}).items():
            self.phase.labels(group, phase).observe(seconds)
        for kind, count in getattr(stats, "action_kinds", {}).items():
            self.actions.labels(group, kind).inc(count)
        if stats.errors:
            self.errors.labels(group).inc(stats.errors)
        self.rows_read.labels(group).inc(stats.rows_read)
        if not stats.paused:
            self.jobs.labels(group).set(stats.jobs)
        self.last_tick.labels(group).set(at if at is not None else time.time())

    def forget(self, group: str) -> None:
        """A retired group's series go (its loop is gone)."""
        for metric in (self.jobs, self.last_tick):
            try:
                metric.remove(group)
            except KeyError:
                pass

    def collect(self) -> list[Metric]:
        return families_of(self.registry)


class AlertMetrics:
    """The alert loop's figures (hosted in the node process, with the supervisor)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.deliveries = _metric(Counter, "drover_alert_deliveries_total", registry)


class MonitorMetrics:
    """The cluster monitor's figures (hosted in the supervisor's process)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.probe = _metric(
            Histogram, "drover_cluster_probe_duration_seconds", registry, buckets=PROBE_BUCKETS
        )
        self.probes = _metric(Counter, "drover_cluster_probes_total", registry)

    def observe(self, cluster: str, ok: bool, latency_s: float) -> None:
        self.probe.labels(cluster).observe(max(latency_s, 0.0))
        self.probes.labels(cluster, "ok" if ok else "failed").inc()


def _gauge(name: str) -> GaugeMetricFamily:
    spec = BY_NAME[name]
    return GaugeMetricFamily(name, spec.help, labels=list(spec.labels))


#: connection states the gauge always shows (one of them is 1)
CONNECTION_STATES = ("CONNECTED", "SUSPENDED", "LOST", "NONE", "UNKNOWN")


def membership_families(snapshot: Any, *, lease_seconds: float) -> list[Metric]:
    """Membership's figures from its :class:`~scheduler.decisions.membership.MembershipSnapshot`
    (pure).

    ``snapshot`` None: membership did not answer (state UNKNOWN, nothing else is known).
    """
    state = _gauge("drover_zookeeper_connection_state")
    current = "UNKNOWN" if snapshot is None else str(snapshot.connection)
    if current not in CONNECTION_STATES:
        current = "UNKNOWN"
    for name in CONNECTION_STATES:
        state.add_metric([name], 1.0 if name == current else 0.0)
    families: list[Metric] = [state]
    if snapshot is None:
        return families
    epoch = _gauge("drover_membership_epoch")
    members = _gauge("drover_membership_members")
    pool = _gauge("drover_membership_pool_size")
    in_pool = _gauge("drover_membership_in_pool")
    me = snapshot.this_node.node_id
    for group, view in sorted(snapshot.groups.items()):
        epoch.add_metric([group], float(view.epoch))
        roles: dict[str, int] = {"active": 0, "backup": 0}
        for member in view.members:
            roles[str(member.role)] = roles.get(str(member.role), 0) + 1
        for role, count in sorted(roles.items()):
            members.add_metric([group, role], float(count))
        pool.add_metric([group], float(len(view.pool)))
        in_pool.add_metric([group], 1.0 if me in view.pool else 0.0)
    families += [epoch, members, pool, in_pool]
    if not snapshot.standalone:
        lease = _gauge("drover_claim_lease_seconds")
        lease.add_metric([], lease_seconds)
        families.append(lease)
        age = getattr(snapshot, "lease_age_seconds", None)
        if age is not None:
            lease_age = _gauge("drover_claim_lease_age_seconds")
            lease_age.add_metric([], age)
            families.append(lease_age)
    return families


def actor_up_family(health: Mapping[str, Mapping[str, Any]]) -> Metric:
    """``drover_actor_up`` from the supervisor's health of its actors."""
    up = _gauge("drover_actor_up")
    for actor, status in sorted(health.items()):
        up.add_metric([actor], 1.0 if status.get("alive") else 0.0)
    return up


def names_in(families: Iterable[Metric]) -> set[str]:
    """The exposed names of ``families`` (counters with their ``_total``)."""
    names = set()
    for family in families:
        names.add(f"{family.name}_total" if family.type == "counter" else family.name)
    return names
