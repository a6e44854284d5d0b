"""The edge every request crosses before any route: browser safety, then authentication.

In order:

1. **Trusted hosts**: a ``Host`` header outside ``DROVER_TRUSTED_HOSTS`` (loopback by default)
   is a 400 problem (DNS rebinding against a node on 127.0.0.1).
2. **No ambient credential**: every credential travels in a header a page cannot set
   cross-origin without a CORS preflight (``Authorization``, the node secret, the fencing
   token), which only configured origins pass; no cookie is ever set and no browser-cached
   credential (HTTP Basic, client certificates) is accepted. So a forged cross-site request
   arrives anonymous and is refused (401) like any other, and a mutation needs no proof of an
   explicit client: what is left of that rule is the media type of a body (a route refuses a
   body in another type, a form post included, with a 415: ``api.deps.check_request``); a
   request without a body is never refused for its type. Should a cookie session ever be
   added, requests authenticated by it must prove an explicit client again here.
   **Bodies are bounded** (``DROVER_API_MAX_BODY_BYTES``, 1 MiB): a longer ``Content-Length``
   is a 413 before anything is read, and a chunked body is counted as it is read and refused
   (413) as soon as it passes the bound.
3. **Authentication**: every path but ``/healthz``, ``/readyz``, ``/metrics``, the API docs and
   the console's static files (``/ui``, ``api/console``: the page signs in by itself) needs a
   credential; none, or one that does not verify, is a 401 problem. The principal is
   put in ``request.state.principal`` for the route rules (``api/security/rules.py``).
   A fencing token (``X-Drover-Fencing-Token``) is a credential on one route only, its own
   job's fence check (``GET /v1/jobs/{name}/fence``), and only when a run of that job holds
   it; anything else that carries one is a 401 at once, before any body is read. A client
   address whose credentials failed too often lately is answered 429
   (``api/security/throttle.py``).
4. **Security headers** on every answer; the console gets its own Content-Security-Policy
   (same-origin scripts, styles and connections, nothing inline, no eval).

CORS (``DROVER_CORS_ORIGINS``) wraps all of this, so preflights are answered first.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import FastAPI, Response
from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api import deferred
from api.apidocs import DOCS_CSP, is_docs_path
from api.console import CONSOLE_CSP, is_console_path
from api.problems import problem
from api.security.authn import JwtVerifier, TokenCache, authenticate, bearer_token
from api.security.throttle import FailedCredentials
from api.threads import WorkerThreads
from scheduler.config import Settings
from scheduler.core.errors import (
    DroverError,
    PayloadTooLarge,
    TooManyFailedCredentials,
    Unauthenticated,
)
from scheduler.decisions.identity import (
    ANONYMOUS,
    FENCING_TOKEN_HEADER,
    NODE_SECRET_HEADER,
    Principal,
)
from scheduler.store.db import Store

#: paths anyone may call (probes, metrics, the API's own description; and every path of the
#: reference page and the console: ``is_docs_path``, ``is_console_path``)
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/openapi.json"})
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
#: the API answers JSON only (the reference page and the console have their own policies)
API_CSP = "default-src 'none'; frame-ancestors 'none'"


#: the route a fencing token opens: ``/v1/jobs/{name}/fence``
FENCE_PREFIX, FENCE_SUFFIX = "/v1/jobs/", "/fence"


def fence_job_of(method: str, path: str) -> str | None:
    """The job whose fence check ``method path`` asks, or None when it asks none (the one route
    a fencing token may open)."""
    if method not in ("GET", "HEAD"):
        return None
    if not (path.startswith(FENCE_PREFIX) and path.endswith(FENCE_SUFFIX)):
        return None
    name = path[len(FENCE_PREFIX) : -len(FENCE_SUFFIX)]
    return name if name and "/" not in name else None


def _host_of(header: str) -> str:
    if header.startswith("["):  # [::1]:8000
        end = header.find("]")
        return header[: end + 1] if end > 0 else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


#: mutations under these paths may change who a token is (revocations, role bindings): the
#: node's cache of verified tokens is emptied after each
IDENTITY_PATHS = ("/v1/tokens", "/v1/teams")


class SecurityEdge:
    """The edge as ASGI middleware (see the module docstring).

    Plain ASGI rather than Starlette's ``BaseHTTPMiddleware``, which runs the rest of the app
    as a separate task and streams its answer through a memory channel: a cost on every
    request for nothing this edge needs. The principal goes to ``scope["state"]`` (what
    ``request.state`` reads)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        settings: Settings,
        store: Store,
        verifier: JwtVerifier,
        tokens: TokenCache,
        threads: WorkerThreads,
    ) -> None:
        self.app, self.threads = app, threads
        self.settings, self.store = settings, store
        self.verifier, self.tokens = verifier, tokens
        self.trusted = {h.lower() for h in settings.resolved_trusted_hosts}
        self.allow_any_host = "*" in self.trusted
        self.max_body = settings.api_max_body_bytes
        self.failures = FailedCredentials(settings.auth_failure_limit, settings.auth_failure_window)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        method: str = scope["method"]
        headers = Headers(scope=scope)
        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if message["status"] < 400 and deferred.unsettled(scope):
                    # a route left its authorization check unrun (api/deferred.py): never answer
                    raise RuntimeError(f"{method} {path}: authorization check never ran")
                answer = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    answer.setdefault(name, value)
                if is_console_path(path):
                    answer["Content-Security-Policy"] = CONSOLE_CSP
                elif is_docs_path(path):
                    answer["Content-Security-Policy"] = DOCS_CSP
                else:
                    answer.setdefault("Content-Security-Policy", API_CSP)
                if path != "/openapi.json":
                    answer.setdefault("Cache-Control", "no-store")
            await send(message)

        state: dict[str, Any] = scope.setdefault("state", {})
        host = _host_of(headers.get("host", "")).lower()
        mutating = method in MUTATING
        # the bodies the routes read (the others are never read)
        length = headers.get("content-length") if mutating else None
        refusal: Response | None = None
        if not self.allow_any_host and host not in self.trusted and path not in PROBES:
            refusal = problem(400, "untrusted-host", "this node does not serve that Host", path)
        elif length is not None and not _fits(length, self.max_body):
            refusal = self._too_large(path)
        elif path in PUBLIC_PATHS or is_console_path(path) or is_docs_path(path):
            state["principal"] = ANONYMOUS
        else:
            client = scope.get("client")
            principal_or_refusal = await self._authenticate(
                headers, method, path, client[0] if client else ""
            )
            if isinstance(principal_or_refusal, Response):
                refusal = principal_or_refusal
            else:
                state["principal"] = principal_or_refusal
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        if mutating and length is None:  # chunked: counted as it is read
            receive = _bounded(receive, self.max_body)
        try:
            await self.app(scope, receive, send_with_headers)
        except PayloadTooLarge:  # read before a route (whose own handler answers it)
            if started:
                raise
            await self._too_large(path)(scope, receive, send_with_headers)
        finally:
            if method in MUTATING and path.startswith(IDENTITY_PATHS):
                self.tokens.clear()

    def _too_large(self, path: str) -> Response:
        return problem(
            413,
            PayloadTooLarge.kind,
            f"the request body is longer than this route takes ({self.max_body} bytes)",
            path,
        )

    async def _authenticate(
        self, headers: Headers, method: str, path: str, address: str
    ) -> Principal | Response:
        token = bearer_token(headers)
        principal = self.tokens.get(token) if token is not None else None
        if principal is None and self.failures.enabled:
            wait = self.failures.retry_after(address)
            if wait is not None:  # no store read, no signature check
                response = problem(
                    429,
                    TooManyFailedCredentials.kind,
                    "too many credentials that did not verify came from this address lately",
                    path,
                )
                response.headers["Retry-After"] = str(max(1, math.ceil(wait)))
                return response
        fence_job: str | None = None
        if token is None and FENCING_TOKEN_HEADER in headers:  # (a token says there is none)
            fence_job = fence_job_of(method, path)
            if fence_job is None:  # no store read, no body read
                self.failures.failed(address)
                return _unauthenticated(
                    "a fencing token opens only its own job's fence check", path
                )
        if principal is None:  # verify it (reads the store: off the event loop)
            try:
                principal = await self.threads.run(
                    authenticate,
                    headers,
                    self.settings,
                    self.store,
                    self.verifier,
                    self.tokens,
                    fence_job,
                )
            except Unauthenticated as exc:
                self.failures.failed(address)
                # a fence check's refusal names the job it asked about (the runtime tells "no
                # run of this job holds my token" from "not a fence endpoint" by it); the same
                # whether the job exists or not
                extra = {} if fence_job is None else {"job": fence_job}
                return _unauthenticated(exc.message, path, **extra)
            except DroverError as exc:
                from api.problems import status_for

                return problem(status_for(exc), exc.kind, exc.message, path)
        if principal is ANONYMOUS:
            return _unauthenticated(
                "credentials required: Authorization: Bearer <token> "
                f"({NODE_SECRET_HEADER} between nodes, {FENCING_TOKEN_HEADER} from pipelines)",
                path,
            )
        return principal


def _fits(length: str, bound: int) -> bool:
    """Whether a ``Content-Length`` is within ``bound`` (a malformed one is not)."""
    return length.isdigit() and int(length) <= bound


def _bounded(receive: Receive, bound: int) -> Receive:
    """``receive`` counting the body's bytes: PayloadTooLarge once they pass ``bound``."""
    seen = 0

    async def bounded() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > bound:
                raise PayloadTooLarge(
                    f"the request body is longer than this route takes ({bound} bytes)"
                )
        return message

    return bounded


def install(app: FastAPI) -> None:
    context = app.state.context
    settings = context.settings
    verifier = JwtVerifier(settings)
    app.state.jwt_verifier = verifier
    tokens = TokenCache(settings.token_cache_seconds)
    app.state.token_cache = tokens
    app.add_middleware(
        SecurityEdge,
        settings=settings,
        store=context.store,
        verifier=verifier,
        tokens=tokens,
        threads=app.state.threads,
    )
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


def _unauthenticated(detail: str, path: str, **extra: Any) -> Response:
    response = problem(401, "unauthenticated", detail, path, **extra)
    response.headers["WWW-Authenticate"] = 'Bearer realm="drover"'
    return response
