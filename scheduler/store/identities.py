"""Teams, identities (users and service accounts), their role bindings and their API tokens;
and the run a pipeline's fencing token names (the credential a pipeline proves itself with).

Tokens are stored as SHA-256 digests; the secret exists only in the answer to its creation.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, bindparam, delete, select, update
from sqlalchemy.orm import Session

from scheduler.core.clock import iso, utcnow
from scheduler.core.errors import AlreadyExists, Conflict, InvalidInput, NotFound, Unauthenticated
from scheduler.core.ledger import fencing_digest
from scheduler.core.names import validate_name
from scheduler.core.paging import KeyPart, Window
from scheduler.decisions.identity import (
    ALL_TEAMS,
    NewToken,
    Role,
    Scope,
    mint_token,
    token_digest,
)
from scheduler.store import paging
from scheduler.store.db import add_new
from scheduler.store.models import ApiToken, Identity, Job, RoleBinding, Run, Team

IDENTITY_KINDS = ("user", "service")


@dataclass(frozen=True)
class TeamRecord:
    name: str
    description: str
    created_at: datetime
    #: identity -> role
    members: dict[str, str]


@dataclass(frozen=True)
class TokenRecord:
    id: int
    identity: str
    lookup: str
    scopes: tuple[str, ...]
    description: str
    created_by: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    #: the token that minted this one (None: minted by no token)
    parent_id: int | None = None

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "identity": self.identity,
            "prefix": f"drv_{self.lookup}",
            "scopes": list(self.scopes),
            "description": self.description,
            "created_by": self.created_by,
            "created_at": iso(self.created_at),
            "expires_at": iso(self.expires_at) if self.expires_at else None,
            "revoked_at": iso(self.revoked_at) if self.revoked_at else None,
            "parent_id": self.parent_id,
        }


@dataclass(frozen=True)
class Credential:
    """What a valid token proves: an identity, its role bindings and the token's scopes."""

    token_id: int
    identity: str
    kind: str
    roles: dict[str, Role]
    scopes: frozenset[Scope]
    #: when the token stops being valid (None: never)
    expires_at: datetime | None = None


def _token_record(row: ApiToken) -> TokenRecord:
    return TokenRecord(
        row.id,
        row.identity,
        row.lookup,
        tuple(s for s in row.scopes.split(",") if s),
        row.description,
        row.created_by,
        row.created_at,
        row.expires_at,
        row.revoked_at,
        row.parent_id,
    )


# --------------------------------------------------------------------------- teams


def create_team(session: Session, name: str, description: str = "") -> TeamRecord:
    validate_name(name, "team name")
    if session.get(Team, name) is not None:
        raise AlreadyExists(f"team {name!r} already exists")
    row = Team(name=name, description=description)
    session.add(row)
    session.flush()
    return TeamRecord(row.name, row.description, row.created_at, {})


def get_team(session: Session, name: str) -> TeamRecord:
    row = session.get(Team, name)
    if row is None:
        raise NotFound(f"no team named {name!r}")
    members = {
        b.identity: b.role
        for b in session.scalars(
            select(RoleBinding).where(RoleBinding.team == name).order_by(RoleBinding.identity)
        )
    }
    return TeamRecord(row.name, row.description, row.created_at, members)


def list_teams(session: Session, only: frozenset[str] | None = None) -> list[TeamRecord]:
    query = select(Team.name).order_by(Team.name)
    if only is not None:
        query = query.where(Team.name.in_(sorted(only)))
    return [get_team(session, name) for name in session.scalars(query)]


def page_teams(
    session: Session, window: Window, only: frozenset[str] | None = None
) -> tuple[list[TeamRecord], tuple[KeyPart, ...] | None]:
    """One page of the teams by name (``only``: the teams the caller may see)."""
    query = select(Team)
    if only is not None:
        query = query.where(Team.name.in_(sorted(only)))
    rows, next_key = paging.read_page(session, query, (Team.name,), window, lambda t: (t.name,))
    return [get_team(session, t.name) for t in rows], next_key


def count_teams(session: Session, only: frozenset[str] | None = None) -> int:
    query = select(Team.name)
    if only is not None:
        query = query.where(Team.name.in_(sorted(only)))
    return paging.count(session, query)


def team_exists(session: Session, name: str) -> bool:
    return name == ALL_TEAMS or session.get(Team, name) is not None


# --------------------------------------------------------------------------- identities


def ensure_identity(session: Session, name: str, kind: str = "user") -> None:
    validate_name(name, "identity name")
    if kind not in IDENTITY_KINDS:
        raise InvalidInput(f"identity kind must be user or service, not {kind!r}")
    row = session.get(Identity, name)
    if row is None:
        session.add(Identity(name=name, kind=kind))
        session.flush()


