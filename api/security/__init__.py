"""Who is calling and what they may do: the API's security edge.

- ``middleware``: trusted hosts, CORS, JSON-or-header for mutations, security headers, and
  authentication of every non-public request;
- ``authn``: credentials (Drover tokens, JWTs, the deployment secret, run tokens) → principal;
- ``authz``: the decision (built-in role bindings or the external permission center);
- ``rules``: the route table and :func:`rules.authorize`, the one function every route runs.
"""

from __future__ import annotations

from fastapi import FastAPI

from api.security import middleware
from api.security.authz import Authorizer


def install(app: FastAPI) -> None:
    """Wire the security edge into ``app`` (whose ``state.context`` is set)."""
    app.state.authorizer = Authorizer(app.state.context.settings)
    middleware.install(app)
