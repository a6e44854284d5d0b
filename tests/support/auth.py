"""Credentials for tests, benches and the demo: a platform admin and team members on a store."""

from __future__ import annotations

from scheduler.identity import Role
from scheduler.store import identities
from scheduler.store.db import Store

#: what every test client sends besides its token (mutations need JSON or this header)
CLIENT_HEADERS = {"X-Drover-Client": "tests"}


def admin_token(store: Store, name: str = "admin") -> str:
    """A platform admin's token (the first admin of the store, or another one)."""
    with store.transaction() as session:
        new, _ = identities.bootstrap_admin(session, name, force=True)
    return new.secret


def member_token(store: Store, identity: str, team: str, role: Role | str) -> str:
    """A token of ``identity`` holding ``role`` on ``team`` (team and identity created)."""
    role = role if isinstance(role, Role) else Role.parse(role)
    with store.transaction() as session:
        if not identities.team_exists(session, team):
            identities.create_team(session, team)
        identities.ensure_identity(session, identity)
        identities.bind(session, identity, team, role)
        new, _ = identities.create_token(session, identity)
    return new.secret


def auth_headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **CLIENT_HEADERS}
