"""The FastAPI application of one node."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio.to_thread
from fastapi import Depends, FastAPI

from api import apidocs, console, glossary, idempotency, metrics, problems, security
from api import openapi as contract
from api.creations import Creations
from api.deps import NodeContext, every_route
from api.documents import JobDocuments
from api.routes import (
    audit,
    auto_failover,
    clusters,
    failovers,
    groups,
    health,
    identities,
    jobs,
    revisions,
)
from api.routes.alerts import router as alerts_router
from api.routes.fence import router as fence_router
from api.routes.health_clusters import router as cluster_health_router
from api.routes.logs import router as logs_router
from api.routes.membership import router as membership_router
from api.routes.operations import router as operations_router
from api.routes.overview import router as overview_router
from api.routes.progress import router as progress_router
from api.routes.quotas import router as quotas_router
from api.routes.replication import router as replication_router
from api.security.rules import unruled_routes
from api.threads import WorkerThreads
from scheduler.backends.registry import BackendRegistry
from scheduler.loops.progress import ProgressSink

DESCRIPTION = """
Errors are RFC 9457 problem documents (`application/problem+json`: `type`, `title`, `status`,
`detail`, `instance`). 401: no valid credential; 403: the credential may not do this. 400: a body
that is not JSON, or a query parameter the route does not take;
415: a body in another media type; 422: a value that is not valid (the `errors` member says which);
412: `If-Match` names a version that is not current; 409: the request clashes with the current
state; 503: the metadata store is unavailable (the `incident` member names the server log entry).

Versions: a job's `spec_version` moves only when its spec changes (`PATCH`); it is the job's
`ETag` and what `If-Match` checks, so an ETag stays good while the scheduler moves the job through
its states. A job's `version` moves on every change of the row (state changes, commands, spec).
"""


def _lifespan(context: NodeContext) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # the threads that run the other plain ``def`` routes (FastAPI's, through anyio): as
        # many as the API's own (api/threads.py); the API's store keeps a connection for each
        threads = context.settings.api_threads
        anyio.to_thread.current_default_thread_limiter().total_tokens = threads
        yield
        if context.backends is None:  # the registry the app built (a context's is its owner's)
            app.state.backends.close()

    return lifespan


def create_app(context: NodeContext) -> FastAPI:
    app = FastAPI(
        lifespan=_lifespan(context),
        title="Drover",
        version="0.1.0",
        summary="Leaderless, highly available scheduler for long-running PySpark jobs",
        description=DESCRIPTION,
        # every route: the one authorization function (api/security/rules.py), then the request
        # checks (undeclared query parameters are a 400, non-JSON bodies a 415)
        dependencies=[Depends(every_route)],
        responses=problems.COMMON_RESPONSES,
        # FastAPI's pages load Swagger UI and ReDoc from a CDN: api/apidocs.py serves its own
        docs_url=None,
        redoc_url=None,
    )
    app.state.context = context
    settings = context.settings
    # the hot routes' and the security edge's blocking work (api/threads.py)
    app.state.threads = WorkerThreads(settings.api_threads)
    # what pipelines report with their fence checks, written in batches
    # (scheduler/loops/progress.py)
    app.state.progress = ProgressSink(
        context.store,
        flush_interval=settings.progress_flush_interval,
        sample_interval=settings.progress_sample_interval,
        keep=settings.progress_history,
    )
    # the documents of jobs a page of GET /v1/jobs shows, memoized on their rows
    app.state.job_documents = JobDocuments(settings.api_job_documents)
    # the cluster backends the API reads driver logs through (api/routes/logs.py)
    app.state.backends = context.backends or BackendRegistry(settings)
    # POST /v1/jobs: creations that arrive together share a transaction
    app.state.creations = Creations(context.store, settings)
    problems.install(app)
    idempotency.install(app)  # inside the security edge: keys belong to authenticated callers
    security.install(app)
    metrics.install(app, version=app.version)  # outermost: times and tags every request
    app.include_router(health.router)
    app.include_router(jobs.router)
    app.include_router(revisions.router)
    app.include_router(clusters.router)
    app.include_router(cluster_health_router)
    app.include_router(groups.router)
    app.include_router(fence_router)
    app.include_router(progress_router)
    app.include_router(logs_router)
    app.include_router(alerts_router)
    app.include_router(membership_router)
    app.include_router(identities.router)
    app.include_router(audit.router)
    app.include_router(replication_router)
    app.include_router(failovers.router)
    app.include_router(operations_router)
    app.include_router(auto_failover.router)
    app.include_router(auto_failover.switch_router)
    app.include_router(overview_router)
    app.include_router(quotas_router)
    console.install(app)  # the ops console's static files at /ui (not API routes)
    if settings.serve_api_docs:
        apidocs.install(app)  # Swagger UI at /docs, from the package (not API routes)
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        """The generated document, completed from the API's vocabulary (api/glossary.py) and
        with what the routes do not say (api/openapi.py: security, problems, tags, examples)."""
        if app.openapi_schema is None:
            app.openapi_schema = contract.finish(glossary.complete(generate()))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    missing = unruled_routes(app.routes)
    if missing:  # a route nobody decided who may call is a bug, not an open door
        raise RuntimeError(f"routes without an authorization rule: {missing}")
    return app