def bind(session: Session, identity: str, team: str, role: Role) -> str | None:
    """Give ``identity`` ``role`` on ``team`` (``*``: every team); returns the previous role."""
    if not team_exists(session, team):
        raise NotFound(f"no team named {team!r}")
    if session.get(Identity, identity) is None:
        raise NotFound(f"no identity named {identity!r}")
    row = session.scalar(
        select(RoleBinding).where(RoleBinding.identity == identity, RoleBinding.team == team)
    )
    if row is None:
        session.add(RoleBinding(identity=identity, team=team, role=str(role)))
        session.flush()
        return None
    previous = row.role
    row.role = str(role)
    return previous


def unbind(session: Session, identity: str, team: str) -> str:
    """Remove the binding; returns the role it carried."""
    row = session.scalar(
        select(RoleBinding).where(RoleBinding.identity == identity, RoleBinding.team == team)
    )
    if row is None:
        raise NotFound(f"{identity!r} has no role on team {team!r}")
    role = row.role
    session.execute(delete(RoleBinding).where(RoleBinding.id == row.id))
    return role


def admin_exists(session: Session) -> bool:
    return (
        session.scalar(
            select(RoleBinding.id)
            .join(Identity, Identity.name == RoleBinding.identity)
            .where(
                RoleBinding.team == ALL_TEAMS,
                RoleBinding.role == str(Role.ADMIN),
                Identity.disabled.is_(False),
            )
            .limit(1)
        )
        is not None
    )


# --------------------------------------------------------------------------- tokens


def create_token(
    session: Session,
    identity: str,
    *,
    scopes: frozenset[Scope] = frozenset({Scope.READ, Scope.WRITE}),
    expires_at: datetime | None = None,
    description: str = "",
    created_by: str = "",
    parent_id: int | None = None,
) -> tuple[NewToken, TokenRecord]:
    """Mint a token for ``identity``. The returned ``NewToken.secret`` is never stored.

    ``parent_id``: the token minting it (through the API). Its row is locked and must still be
    valid, so a revocation of the parent either sees this token (and revokes it too) or is seen
    here (Unauthenticated)."""
    if session.get(Identity, identity) is None:
        raise NotFound(f"no identity named {identity!r}")
    if parent_id is not None:
        parent = session.get(ApiToken, parent_id, with_for_update=True)
        now = utcnow()
        if (
            parent is None
            or parent.revoked_at is not None
            or (parent.expires_at is not None and parent.expires_at <= now)
        ):
            raise Unauthenticated("the token minting this one was revoked or has expired")
    if expires_at is not None and expires_at <= utcnow():
        raise InvalidInput("expires_at must be in the future")
    if not scopes:
        raise InvalidInput("a token needs at least one scope")
    token = mint_token()
    row = ApiToken(
        identity=identity,
        lookup=token.lookup,
        digest=token.digest,
        scopes=",".join(sorted(s.value for s in scopes)),
        description=description,
        created_by=created_by,
        expires_at=expires_at,
        parent_id=parent_id,
    )
    add_new(session, row, "token collision; try again")  # 256 random bits: never, in practice
    return token, _token_record(row)


def get_token(session: Session, token_id: int) -> TokenRecord:
    row = session.get(ApiToken, token_id)
    if row is None:
        raise NotFound(f"no token with id {token_id}")
    return _token_record(row)


def list_tokens(session: Session, *, identities: frozenset[str] | None = None) -> list[TokenRecord]:
    query = select(ApiToken).order_by(ApiToken.id)
    if identities is not None:
        query = query.where(ApiToken.identity.in_(sorted(identities)))
    return [_token_record(r) for r in session.scalars(query)]


def page_tokens(
    session: Session, window: Window, *, identities: frozenset[str] | None = None
) -> tuple[list[TokenRecord], tuple[KeyPart, ...] | None]:
    """One page of the tokens by id (``identities``: only theirs)."""
    query = select(ApiToken)
    if identities is not None:
        query = query.where(ApiToken.identity.in_(sorted(identities)))
    rows, next_key = paging.read_page(session, query, (ApiToken.id,), window, lambda t: (t.id,))
    return [_token_record(r) for r in rows], next_key


def count_tokens(session: Session, *, identities: frozenset[str] | None = None) -> int:
    query = select(ApiToken.id)
    if identities is not None:
        query = query.where(ApiToken.identity.in_(sorted(identities)))
    return paging.count(session, query)


@dataclass(frozen=True)
class Revocation:
    """A token revoked: it before and after, and the ids of the tokens it minted (and they
    minted, ...) that were revoked with it."""

    before: TokenRecord
    after: TokenRecord
    descendants: tuple[int, ...]


