"""Credentials for tests, benches and the demo: a platform admin and team members on a store."""

from __future__ import annotations

from scheduler.decisions.identity import Role
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


def store_fingerprint(store: Store) -> dict[str, object]:
    """Everything a refused request must leave as it was: every row of the tables a request can
    change (jobs, runs, catalog, identities, tokens, audit, operations)."""
    from sqlalchemy import select

    from scheduler.store import models

    tables = (
        models.Job,
        models.Run,
        models.Cluster,
        models.Group,
        models.Team,
        models.Identity,
        models.RoleBinding,
        models.ApiToken,
        models.AuditEntry,
        models.JobEvent,
        models.Operation,
        models.OperationItem,
        models.GroupFailoverPolicy,
    )
    out: dict[str, object] = {}
    with store.session() as session:
        for model in tables:
            columns = [c.name for c in model.__table__.columns]
            rows = session.execute(select(*model.__table__.columns)).all()
            out[model.__tablename__] = sorted(
                tuple(str(getattr(r, c)) for c in columns) for r in rows
            )
    return out
