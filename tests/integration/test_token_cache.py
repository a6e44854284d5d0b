"""The API's cache of verified tokens (``DROVER_TOKEN_CACHE_SECONDS``) on a real store: a token
revoked, or an identity's binding changed, through this node is refused or re-read at once."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import NodeContext
from scheduler.config import Settings
from scheduler.store.db import Store
from tests.support.auth import admin_token, auth_headers, member_token

pytestmark = pytest.mark.integration


def test_revocation_and_role_change_through_this_node_apply_at_once(
    store: Store, settings: Settings
) -> None:
    cached = settings.model_copy(update={"token_cache_seconds": 60.0})
    app = create_app(NodeContext(cached, store))
    with TestClient(app, base_url="http://127.0.0.1") as api:
        root = auth_headers(admin_token(store))
        created = api.post("/v1/tokens", json={"identity": "admin"}, headers=root)
        assert created.status_code == 201, created.text
        secret, token_id = created.json()["token"], created.json()["id"]
        for _ in range(2):  # verified once, then served from the cache
            assert api.get("/v1/whoami", headers=auth_headers(secret)).status_code == 200
        assert app.state.token_cache.get(secret) is not None

        assert api.delete(f"/v1/tokens/{token_id}", headers=root).status_code == 200
        assert app.state.token_cache.get(secret) is None
        assert api.get("/v1/whoami", headers=auth_headers(secret)).status_code == 401

        viewer = auth_headers(member_token(store, "carol", "ads", "viewer"))
        assert api.get("/v1/whoami", headers=viewer).json()["roles"] == {"ads": "viewer"}
        bound = api.put("/v1/teams/ads/members/carol", json={"role": "operator"}, headers=root)
        assert bound.status_code in (200, 201), bound.text
        assert api.get("/v1/whoami", headers=viewer).json()["roles"] == {"ads": "operator"}
