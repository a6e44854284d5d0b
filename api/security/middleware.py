"""The edge every request crosses before any route: browser safety, then authentication.

In order:

1. **Trusted hosts**: a ``Host`` header outside ``DROVER_TRUSTED_HOSTS`` (loopback by default)
   is a 400 problem (DNS rebinding against a node on 127.0.0.1).
2. **Mutations need JSON or an explicit header**: ``POST``/``PUT``/``PATCH``/``DELETE`` carry
   ``Content-Type: application/json`` or ``X-Drover-Client: <anything>``, else 415. A web page
   cannot send either cross-origin without a CORS preflight, which only configured origins pass.
3. **Authentication**: every path but ``/healthz``, ``/readyz``, ``/metrics`` and the API docs
   needs a credential; none, or one that does not verify, is a 401 problem. The principal is
   put in ``request.state.principal`` for the route rules (``api/security/rules.py``).
4. **Security headers** on every answer.

CORS (``DROVER_CORS_ORIGINS``) wraps all of this, so preflights are answered first.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response
from starlette.concurrency import run_in_threadpool
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.cors import CORSMiddleware

from api.problems import problem
from api.security.authn import JwtVerifier, authenticate
from scheduler.errors import DroverError, Unauthenticated
from scheduler.identity import ANONYMOUS, FENCING_TOKEN_HEADER, NODE_SECRET_HEADER

#: paths anyone may call (probes, metrics, the API's own description)
PUBLIC_PATHS = frozenset(
    {"/healthz", "/readyz", "/metrics", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"}
)
#: probes and metrics: any Host (load balancers and kubelets use addresses)
PROBES = frozenset({"/healthz", "/readyz", "/metrics"})
CLIENT_HEADER = "X-Drover-Client"
MUTATING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Permissions-Policy": "interest-cohort=()",
}
#: the API answers JSON only; the docs pages load Swagger UI / ReDoc from their CDN
API_CSP = "default-src 'none'; frame-ancestors 'none'"


def _host_of(header: str) -> str:
    if header.startswith("["):  # [::1]:8000
        end = header.find("]")
        return header[: end + 1] if end > 0 else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def install(app: FastAPI) -> None:
    context = app.state.context
    settings, store = context.settings, context.store
    trusted = {h.lower() for h in settings.resolved_trusted_hosts}
    allow_any_host = "*" in trusted
    verifier = JwtVerifier(settings)
    app.state.jwt_verifier = verifier

    async def edge(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        path = request.url.path
        host = _host_of(request.headers.get("host", "")).lower()
        if not allow_any_host and host not in trusted and path not in PROBES:
            response: Response = problem(
                400, "untrusted-host", "this node does not serve that Host", path
            )
        elif (
            request.method in MUTATING
            and not _is_json(request.headers.get("content-type", ""))
            and CLIENT_HEADER.lower() not in request.headers
        ):
            response = problem(
                415,
                "unsupported-media-type",
                f"send Content-Type: application/json or an {CLIENT_HEADER} header",
                path,
            )
        elif path in PUBLIC_PATHS:
            request.state.principal = ANONYMOUS
            response = await call_next(request)
        else:
            response = await _authenticated(request, call_next)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        if path not in ("/docs", "/redoc", "/docs/oauth2-redirect"):
            response.headers.setdefault("Content-Security-Policy", API_CSP)
        if path != "/openapi.json":
            response.headers.setdefault("Cache-Control", "no-store")
        return response

    async def _authenticated(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        path = request.url.path
        try:
            principal = await run_in_threadpool(
                authenticate, request.headers, settings, store, verifier
            )
        except Unauthenticated as exc:
            return _unauthenticated(exc.message, path)
        except DroverError as exc:
            from api.problems import status_for

            return problem(status_for(exc), exc.kind, exc.message, path)
        if principal is ANONYMOUS:
            return _unauthenticated(
                "credentials required: Authorization: Bearer <token> "
                f"({NODE_SECRET_HEADER} between nodes, {FENCING_TOKEN_HEADER} from pipelines)",
                path,
            )
        request.state.principal = principal
        return await call_next(request)

    app.add_middleware(BaseHTTPMiddleware, dispatch=edge)
    origins = [o.strip() for o in settings.cors_origins.split(",") if o.strip()]
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST", "PATCH", "PUT", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "If-Match", CLIENT_HEADER],
            expose_headers=["ETag", "Location"],
            max_age=600,
        )


def _unauthenticated(detail: str, path: str) -> Response:
    response = problem(401, "unauthenticated", detail, path)
    response.headers["WWW-Authenticate"] = 'Bearer realm="drover"'
    return response
