"""Who may do what: principals, roles bound per team, and the one authorization decision.

Pure: no I/O. The API authenticates a caller into a :class:`Principal` (``api/security``) and
asks :func:`decide` (the built-in role bindings) or an external permission center whether the
principal may perform an :class:`Action` on a resource of a team.

Roles are ordered ``viewer < operator < admin`` and bound per team. The team ``*`` means every
team: a ``*`` admin is a platform admin (clusters, groups, teams, tokens, quotas).

=====================  =========================================================================
action                 who may
=====================  =========================================================================
``job.read``           viewer of the job's team
``job.fence``          viewer of the job's team, or the fencing token of one of that job's
                       runs (the fence answers a run only whether it is current)
``job.write``          operator of the job's team (create, change, delete, start, stop, restart)
``catalog.read``       any authenticated principal (clusters, groups, nodes: no team data)
``cluster.mark``       operator of any team (mark a cluster abnormal/normal), or only of every
                       team (``*``) where the platform keeps marks to its operators
                       (``platform_marks``; ``DROVER_CLUSTER_MARKS``)
``catalog.write``      platform admin (create/change clusters and groups)
``team.read``          viewer of that team (its members and tokens)
``team.admin``         admin of that team (bind members, create and revoke its tokens)
``token.own``          any principal with a stored identity, on its own tokens (create one no
                       stronger and no longer-lived than the token minting it, revoke one);
                       a write, like every mint (see :func:`may_mint`)
``platform.admin``     platform admin (teams, identities, audit of everything)
``audit.read``         admin of any team (entries of that team's jobs) or platform admin
``internal``           only a node presenting the deployment secret
=====================  =========================================================================
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

#: the team of a binding that covers every team
ALL_TEAMS = "*"
#: every API token starts with this (secret scanners recognise it; lookups use the rest)
TOKEN_PREFIX = "drv_"
#: the header a node sends the deployment secret in (node-to-node calls)
NODE_SECRET_HEADER = "X-Drover-Node-Secret"
#: the header a pipeline sends its run's fencing token in (fence checks)
FENCING_TOKEN_HEADER = "X-Drover-Fencing-Token"


class Role(enum.IntEnum):
    """Ordered: a higher role may do everything a lower one may."""

    VIEWER = 1
    OPERATOR = 2
    ADMIN = 3

    @classmethod
    def parse(cls, value: str) -> Role:
        try:
            return cls[value.strip().upper()]
        except KeyError:
            raise ValueError(f"unknown role {value!r}: viewer, operator or admin") from None

    def __str__(self) -> str:
        return self.name.lower()


class Action(enum.StrEnum):
    JOB_READ = "job.read"
    JOB_FENCE = "job.fence"
    JOB_WRITE = "job.write"
    CATALOG_READ = "catalog.read"
    CLUSTER_MARK = "cluster.mark"
    CATALOG_WRITE = "catalog.write"
    TEAM_READ = "team.read"
    TEAM_ADMIN = "team.admin"
    PLATFORM_ADMIN = "platform.admin"
    AUDIT_READ = "audit.read"
    FAILOVER_READ = "failover.read"
    FAILOVER_WRITE = "failover.write"
    TOKEN_OWN = "token.own"
    INTERNAL = "internal"


class Scope(enum.StrEnum):
    """What a token may be used for, whatever its identity's roles (a token narrows, never
    widens)."""

    READ = "read"  # GETs only
    WRITE = "write"  # everything the roles allow


#: the least role on the resource's team (or on ``*``) each team-scoped action needs
_TEAM_ROLE: dict[Action, Role] = {
    Action.JOB_READ: Role.VIEWER,
    Action.JOB_FENCE: Role.VIEWER,
    Action.JOB_WRITE: Role.OPERATOR,
    Action.TEAM_READ: Role.VIEWER,
    Action.TEAM_ADMIN: Role.ADMIN,
    Action.AUDIT_READ: Role.ADMIN,
}
#: the least role on *any* team (teamless resources)
_ANY_TEAM_ROLE: dict[Action, Role] = {
    Action.CATALOG_READ: Role.VIEWER,
    Action.CLUSTER_MARK: Role.OPERATOR,
}
#: actions only a platform admin (role admin on ``*``) may take
_PLATFORM: frozenset[Action] = frozenset({Action.CATALOG_WRITE, Action.PLATFORM_ADMIN})
#: the least role on every team (a binding on ``*``) these actions need: a failover moves the
#: jobs of every team on a cluster, so a platform operator runs it and a platform viewer reads it
_EVERY_TEAM_ROLE: dict[Action, Role] = {
    Action.FAILOVER_READ: Role.VIEWER,
    Action.FAILOVER_WRITE: Role.OPERATOR,
}
#: actions that read: a read-scoped token may take them
READ_ACTIONS: frozenset[Action] = frozenset(
    {
        Action.JOB_READ,
        Action.JOB_FENCE,
        Action.CATALOG_READ,
        Action.TEAM_READ,
        Action.AUDIT_READ,
        Action.FAILOVER_READ,
    }
)


@dataclass(frozen=True)
class Principal:
    """An authenticated caller."""

    #: ``user:alice``, ``service:etl-bot``, ``jwt:<sub>``, ``node:<id>``, ``run:<job>/<id>``
    subject: str
    #: team -> role (``*`` = every team)
    roles: Mapping[str, Role] = field(default_factory=dict)
    scopes: frozenset[Scope] = frozenset({Scope.READ, Scope.WRITE})
    #: a node of this deployment (proved the deployment secret)
    node: bool = False
    #: the job whose run's fencing token this principal proved (its fence check only)
    run_of_job: str | None = None
    #: the run whose fencing token this principal proved
    run_id: int | None = None
    #: the stored identity behind a Drover token (None for JWT, node and run principals)
    identity: str | None = None
    #: the Drover token the principal proved (the parent of any token it mints)
    token_id: int | None = None
    #: when the credential stops being valid (a token's expiry, a JWT's ``exp``; None: never)
    expires_at: datetime | None = None

    def role_on(self, team: str) -> Role | None:
        """The principal's role on ``team`` (the higher of its binding there and on ``*``)."""
        found = [r for t, r in self.roles.items() if t in (team, ALL_TEAMS)]
        return max(found) if found else None

    @property
    def highest(self) -> Role | None:
        return max(self.roles.values()) if self.roles else None

    @property
    def platform_admin(self) -> bool:
        return self.roles.get(ALL_TEAMS) == Role.ADMIN

    def teams(self) -> frozenset[str] | None:
        """The teams whose jobs the principal sees; None = every team."""
        if ALL_TEAMS in self.roles:
            return None
        return frozenset(self.roles)


