"""The FastAPI application of one node."""

from __future__ import annotations

from fastapi import Depends, FastAPI

from api import problems, security
from api.deps import NodeContext, check_request
from api.routes import audit, clusters, groups, health, identities, jobs
from api.routes.fence import router as fence_router
from api.routes.health_clusters import router as cluster_health_router
from api.routes.membership import router as membership_router
from api.security.rules import authorize, unruled_routes

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


def create_app(context: NodeContext) -> FastAPI:
    app = FastAPI(
        title="Drover",
        version="0.1.0",
        summary="Leaderless, highly available scheduler for long-running PySpark jobs",
        description=DESCRIPTION,
        # every route: the one authorization function (api/security/rules.py), then the request
        # checks (undeclared query parameters are a 400, non-JSON bodies a 415)
        dependencies=[Depends(authorize), Depends(check_request)],
        responses=problems.COMMON_RESPONSES,
    )
    app.state.context = context
    problems.install(app)
    security.install(app)
    app.include_router(health.router)
    app.include_router(jobs.router)
    app.include_router(clusters.router)
    app.include_router(cluster_health_router)
    app.include_router(groups.router)
    app.include_router(fence_router)
    app.include_router(membership_router)
    app.include_router(identities.router)
    app.include_router(audit.router)
    missing = unruled_routes(app.routes)
    if missing:  # a route nobody decided who may call is a bug, not an open door
        raise RuntimeError(f"routes without an authorization rule: {missing}")
    return app
