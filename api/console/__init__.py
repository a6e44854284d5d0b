"""The ops console: a static single-page application served by every node at ``/ui``.

Plain ES modules and one stylesheet shipped in this package (``static/``, package data): no
build step, nothing fetched from anywhere but this node at run time. The page talks to the public
API only, with the caller's bearer token (kept in the browser's session storage), and shows only
the controls the caller may use (``GET /v1/whoami`` says what that is).

What this module adds to the app:

- ``GET /ui`` redirects to ``/ui/``; ``/ui/`` is ``index.html``; ``/ui/<file>`` the assets.
  The assets hold no data, so they need no credential (the API calls the page makes do);
- its own Content-Security-Policy (:data:`CONSOLE_CSP`: scripts, styles and connections from
  this origin only, no inline script or style, no ``eval``, no framing), set by the security
  edge (``api.security.middleware``) for every path under ``/ui``;
- ``Cache-Control: no-cache``: browsers keep the assets but revalidate them (``ETag``), so a
  node upgrade is picked up at the next load.

The console routes in the page itself (``#/jobs``, ``#/jobs/<name>``, ``#/clusters/<name>``,
...), so one ``index.html`` serves every page and a reload keeps the page.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

#: where the console is served
PREFIX = "/ui"
STATIC_DIR = Path(__file__).with_name("static")

#: the console's policy: everything from this origin, nothing inline, nothing evaluated
CONSOLE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; manifest-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'; object-src 'none'"
)


def is_console_path(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


class _Assets(StaticFiles):
    """The console's files: revalidated on every load (``no-cache``), JavaScript as such."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers["Cache-Control"] = "no-cache"
        if path.endswith(".js"):  # module scripts need a JavaScript MIME type (nosniff)
            response.headers["Content-Type"] = "text/javascript; charset=utf-8"
        return response


def install(app: FastAPI) -> None:
    """Serve the console under :data:`PREFIX` (not in the OpenAPI document: not an API)."""
    if not (STATIC_DIR / "index.html").is_file():
        raise RuntimeError(f"the console's assets are missing from {STATIC_DIR}")

    async def console_root(request: Request) -> Response:
        return RedirectResponse(f"{PREFIX}/", status_code=308)

    # plain Starlette routes, not API routes: no authorization rule, no OpenAPI entry
    app.router.routes.append(Route(PREFIX, console_root, methods=["GET"]))
    app.mount(PREFIX, _Assets(directory=STATIC_DIR, html=True), name="console")
