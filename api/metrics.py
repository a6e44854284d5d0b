"""``GET /metrics`` (Prometheus text format) and what every request leaves behind: its id in the
logs and the ``X-Request-ID`` header, and its count and latency by route template.

What ``/metrics`` serves (``scheduler/core/metrics.py`` lists every metric):

- this process's own figures: API requests by method, route template and status, their latency
  histograms, requests in flight;
- the actors' figures (reconcile loops, membership, cluster monitor), as the node's
  ``MetricsRelay`` last collected them (every ``DROVER_METRICS_INTERVAL`` seconds, off the
  request path: a scrape never waits on an actor), with their age;
- aggregates read from the store: the jobs this node owns by group, cluster and state (the sum
  over all nodes is the fleet, without double counting), and the clusters' health. They are
  reused for ``DROVER_METRICS_STORE_TTL`` seconds, so scraping often costs the store little.

The label sets are bounded (routes are templates such as ``/v1/jobs/{name}``, never paths): the
series count does not grow with the number of jobs.
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from scheduler.core.logs import log_context
from scheduler.core.metrics import BY_NAME, ActorMetrics
from scheduler.core.states import JobState
from scheduler.decisions.replication import ReplicaState
from scheduler.loops.progress import ProgressSink
from scheduler.store import telemetry

log = logging.getLogger("drover.api.metrics")

REQUEST_ID_HEADER = "X-Request-ID"
#: an incoming request id is kept when it is this tame (else a new one is made)
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: requests logged at INFO (a line per change; reads are counted, not logged)
_MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: the route label of a request no route matched (404s for random paths stay one series)
UNMATCHED = "unmatched"
#: health states every cluster shows (one of them is 1)
HEALTH_STATES = ("NORMAL", "VOTE_ABNORMAL", "THRESHOLD_ABNORMAL", "MANUAL_ABNORMAL")
#: actors' figures older than this many collection intervals are no longer served
STALE_AFTER_INTERVALS = 3

router = APIRouter(tags=["metrics"])


def _help(name: str) -> str:
    return BY_NAME[name].help


def _labels(name: str) -> list[str]:
    return list(BY_NAME[name].labels)


def _declared(
    metric: Callable[..., Any], name: str, registry: CollectorRegistry, **options: Any
) -> Any:
    """The ``metric`` (``Counter``, ``Gauge``, ``Histogram``) of ``scheduler.core.metrics``'
    ``name``, with its help and labels (a counter is declared without its ``_total``, which
    prometheus_client adds)."""
    return metric(
        name.removesuffix("_total"), _help(name), _labels(name), registry=registry, **options
    )


class ApiMetrics:
    """The API process's own figures."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = _declared(Counter, "drover_api_requests_total", registry)
        self.latency = _declared(
            Histogram, "drover_api_request_duration_seconds", registry, buckets=LATENCY_BUCKETS
        )
        self.in_flight = _declared(Gauge, "drover_api_requests_in_flight", registry)
        self.documents = _declared(Counter, "drover_api_job_documents_total", registry)
        #: the series of each (method, route, status) seen, looked up once (the label sets are
        #: bounded: templates, not paths)
        self._series: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, status)
        series = self._series.get(key)
        if series is None:  # only the event loop's thread observes: no race to fill it
            series = self._series[key] = (
                self.requests.labels(method, route, str(status)),
                self.latency.labels(method, route),
            )
        count, latency = series
        count.inc()
        latency.observe(seconds)


#: request ids made here: this process's random half, then a counter (32 hex digits, like a
#: UUID's; unique without a call for randomness per request, a system call that also lets go of
#: the GIL on the event loop's thread)
_ID_PREFIX = uuid.uuid4().hex[:16]
_ID_COUNTER = itertools.count(1)


def new_request_id() -> str:
    return f"{_ID_PREFIX}{next(_ID_COUNTER) & 0xFFFFFFFFFFFFFFFF:016x}"


