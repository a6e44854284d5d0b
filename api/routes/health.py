"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from api.deps import ContextDep
from api.problems import problem, problem_responses, store_problem
from scheduler.core.errors import StoreError

router = APIRouter(tags=["health"], responses=problem_responses(400, 500, 503))


@router.get(
    "/healthz",
    operation_id="check_liveness",
    summary="Liveness: the process answers",
)
def healthz(ctx: ContextDep) -> dict[str, str]:
    """The process answers."""
    return {"status": "ok", "node": ctx.settings.node_id}


@router.get(
    "/readyz",
    operation_id="check_readiness",
    summary="Readiness: the store is migrated and the actors are up",
    response_model=None,
)
def readyz(ctx: ContextDep) -> dict[str, object] | JSONResponse:
    """The store has the right schema and the node's actors are up."""
    try:
        ctx.store.check_schema()
    except StoreError as exc:
        return store_problem(exc, "/readyz")
    ready, detail = ctx.readiness()
    if not ready:
        return problem(503, "not-ready", detail, "/readyz")
    return {"status": "ready", "node": ctx.settings.node_id, "detail": detail}