ANONYMOUS = Principal(subject="anonymous", scopes=frozenset())


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str


def decide(
    principal: Principal,
    action: Action,
    team: str | None = None,
    job: str | None = None,
    *,
    platform_marks: bool = False,
) -> Decision:
    """The built-in role bindings: may ``principal`` take ``action`` on a resource of ``team``?

    ``team`` is the resource's team for team-scoped actions (``""`` is a team like any other:
    the jobs nobody claimed; only ``*`` bindings reach them); ``job`` the job's name, which only
    a run token's decision looks at; ``platform_marks``: cluster marks are for operators of
    every team only.
    """
    if action is Action.INTERNAL:
        if principal.node:
            return Decision(True, "a node of this deployment")
        return Decision(False, "node-to-node calls need the deployment secret")
    if principal.node:
        return Decision(False, "the deployment secret only opens /v1/internal")
    if principal.run_of_job is not None:
        if action is Action.JOB_FENCE and job == principal.run_of_job:
            return Decision(True, "a run asks whether it is current")
        return Decision(False, "a fencing token only opens its own job's fence check")
    if action not in READ_ACTIONS and Scope.WRITE not in principal.scopes:
        return Decision(False, "the token is read-only")
    if action in READ_ACTIONS and not principal.scopes:
        return Decision(False, "no credentials")
    if action is Action.TOKEN_OWN:
        if principal.identity is not None:
            return Decision(True, "one's own tokens")
        return Decision(False, "this credential has no stored identity to hold tokens")
    if action in _PLATFORM:
        if principal.platform_admin:
            return Decision(True, "platform admin")
        return Decision(False, f"{action} needs the admin role on every team ('*')")
    if action in _EVERY_TEAM_ROLE or (platform_marks and action is Action.CLUSTER_MARK):
        need = _EVERY_TEAM_ROLE.get(action, Role.OPERATOR)
        have = principal.roles.get(ALL_TEAMS)
        if have is not None and have >= need:
            return Decision(True, f"{have} on every team")
        return Decision(False, f"{action} needs the {need} role on every team ('*')")
    if action in _ANY_TEAM_ROLE:
        need = _ANY_TEAM_ROLE[action]
        have = principal.highest
        if have is not None and have >= need:
            return Decision(True, f"{have} of a team")
        return Decision(False, f"{action} needs the {need} role on some team")
    need = _TEAM_ROLE[action]
    if team is None:
        # a listing: allowed when the principal holds the role somewhere; the rows are filtered
        ok = any(r >= need for r in principal.roles.values())
        return Decision(ok, f"{action} needs the {need} role on some team" if not ok else "listing")
    have = principal.role_on(team)
    if have is not None and have >= need:
        return Decision(True, f"{have} of team {team!r}")
    return Decision(False, f"{action} on team {team!r} needs the {need} role there")


#: actions decided per team (the rest are teamless: catalog, cluster marks, platform)
TEAM_SCOPED: frozenset[Action] = frozenset(_TEAM_ROLE)
#: what :func:`grants` reports (fence checks and node calls are no person's business)
GRANTABLE: tuple[Action, ...] = tuple(
    a for a in Action if a not in (Action.INTERNAL, Action.JOB_FENCE)
)