class RequestObserver:
    """ASGI middleware: a request id for every request (logs, ``X-Request-ID``), and the
    request's count and latency by route template."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = ""
        for key, value in scope.get("headers", ()):
            if key == b"x-request-id":
                incoming = value.decode("latin-1")
                break
        request_id = incoming if _REQUEST_ID.fullmatch(incoming) else new_request_id()
        scope.setdefault("state", {})["request_id"] = request_id
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = request_id
            await send(message)

        method = scope.get("method", "GET")
        method = method if method in _METHODS else "OTHER"
        started = time.perf_counter()
        self.metrics.in_flight.inc()
        try:
            with log_context(request_id=request_id):
                await self.app(scope, receive, send_with_id)
        finally:
            self.metrics.in_flight.dec()
            route = getattr(scope.get("route"), "path", None) or UNMATCHED
            elapsed = time.perf_counter() - started
            self.metrics.observe(method, route, status, elapsed)
            # the access line: every request at DEBUG, writes at INFO, failures at WARNING;
            # what it says is in fields too, for log queries (who changed what: the audit log)
            level = (
                logging.WARNING
                if status >= 500
                else logging.INFO
                if method in _MUTATING
                else logging.DEBUG
            )
            if log.isEnabledFor(level):
                principal = scope["state"].get("principal")
                fields = {
                    "method": method,
                    "route": route,
                    "status": status,
                    "duration_ms": round(elapsed * 1e3, 1),
                    "actor": getattr(principal, "subject", None),
                }
                with log_context(request_id=request_id):
                    log.log(
                        level,
                        "%s %s answered %d in %.1f ms",
                        method,
                        route,
                        status,
                        elapsed * 1e3,
                        extra=fields,
                    )


class StoreFigures:
    """Aggregates from the store, reused for ``ttl`` seconds (one reader at a time)."""

    def __init__(self, store: Any, node_id: str, ttl: float) -> None:
        self._store = store
        self._node_id = node_id
        self._ttl = ttl
        self._lock = threading.Lock()
        self._families: list[Metric] = []
        self._read_at = -float("inf")
        self._seconds = 0.0
        self._errors = 0

    def families(self) -> list[Metric]:
        with self._lock:
            if time.monotonic() - self._read_at >= self._ttl:
                started = time.perf_counter()
                try:
                    self._families = self._read()
                except Exception as exc:  # noqa: BLE001 - counted and logged; old figures go
                    self._errors += 1
                    self._families = []
                    log.warning("/metrics cannot read the store's figures: %s", exc)
                self._read_at = time.monotonic()
                self._seconds = time.perf_counter() - started
            seconds = GaugeMetricFamily(
                "drover_store_collection_duration_seconds",
                _help("drover_store_collection_duration_seconds"),
                value=self._seconds,
            )
            errors = CounterMetricFamily(
                "drover_store_collection_errors",
                _help("drover_store_collection_errors_total"),
                value=self._errors,
            )
            return [*self._families, seconds, errors]

    def _read(self) -> list[Metric]:
        with self._store.session() as session:
            counts = telemetry.owned_job_counts(session, self._node_id)
            health = telemetry.cluster_health(session)
            replicas = telemetry.replica_figures(session, self._node_id)
            stalled = telemetry.stalled_jobs(session, self._node_id)
            firing, pending, given_up = telemetry.alert_figures(session)
        families = job_families(counts) + health_families(health) + replica_families(replicas)
        jobs = GaugeMetricFamily(
            "drover_jobs_stalled", _help("drover_jobs_stalled"), labels=["group", "cluster"]
        )
        owned = {(c.group, c.cluster) for c in counts}
        by_pair = {(g, c): n for g, c, n in stalled}
        for group, cluster in sorted(owned | set(by_pair)):
            jobs.add_metric([group, cluster], float(by_pair.get((group, cluster), 0)))
        alerts = GaugeMetricFamily(
            "drover_alerts_firing", _help("drover_alerts_firing"), labels=["kind", "severity"]
        )
        for kind, severity, count in sorted(firing):
            alerts.add_metric([kind, severity], float(count))
        families += [
            jobs,
            alerts,
            GaugeMetricFamily(
                "drover_alert_deliveries_pending",
                _help("drover_alert_deliveries_pending"),
                value=pending,
            ),
            GaugeMetricFamily(
                "drover_alert_deliveries_given_up",
                _help("drover_alert_deliveries_given_up"),
                value=given_up,
            ),
        ]
        return families


def job_families(counts: Iterable[telemetry.JobCount]) -> list[Metric]:
    """``drover_jobs`` (every state of each group and cluster this node owns jobs of, zeros
    included, so a series does not vanish when its last job leaves a state) and
    ``drover_jobs_owned``."""
    jobs = GaugeMetricFamily("drover_jobs", _help("drover_jobs"), labels=_labels("drover_jobs"))
    owned = GaugeMetricFamily(
        "drover_jobs_owned", _help("drover_jobs_owned"), labels=_labels("drover_jobs_owned")
    )
    table: dict[tuple[str, str], dict[str, int]] = {}
    per_group: dict[str, int] = {}
    for c in counts:
        table.setdefault((c.group, c.cluster), {})[c.state] = c.count
        per_group[c.group] = per_group.get(c.group, 0) + c.count
    for (group, cluster), by_state in sorted(table.items()):
        for state in JobState:
            jobs.add_metric([group, cluster, state.value], float(by_state.get(state.value, 0)))
    for group, count in sorted(per_group.items()):
        owned.add_metric([group], float(count))
    return [jobs, owned]


def health_families(health: Iterable[tuple[str, str]]) -> list[Metric]:
    family = GaugeMetricFamily(
        "drover_cluster_health",
        _help("drover_cluster_health"),
        labels=_labels("drover_cluster_health"),
    )
    for cluster, state in health:
        for name in HEALTH_STATES:
            family.add_metric([cluster, name], 1.0 if state == name else 0.0)
    return [family]


def replica_families(
    figures: Iterable[telemetry.ReplicaFigures], now: datetime | None = None
) -> list[Metric]:
    """``drover_replicas`` (every state of each source/target pair, zeros included) and the
    largest lag of each pair in batches and in seconds (as of ``now``)."""
    now = now or datetime.now(UTC)
    replicas = GaugeMetricFamily(
        "drover_replicas", _help("drover_replicas"), labels=_labels("drover_replicas")
    )
    batches = GaugeMetricFamily(
        "drover_replica_lag_batches",
        _help("drover_replica_lag_batches"),
        labels=_labels("drover_replica_lag_batches"),
    )
    seconds = GaugeMetricFamily(
        "drover_replica_lag_seconds",
        _help("drover_replica_lag_seconds"),
        labels=_labels("drover_replica_lag_seconds"),
    )
    pairs: dict[tuple[str, str], dict[str, telemetry.ReplicaFigures]] = {}
    for f in figures:
        pairs.setdefault((f.source_cluster, f.target_cluster), {})[f.state] = f
    for (source, target), by_state in sorted(pairs.items()):
        for state in ReplicaState:
            row = by_state.get(state.value)
            replicas.add_metric([source, target, state.value], float(row.count if row else 0))
        batches.add_metric([source, target], float(max(r.lag_batches for r in by_state.values())))
        oldest = [r.oldest_missing_at for r in by_state.values() if r.oldest_missing_at]
        age = max(0.0, (now - min(oldest)).total_seconds()) if oldest else 0.0
        seconds.add_metric([source, target], round(age, 3))
    return [replicas, batches, seconds]


class NodeCollector(Collector):
    """Everything ``/metrics`` serves beyond the API process's own metrics."""

    def __init__(
        self,
        *,
        node_info: dict[str, str],
        store_figures: StoreFigures,
        actor_metrics: Callable[[], ActorMetrics | None],
        interval: float,
        progress: ProgressSink | None = None,
    ) -> None:
        self._progress = progress
        self._node_info = node_info
        self._store_figures = store_figures
        self._actor_metrics = actor_metrics
        self._interval = interval

    def collect(self) -> Iterator[Metric]:
        info = GaugeMetricFamily(
            "drover_node_info", _help("drover_node_info"), labels=list(self._node_info)
        )
        info.add_metric(list(self._node_info.values()), 1.0)
        yield info
        yield from self._actor_families()
        yield from self._store_figures.families()
        yield from self._progress_families()

    def _progress_families(self) -> Iterator[Metric]:
        sink = self._progress
        if sink is None:
            return
        stats = sink.stats
        reports = CounterMetricFamily(
            "drover_progress_reports",
            _help("drover_progress_reports_total"),
            labels=["result"],
        )
        reports.add_metric(["accepted"], stats.accepted)
        reports.add_metric(["invalid"], stats.invalid)
        yield reports
        yield GaugeMetricFamily(
            "drover_progress_pending_runs",
            _help("drover_progress_pending_runs"),
            value=stats.pending_runs,
        )
        yield GaugeMetricFamily(
            "drover_progress_flush_duration_seconds",
            _help("drover_progress_flush_duration_seconds"),
            value=stats.last_flush_seconds,
        )
        yield CounterMetricFamily(
            "drover_progress_flush_errors",
            _help("drover_progress_flush_errors_total"),
            value=stats.flush_errors,
        )

    def _actor_families(self) -> Iterator[Metric]:
        latest = self._actor_metrics()
        if latest is None:  # an API without actors (tests, tools)
            return
        age = (
            time.monotonic() - latest.collected_at
            if latest.collected_at is not None
            else float("inf")
        )
        fresh = age <= self._interval * STALE_AFTER_INTERVALS
        yield GaugeMetricFamily(
            "drover_actor_metrics_up",
            _help("drover_actor_metrics_up"),
            value=1.0 if fresh and latest.error is None else 0.0,
        )
        if latest.collected_at is not None:
            yield GaugeMetricFamily(
                "drover_actor_metrics_age_seconds",
                _help("drover_actor_metrics_age_seconds"),
                value=age,
            )
            yield GaugeMetricFamily(
                "drover_actor_metrics_collection_duration_seconds",
                _help("drover_actor_metrics_collection_duration_seconds"),
                value=latest.seconds,
            )
        if fresh:  # old figures are not served as if they were current
            yield from latest.families


