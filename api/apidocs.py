"""The API's reference page: Swagger UI at ``/docs``, served from the ``swagger-ui-bundle``
package (its files are package data), nothing fetched from a CDN.

FastAPI's own ``/docs`` and ``/redoc`` pages load their scripts and styles from a CDN and
start Swagger UI with an inline script; both are off (``create_app``). This page is a static
HTML file whose scripts are this node's own (:data:`PREFIX` ``/assets/``: Swagger UI's files;
:data:`PREFIX` ``/start.js``: the few lines that point it at ``/openapi.json``), so it gets its
own Content-Security-Policy (:data:`DOCS_CSP`, set by the security edge for every path under
``/docs``): scripts, connections, images and fonts from this origin only, nothing framed, no
form posts. Swagger UI sets ``style`` attributes as it renders, so styles may be inline (never
scripts).

The page needs no credential (it holds no data; the requests a reader tries out carry the
reader's own token, entered in the page). It is on by default in development and off in
production (``DROVER_API_DOCS``); ``/openapi.json`` is served either way.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.staticfiles import StaticFiles

#: where the page is served
PREFIX = "/docs"

#: the page's policy: its own scripts only; inline styles (Swagger UI's), never inline scripts
DOCS_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'; object-src 'none'"
)

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Drover API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
<link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/start.js"></script>
</body>
</html>
"""

_START = """window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  layout: "BaseLayout",
  presets: [SwaggerUIBundle.presets.apis],
});
"""


def is_docs_path(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def assets_dir() -> Path:
    """Swagger UI's files, as the ``swagger-ui-bundle`` package ships them."""
    import swagger_ui_bundle

    return Path(swagger_ui_bundle.swagger_ui_path)


def install(app: FastAPI) -> None:
    """Serve the page under :data:`PREFIX` (not in the OpenAPI document: not an API)."""
    directory = assets_dir()
    if not (directory / "swagger-ui-bundle.js").is_file():
        raise RuntimeError(f"Swagger UI's files are missing from {directory}")

    async def page(request: Request) -> Response:
        return HTMLResponse(_PAGE, headers={"Cache-Control": "no-cache"})

    async def start(request: Request) -> Response:
        return Response(
            _START,
            media_type="text/javascript; charset=utf-8",
            headers={"Cache-Control": "no-cache"},
        )

    async def slash(request: Request) -> Response:
        return RedirectResponse(PREFIX, status_code=308)

    # plain Starlette routes, not API routes: no authorization rule, no OpenAPI entry
    app.router.routes.append(Route(PREFIX, page, methods=["GET"]))
    app.router.routes.append(Route(f"{PREFIX}/", slash, methods=["GET"]))
    app.router.routes.append(Route(f"{PREFIX}/start.js", start, methods=["GET"]))
    app.mount(f"{PREFIX}/assets", StaticFiles(directory=directory), name="docs-assets")
