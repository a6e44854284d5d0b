"""``GET /v1/jobs/{name}/runs/{attempt}/log``: a piece of a run's driver log (tail, a range,
follow by asking again from ``next_offset``; ``api/schemas/logs.py`` says how).

The log comes from the run's cluster through its backend (``scheduler.core.backend.DriverLogs``):
a standalone worker's stdout/stderr of the driver, a local run's ``driver.log``. A local run's
log is on the node that started it: any other node asks that one
(``GET /v1/internal/jobs/{name}/runs/{attempt}/log``, with the deployment secret), so every node
answers for every run. A log can hold the pipeline's data: it is readable by the job team's
viewers and up, like the job, never anonymously (``api/security/rules.py``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request

from api.deps import ContextDep, NamePath, NodeContext, StoreDep
from api.problems import problem_responses
from api.schemas.logs import (
    DEFAULT_LOG_LIMIT,
    MAX_LOG_LIMIT,
    MAX_LOG_OFFSET,
    LogStream,
    RunLogPublic,
)
from scheduler.core.backend import logs_of
from scheduler.core.errors import ClusterUnreachable, NotFound
from scheduler.core.names import validate_name
from scheduler.core.records import ClusterRecord, RunRecord
from scheduler.core.states import ClusterKind
from scheduler.store import catalog as catalog_store
from scheduler.store import jobs as jobs_store
from scheduler.store.db import Store

router = APIRouter(tags=["jobs"])

#: cluster kinds whose drivers run on (and log to) the node that submitted them
NODE_LOCAL_KINDS = frozenset({ClusterKind.LOCAL, ClusterKind.SPARK_SUBMIT})

AttemptPath = Annotated[
    int,
    Path(ge=1, le=2**31 - 1, description="the run's attempt number (1, 2, ...)", examples=[3]),
]
StreamQuery = Annotated[
    LogStream | None,
    Query(
        description="which stream: `stdout` or `stderr` (standalone), `combined` (local). "
        "Absent: the first the run's driver has (`streams` of the answer)",
        examples=["stderr"],
    ),
]
OffsetQuery = Annotated[
    int | None,
    Query(
        ge=0,
        le=MAX_LOG_OFFSET,
        description="the byte offset to read from (a previous answer's `next_offset` to "
        "follow). Absent: the log's last `limit` bytes",
        examples=[10240],
    ),
]
LimitQuery = Annotated[
    int,
    Query(ge=1, le=MAX_LOG_LIMIT, description="at most this many bytes", examples=[65536]),
]
RESPONSES = problem_responses(404, 502)


@router.get(
    "/v1/jobs/{name}/runs/{attempt}/log",
    response_model=RunLogPublic,
    responses=RESPONSES,
    operation_id="get_job_run_log",
    summary="Read a run's driver log",
    description="A piece of one of the run's driver log streams, from the cluster that runs "
    "(or ran) it: the tail without `offset`, else the bytes from `offset` on. Follow a running "
    "driver by asking again from `next_offset` until `run_ended` and `at_end`. 404: no such "
    "run, the run was never submitted, or the cluster keeps no log of it (any more); 502: the "
    "cluster does not answer.",
)
def get_run_log(
    name: NamePath,
    attempt: AttemptPath,
    ctx: ContextDep,
    store: StoreDep,
    request: Request,
    stream: StreamQuery = None,
    offset: OffsetQuery = None,
    limit: LimitQuery = DEFAULT_LOG_LIMIT,
) -> RunLogPublic | dict[str, Any]:
    run, cluster = _run_of(store, name, attempt)
    node = run.node_id
    if ClusterKind(cluster.kind) in NODE_LOCAL_KINDS and node != ctx.settings.node_id:
        return _ask_node(ctx, node, request)
    return _read(request, run, cluster, stream, offset, limit)


@router.get(
    "/v1/internal/jobs/{name}/runs/{attempt}/log",
    response_model=RunLogPublic,
    responses=RESPONSES,
    operation_id="get_internal_run_log",
    summary="Read a run's driver log on this node (between nodes)",
    description="What `GET /v1/jobs/{name}/runs/{attempt}/log` answers, from this node's own "
    "backends: how another node reads the log of a run this node started on a local or "
    "spark-submit cluster. Nodes only (the deployment secret).",
)
def get_internal_run_log(
    name: NamePath,
    attempt: AttemptPath,
    store: StoreDep,
    request: Request,
    stream: StreamQuery = None,
    offset: OffsetQuery = None,
    limit: LimitQuery = DEFAULT_LOG_LIMIT,
) -> RunLogPublic:
    run, cluster = _run_of(store, name, attempt)
    return _read(request, run, cluster, stream, offset, limit)


def _run_of(store: Store, name: str, attempt: int) -> tuple[RunRecord, ClusterRecord]:
    with store.session() as session:
        run = jobs_store.get_run(session, validate_name(name, "job name"), attempt)
        cluster = catalog_store.get_cluster(session, run.cluster)
    return run, cluster


def _read(
    request: Request,
    run: RunRecord,
    cluster: ClusterRecord,
    stream: str | None,
    offset: int | None,
    limit: int,
) -> RunLogPublic:
    if not run.submission_id:
        raise NotFound(
            f"run {run.attempt} of job {run.job_name!r} was never submitted: it has no log",
            job=run.job_name,
        )
    backend = logs_of(request.app.state.backends.for_cluster(cluster))
    if backend is None:
        raise NotFound(
            f"Drover reads no driver logs from clusters of kind {cluster.kind!r} (yet)",
            job=run.job_name,
        )
    chosen = stream or backend.log_streams[0]
    chunk = backend.driver_log(run.submission_id, chosen, offset, limit)
    return RunLogPublic.of(run, chunk, backend.log_streams)


def _ask_node(ctx: NodeContext, node: str, request: Request) -> dict[str, Any]:
    """The answer of the node that started a local run (its own backends read its log)."""
    import httpx

    from scheduler.backends import http
    from scheduler.decisions.identity import NODE_SECRET_HEADER

    card = next((n for n in ctx.views().nodes() if n.node_id == node), None)
    if card is None or not card.api_url:
        raise NotFound(
            f"the log of this run is on node {node!r}, which is not live in this node's groups"
        )
    path = request.url.path.removeprefix("/v1")
    url = f"{card.api_url.rstrip('/')}/v1/internal{path}"
    try:
        response = http.one_off(
            "GET",
            url,
            params=request.query_params,
            headers={NODE_SECRET_HEADER: ctx.settings.resolved_deployment_secret},
            timeout=10.0,
        )
    except httpx.HTTPError as exc:
        raise ClusterUnreachable(f"node {node!r} at {card.api_url}: {exc}") from exc
    if response.status_code == 404:
        raise NotFound(_detail(response))
    if response.status_code != 200:
        raise ClusterUnreachable(
            f"node {node!r} answered {response.status_code}: {_detail(response)}"
        )
    answer: dict[str, Any] = response.json()
    return answer


def _detail(response: Any) -> str:
    try:
        return str(response.json().get("detail", ""))
    except ValueError:
        return str(response.text[:200])