def install(app: FastAPI, *, version: str) -> None:
    """The request observer and ``/metrics`` for ``app`` (its own registry: several apps in
    one process, as in tests, never share figures)."""
    context = app.state.context
    settings = context.settings
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)  # the API process's CPU, memory, open files
    metrics = ApiMetrics(registry)
    registry.register(
        NodeCollector(
            node_info={
                "node": settings.node_id,
                "az": settings.az,
                "cloud": settings.cloud,
                "version": version,
            },
            store_figures=StoreFigures(context.store, settings.node_id, settings.metrics_store_ttl),
            actor_metrics=context.actor_metrics,
            interval=settings.metrics_interval,
            progress=getattr(app.state, "progress", None),
        )
    )
    app.state.metrics_registry = registry
    documents = getattr(app.state, "job_documents", None)
    if documents is not None:  # the memo of job documents counts on this registry
        documents.count_on(metrics.documents)
    app.add_middleware(RequestObserver, metrics=metrics)
    app.include_router(router)


@router.get(
    "/metrics",
    response_class=Response,
    summary="Prometheus metrics of this node",
    description="The node's figures in the Prometheus text format (OpenMetrics when the "
    "`Accept` header asks for it): API requests, reconcile loops, membership, cluster probes, "
    "and the jobs this node owns by group, cluster and state. Open to anyone, like the probes "
    "(`/healthz`, `/readyz`); see docs/metrics.md.",
    operation_id="get_metrics",
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
)
def get_metrics(request: Request) -> Response:
    registry: CollectorRegistry = request.app.state.metrics_registry
    encoder, content_type = choose_encoder(request.headers.get("accept", ""))
    return Response(content=encoder(registry), media_type=content_type)