def revoke_token(session: Session, token_id: int) -> Revocation:
    """Revoke a token and every token it minted, down the generations (idempotent)."""
    row = session.get(ApiToken, token_id, with_for_update=True)
    if row is None:
        raise NotFound(f"no token with id {token_id}")
    before = _token_record(row)
    now = utcnow()
    if row.revoked_at is None:
        row.revoked_at = now
        session.flush()
    revoked: list[int] = []
    seen, frontier = {token_id}, [token_id]
    while frontier:  # one statement per generation
        children = [
            (child_id, revoked_at)
            for child_id, revoked_at in session.execute(
                select(ApiToken.id, ApiToken.revoked_at).where(ApiToken.parent_id.in_(frontier))
            )
            if child_id not in seen
        ]
        seen.update(c for c, _ in children)
        frontier = [c for c, _ in children]
        live = [c for c, at in children if at is None]
        if live:
            session.execute(
                update(ApiToken)
                .where(ApiToken.id.in_(live), ApiToken.revoked_at.is_(None))
                .values(revoked_at=now)
                .execution_options(synchronize_session=False)
            )
            revoked += live
    return Revocation(before, _token_record(row), tuple(sorted(revoked)))


_TOKEN = (
    select(
        ApiToken.__table__.c.id,
        ApiToken.__table__.c.revoked_at,
        ApiToken.__table__.c.expires_at,
        ApiToken.__table__.c.scopes,
        Identity.__table__.c.name,
        Identity.__table__.c.kind,
        Identity.__table__.c.disabled,
        RoleBinding.__table__.c.team,
        RoleBinding.__table__.c.role,
    )
    .join(Identity.__table__, Identity.__table__.c.name == ApiToken.__table__.c.identity)
    .outerjoin(RoleBinding.__table__, RoleBinding.__table__.c.identity == Identity.__table__.c.name)
    .where(ApiToken.__table__.c.digest == bindparam("digest"))
)


def authenticate_token(
    session: Session | Connection, secret: str, now: datetime
) -> Credential | None:
    """The credential a token secret proves, or None (unknown, revoked, expired, disabled).

    One statement (the token, its identity and the identity's role bindings joined): every
    authenticated API request runs it."""
    # built once (``_TOKEN``), run on the session's connection: no ORM objects, nothing to flush
    connection = session.connection() if isinstance(session, Session) else session
    rows = connection.execute(_TOKEN, {"digest": token_digest(secret)}).all()
    if not rows:  # unknown token, or its identity is gone
        return None
    first = rows[0]
    if first.revoked_at is not None:
        return None
    if first.expires_at is not None and first.expires_at <= now:
        return None
    if first.disabled:
        return None
    known = {s.value for s in Scope}
    scopes = frozenset(Scope(s) for s in first.scopes.split(",") if s in known)
    roles = {row.team: Role.parse(row.role) for row in rows if row.team is not None}
    return Credential(first.id, first.name, first.kind, roles, scopes, first.expires_at)


#: the longest fencing token a run is given (``runs.fencing_token``)
MAX_FENCING_TOKEN_LENGTH = 64

_RUN_OF_FENCING_TOKEN = (
    select(Run.__table__.c.id)
    .join(Job.__table__, Job.__table__.c.id == Run.__table__.c.job_id)
    .where(
        Job.__table__.c.name == bindparam("job"),
        Run.__table__.c.fencing_token == bindparam("token"),
    )
)


def run_of_fencing_token(session: Session | Connection, job: str, token: str) -> int | None:
    """The id of the run of job ``job`` whose fencing token is ``token``, or None (no such job,
    no such run, or a run of another job: one answer for all, so a caller learns nothing about
    which jobs exist). Any run of the job, current or not: whether it is current is the fence's
    answer (api/routes/fence.py), not a matter of who is asking.

    The one place a fencing token a pipeline presents is checked against the store (the API's
    security edge calls it for every request carrying one): how the token is kept (its SHA-256
    digest, never the token: ``scheduler/store/ledger.py`` says why), and what else a valid
    token must satisfy, is decided here and nowhere else."""
    if not token or len(token) > MAX_FENCING_TOKEN_LENGTH or not job:
        return None
    connection = session.connection() if isinstance(session, Session) else session
    digest = fencing_digest(token)
    found = connection.execute(_RUN_OF_FENCING_TOKEN, {"job": job, "token": digest}).first()
    return None if found is None else int(found[0])


def bootstrap_admin(
    session: Session,
    name: str = "admin",
    *,
    force: bool = False,
    expires_at: datetime | None = None,
) -> tuple[NewToken, TokenRecord]:
    """The first platform admin of a fresh store and its token (``drover token create --admin``).

    Refuses (Conflict) when an admin exists already, unless ``force`` (a local operator with
    the store's credentials can always do this; the API never can).
    """
    if admin_exists(session) and not force:
        raise Conflict(
            "an admin exists already: ask them for a token, or use --force on the store's host"
        )
    ensure_identity(session, name, "user")
    bind(session, name, ALL_TEAMS, Role.ADMIN)
    return create_token(
        session, name, expires_at=expires_at, description="bootstrap", created_by="cli:bootstrap"
    )
