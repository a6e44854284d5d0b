"""RFC 9457 problem documents: every error the API returns, mapped in one place.

Every error response is ``application/problem+json`` with ``type``, ``title``, ``status``,
``detail`` and ``instance``. What maps to what:

- ``scheduler.core.errors`` (the one exception tree): by class, most specific first (``_STATUS``);
- request validation: 422 ``invalid-input`` with an ``errors`` list; a body that is not valid
  JSON (or not UTF-8): 400 ``malformed-request``;
- routing: 404 ``not-found``; 405 ``method-not-allowed`` with an ``Allow`` header naming every
  method the path takes (Starlette names only the methods of the first route it tried);
- the metadata store: ``StoreUnavailable`` (unreachable, timed out, not migrated) 503, any other
  ``StoreError`` or a SQLAlchemy error that escaped the store package 500, always with a generic
  detail: SQL text and parameters go to the server log only, under the ``incident`` id the
  document carries; ``SchemaOutOfDate`` 503 with its message (revisions, no SQL);
- anything else: 500 ``internal-error``, logged with its traceback under an ``incident`` id.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from api import deferred
from scheduler.core import errors

log = logging.getLogger(__name__)

Handler = Callable[[Request, Exception], Awaitable[JSONResponse]]

PROBLEM_MEDIA_TYPE = "application/problem+json"

#: most specific first
_STATUS: list[tuple[type[errors.DroverError], int]] = [
    (errors.PreconditionFailed, 412),
    (errors.TooManyFailedCredentials, 429),
    (errors.PayloadTooLarge, 413),
    (errors.Unauthenticated, 401),
    (errors.Forbidden, 403),
    (errors.PermissionCenterUnavailable, 503),
    (errors.MalformedRequest, 400),
    (errors.UnsupportedMediaType, 415),
    (errors.InvalidInput, 422),
    (errors.NotFound, 404),
    (errors.Conflict, 409),
    (errors.SchemaOutOfDate, 503),
    (errors.StoreUnavailable, 503),
    (errors.StoreError, 500),
    (errors.CoordinationUnavailable, 503),
    (errors.ClusterError, 502),
    (errors.StorageError, 502),
]


class ProblemError(BaseModel):
    """One invalid value of a 422 answer."""

    location: list[str] = Field(
        description="where the value is: `body`, `query`, `path` or `header`, then its name",
        examples=[["body", "priority"]],
    )
    message: str = Field(
        description="what is wrong with it", examples=["Input should be 'high', 'normal' or 'low'"]
    )
    type: str = Field(description="the kind of error, for programs", examples=["enum"])


class Problem(BaseModel):
    """An RFC 9457 problem document: the body of every error answer (other members may
    follow)."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(
        description="`urn:drover:problem:<kind>`; the kind names the error for programs",
        examples=["urn:drover:problem:precondition-failed"],
    )
    title: str = Field(description="the HTTP status phrase", examples=["Precondition Failed"])
    status: int = Field(description="the HTTP status code", examples=[412])
    detail: str = Field(
        default="",
        description="what went wrong, for people",
        examples=["job 'orders-enrich' is at spec version 4, not 3"],
    )
    instance: str = Field(
        default="", description="the request path", examples=["/v1/jobs/orders-enrich"]
    )
    errors: list[ProblemError] = Field(
        default_factory=list,
        description="422 only: each invalid value's `location`, `message` and `type`",
        examples=[[{"location": ["body", "priority"], "message": "bad value", "type": "enum"}]],
    )
    incident: str = Field(
        default="",
        description="500 and 503: the id under which the server logged the error",
        examples=["9f86d081884c7d65"],
    )


_MEMBERS = frozenset({"type", "title", "status", "detail", "instance"})


def _component(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    schema.pop("$defs", None)
    return schema


#: the problem document's schemas, for ``components.schemas`` (``api.openapi``); every error
#: answer refers to :data:`PROBLEM_REF`
PROBLEM_SCHEMAS: dict[str, dict[str, Any]] = {
    "Problem": _component(Problem),
    "ProblemError": _component(ProblemError),
}
PROBLEM_REF = "#/components/schemas/Problem"


def problem_response(description: str) -> dict[str, Any]:
    """An OpenAPI ``responses`` entry whose body is a problem document."""
    return {
        "description": description,
        "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": PROBLEM_REF}}},
    }


#: what each documented error status means, in the OpenAPI document
_MEANING = {
    400: "Malformed request: an untrusted Host header, a body that is not JSON, or a query "
    "parameter the route does not take",
    401: "No credential, or one that does not verify",
    403: "The credential may not do this",
    404: "No such resource",
    405: "Method not allowed (the Allow header names the methods the path takes)",
    409: "The request clashes with the current state",
    412: "If-Match names a version that is not the current one",
    413: "The request body is longer than the route takes (DROVER_API_MAX_BODY_BYTES)",
    415: "A request body in another media type than JSON",
    422: "An invalid value (the `errors` member says which)",
    429: "Too many credentials that did not verify came from this address lately; retry after "
    "the Retry-After header's seconds",
    500: "An unexpected error (logged under the `incident` id)",
    502: "A Spark cluster (or another node) did not answer, or answered with an error",
    503: "The store or the permission center is unavailable; try again later",
}


