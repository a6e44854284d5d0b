"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from api.deps import ContextDep
from api.problems import problem
from scheduler.errors import StoreError

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz(ctx: ContextDep) -> dict[str, str]:
    """The process answers."""
    return {"status": "ok", "node": ctx.settings.node_id}


@router.get("/readyz", response_model=None)
def readyz(ctx: ContextDep) -> dict[str, object] | JSONResponse:
    """The store has the right schema and the node's actors are up."""
    try:
        ctx.store.check_schema()
    except StoreError as exc:
        return problem(503, exc.kind, exc.message, "/readyz")
    ready, detail = ctx.readiness()
    if not ready:
        return problem(503, "not-ready", detail, "/readyz")
    return {"status": "ready", "node": ctx.settings.node_id, "detail": detail}
