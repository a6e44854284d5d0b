"""RFC 9457 problem documents: every error the API returns, mapped in one place."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from scheduler import errors

PROBLEM_MEDIA_TYPE = "application/problem+json"

#: most specific first
_STATUS: list[tuple[type[errors.DroverError], int]] = [
    (errors.PreconditionFailed, 412),
    (errors.Unauthenticated, 401),
    (errors.Forbidden, 403),
    (errors.PermissionCenterUnavailable, 503),
    (errors.InvalidInput, 422),
    (errors.NotFound, 404),
    (errors.Conflict, 409),
    (errors.StoreError, 503),
    (errors.CoordinationUnavailable, 503),
    (errors.ClusterError, 502),
]


_MEMBERS = frozenset({"type", "title", "status", "detail", "instance"})


#: the OpenAPI description of a problem document (RFC 9457)
PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "title", "status"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "instance": {"type": "string"},
    },
    "additionalProperties": True,
}


def problem_response(description: str) -> dict[str, Any]:
    """An OpenAPI ``responses`` entry whose body is a problem document."""
    return {
        "description": description,
        "content": {PROBLEM_MEDIA_TYPE: {"schema": PROBLEM_SCHEMA}},
    }


#: the answers every route may give whatever it does (the security edge's)
COMMON_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: problem_response("untrusted Host header"),
    401: problem_response("no credential, or one that does not verify"),
    403: problem_response("the credential may not do this"),
    415: problem_response("a mutation without a JSON body or an X-Drover-Client header"),
    503: problem_response("the store or the permission center is unavailable"),
}


def status_for(exc: errors.DroverError) -> int:
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status
    return 500


def problem(status: int, kind: str, detail: str, instance: str, **extra: Any) -> JSONResponse:
    body: dict[str, Any] = {
        "type": f"urn:drover:problem:{kind}",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "instance": instance,
        **extra,
    }
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE)


async def _drover_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, errors.DroverError)
    extra = {k: v for k, v in getattr(exc, "extra", {}).items() if k not in _MEMBERS}
    response = problem(status_for(exc), exc.kind, exc.message, request.url.path, **extra)
    if isinstance(exc, errors.Unauthenticated):
        response.headers["WWW-Authenticate"] = 'Bearer realm="drover"'
    return response


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    found = [
        {
            "location": [str(p) for p in err.get("loc", ())],
            "message": err.get("msg", ""),
            "type": err.get("type", ""),
        }
        for err in exc.errors()
    ]
    detail = "; ".join(f"{'.'.join(e['location'])}: {e['message']}" for e in found)
    return problem(
        422, "invalid-input", detail or "invalid request", request.url.path, errors=found
    )


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    kind = {404: "not-found", 405: "method-not-allowed"}.get(exc.status_code, "http-error")
    response = problem(exc.status_code, kind, str(exc.detail), request.url.path)
    if exc.headers:
        response.headers.update(exc.headers)
    return response


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    return problem(
        500, "internal-error", f"unexpected error: {type(exc).__name__}", request.url.path
    )


def install(app: FastAPI) -> None:
    app.add_exception_handler(errors.DroverError, _drover_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