def problem_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` entries of these error statuses: problem documents."""
    return {status: problem_response(_MEANING[status]) for status in statuses}


#: the answers every route may give whatever it does: the security edge's (400 Host, 401, 403,
#: 413 body too long, 415, 429 failed credentials), an undeclared query parameter (400), an
#: invalid value (422), a store failure (500/503)
COMMON_RESPONSES = problem_responses(400, 401, 403, 413, 415, 422, 429, 500, 503)


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


def store_problem(exc: BaseException, instance: str) -> JSONResponse:
    """A store failure as a problem with a generic detail; the real error is logged only.

    ``exc`` is a ``StoreError`` (chained to the driver's error) or a SQLAlchemy error. Messages of
    driver errors carry the SQL statement and its parameters (job arguments, Spark conf): never
    the client's business, and possibly secrets.
    """
    if isinstance(exc, errors.SchemaOutOfDate):  # says which revision, nothing else
        return problem(503, exc.kind, exc.message, instance)
    incident = secrets.token_hex(8)
    log.error("store error on %s (incident %s): %s", instance, incident, exc, exc_info=exc)
    if isinstance(exc, errors.StoreUnavailable):
        return problem(
            503,
            exc.kind,
            "the metadata store is unavailable; try again later",
            instance,
            incident=incident,
        )
    return problem(
        500,
        errors.StoreError.kind,
        "the metadata store could not complete the request",
        instance,
        incident=incident,
    )


async def _drover_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, errors.DroverError)
    if isinstance(exc, errors.StoreError):
        return store_problem(exc, request.url.path)
    extra = {k: v for k, v in getattr(exc, "extra", {}).items() if k not in _MEMBERS}
    response = problem(status_for(exc), exc.kind, exc.message, request.url.path, **extra)
    if isinstance(exc, errors.Unauthenticated):
        response.headers["WWW-Authenticate"] = 'Bearer realm="drover"'
    retry_after = extra.get("retry_after")
    if isinstance(retry_after, int | float):
        response.headers["Retry-After"] = str(max(1, round(retry_after)))
    return response


async def _sqlalchemy_error(request: Request, exc: Exception) -> JSONResponse:
    return store_problem(exc, request.url.path)


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
    if any(e["type"] == "json_invalid" for e in found):
        return problem(
            400,
            errors.MalformedRequest.kind,
            "the request body is not valid JSON",
            request.url.path,
        )
    detail = "; ".join(f"{'.'.join(e['location'])}: {e['message']}" for e in found)
    return problem(
        422, "invalid-input", detail or "invalid request", request.url.path, errors=found
    )


#: the methods a 405's ``Allow`` may name (the API has no PUT, HEAD or OPTIONS handlers of its own)
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app takes on the request's path.

    Asks every top-level route (included routers match through their own routes) whether a
    request of each method on this path would match it fully; Starlette's own ``Allow`` names
    only the methods of the first route whose path matched.
    """
    allowed = []
    for method in _METHODS:
        probe = {
            "type": "http",
            "path": request.scope["path"],
            "root_path": request.scope.get("root_path", ""),
            "method": method,
            "headers": [],
            "query_string": b"",
        }
        if any(route.matches(dict(probe))[0] == Match.FULL for route in request.app.router.routes):
            allowed.append(method)
    return allowed


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    if isinstance(exc.__cause__, errors.DroverError):  # the body parser met the edge's bound
        return await _drover_error(request, exc.__cause__)
    if exc.status_code == 400:  # the body parser: not UTF-8, or not decodable
        return problem(
            400, errors.MalformedRequest.kind, "the request body cannot be read", request.url.path
        )
    if exc.status_code == 405:
        allowed = allowed_methods(request)
        response = problem(
            405,
            "method-not-allowed",
            f"{request.method} is not allowed here; allowed: {', '.join(allowed) or 'none'}",
            request.url.path,
        )
        response.headers["Allow"] = ", ".join(allowed)
        return response
    kind = {404: "not-found"}.get(exc.status_code, "http-error")
    response = problem(exc.status_code, kind, str(exc.detail), request.url.path)
    if exc.headers:
        response.headers.update(exc.headers)
    return response


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    incident = secrets.token_hex(8)
    log.error("unexpected error on %s (incident %s)", request.url.path, incident, exc_info=exc)
    return problem(
        500,
        "internal-error",
        f"unexpected error: {type(exc).__name__}",
        request.url.path,
        incident=incident,
    )


async def _answer(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, errors.DroverError):
        return await _drover_error(request, exc)
    if isinstance(exc, sa_exc.SQLAlchemyError):
        return await _sqlalchemy_error(request, exc)
    return await _unexpected(request, exc)


def _checked_first(handler: Handler) -> Handler:
    """``handler``, unless an authorization check the route was to run first
    (``api/deferred.py``) has an error of its own: that error is the answer, as it would have
    been had the check run before everything else."""

    async def handle(request: Request, exc: Exception) -> JSONResponse:
        earlier = await deferred.settle(request)
        if earlier is not None:
            return await _answer(request, earlier)
        return await handler(request, exc)

    return handle


def install(app: FastAPI) -> None:
    app.add_exception_handler(errors.DroverError, _checked_first(_drover_error))
    app.add_exception_handler(sa_exc.SQLAlchemyError, _checked_first(_sqlalchemy_error))
    app.add_exception_handler(RequestValidationError, _checked_first(_validation_error))
    app.add_exception_handler(StarletteHTTPException, _checked_first(_http_error))
    app.add_exception_handler(Exception, _checked_first(_unexpected))
