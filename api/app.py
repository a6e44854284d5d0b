"""The FastAPI application of one node."""

from __future__ import annotations

from fastapi import Depends, FastAPI

from api import problems, security
from api.deps import NodeContext
from api.routes import audit, clusters, groups, health, identities, jobs
from api.routes.fence import router as fence_router
from api.routes.health_clusters import router as cluster_health_router
from api.routes.membership import router as membership_router
from api.security.rules import authorize, unruled_routes


def create_app(context: NodeContext) -> FastAPI:
    app = FastAPI(
        title="Drover",
        version="0.1.0",
        summary="Leaderless, highly available scheduler for long-running PySpark jobs",
        # the one authorization function: every route runs it (see api/security/rules.py)
        dependencies=[Depends(authorize)],
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