def grants(
    principal: Principal, decide_on: Callable[[Action, str | None], Decision]
) -> dict[str, list[str]]:
    """What ``principal`` may do, for clients that show only what their user can use (the
    console hides the buttons a viewer cannot press): action -> where it is allowed.

    A team-scoped action lists the teams of the principal's bindings it is allowed on, ``*``
    first when it is allowed on every team; a teamless action is ``["*"]`` when allowed. Actions
    allowed nowhere are left out. ``decide_on(action, team)`` is the deciding function (the
    built-in bindings or the permission center), so the answer is what the API will enforce.
    """
    out: dict[str, list[str]] = {}
    for action in GRANTABLE:
        if action in TEAM_SCOPED:
            teams = sorted(principal.roles, key=lambda t: (t != ALL_TEAMS, t))
            allowed = [t for t in teams if decide_on(action, t).allowed]
        else:
            allowed = [ALL_TEAMS] if decide_on(action, None).allowed else []
        if allowed:
            out[action.value] = allowed
    return out


def acting_as(principal: Principal, need: Role = Role.OPERATOR) -> str:
    """Who ``principal`` is when a role on *some* team lets it act on what every team shares (a
    cluster mark stops every team's starts there): its subject, and the teams whose role lets it
    (``user:olga (operator of team ads)``), so the other teams see whose operator it was. A
    platform operator (``*``) is its subject alone."""
    every = principal.roles.get(ALL_TEAMS)
    if every is not None and every >= need:
        return principal.subject
    holds = [f"{r} of team {t}" for t, r in sorted(principal.roles.items()) if r >= need]
    return f"{principal.subject} ({', '.join(holds)})" if holds else principal.subject


# --------------------------------------------------------------------------- API tokens


def may_mint(
    principal: Principal,
    scopes: frozenset[Scope],
    expires_at: datetime | None,
    *,
    platform_admin: bool,
) -> Decision:
    """May ``principal`` mint a token of ``scopes`` that expires at ``expires_at`` (None: never,
    which a caller asks for explicitly)? A minted token never exceeds the credential minting
    it: no scope it lacks, no expiry after its own, and a token that never expires only from a
    platform admin (``platform_admin``: as the deciding authority says) whose own credential
    never expires either. Whether the principal may mint at all (``token.own`` or
    ``platform.admin``) is decided first, like any write."""
    beyond = sorted(s.value for s in scopes - principal.scopes)
    if beyond:
        return Decision(False, f"a token may not carry scopes its minting token lacks: {beyond}")
    if expires_at is None:
        if not platform_admin:
            return Decision(False, "only a platform admin mints a token that never expires")
        if principal.expires_at is not None:
            return Decision(False, "a token that expires may not mint one that never does")
        return Decision(True, "a platform admin, asking for a token that never expires")
    if principal.expires_at is not None and expires_at > principal.expires_at:
        return Decision(
            False,
            "a token may not outlive the credential minting it "
            f"(which expires at {principal.expires_at.isoformat()})",
        )
    return Decision(True, "within the minting credential's scopes and lifetime")


def default_expiry(principal: Principal, now: datetime, lifetime: timedelta) -> datetime:
    """A minted token's expiry when the caller names none: ``lifetime`` from ``now``, cut to the
    minting credential's own expiry."""
    wanted = now + lifetime
    return wanted if principal.expires_at is None else min(wanted, principal.expires_at)


@dataclass(frozen=True)
class NewToken:
    """A freshly minted token: ``secret`` is shown once; only ``digest`` is stored."""

    secret: str
    #: the first characters after the prefix, stored in clear to tell tokens apart in listings
    lookup: str
    digest: str


def token_digest(secret: str) -> str:
    """What the store keeps of a token: SHA-256 (tokens carry 256 random bits; no salt needed)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def mint_token() -> NewToken:
    body = secrets.token_urlsafe(32)
    secret = f"{TOKEN_PREFIX}{body}"
    return NewToken(secret=secret, lookup=body[:8], digest=token_digest(secret))


def looks_like_token(value: str) -> bool:
    return value.startswith(TOKEN_PREFIX) and 20 < len(value) < 200


def same_secret(given: str, expected: str) -> bool:
    """Constant-time comparison of two secrets."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def parse_bindings(raw: Mapping[str, str] | list[str] | str) -> dict[str, Role]:
    """Role bindings from a JWT claim or a CLI option.

    Accepts ``{"team": "role"}``, ``["team:role", ...]`` or ``"team:role,team:role"``; an unknown
    role raises ValueError. When a team appears twice the higher role wins.
    """
    pairs: list[tuple[str, str]]
    if isinstance(raw, Mapping):
        pairs = [(str(k), str(v)) for k, v in raw.items()]
    else:
        items = raw.split(",") if isinstance(raw, str) else raw
        pairs = []
        for item in items:
            text = str(item).strip()
            if not text:
                continue
            team, sep, role = text.rpartition(":")
            if not sep or not team:
                raise ValueError(f"bad role binding {text!r}: expected team:role")
            pairs.append((team, role))
    out: dict[str, Role] = {}
    for team, role_name in pairs:
        parsed = Role.parse(role_name)
        out[team] = max(out.get(team, parsed), parsed)
    return out
