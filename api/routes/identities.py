"""``/v1/whoami``, ``/v1/teams`` (teams and their members' roles) and ``/v1/tokens`` (API tokens).

A token's secret is in the answer to its creation and nowhere else (the store keeps its SHA-256).
Every mutation is one transaction that also writes the audit log (before and after).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field

from api.deps import CallerDep, NamePath, PrincipalDep, StoreDep
from api.paging import Page, PageDep
from api.problems import problem_responses
from api.routes.common import Listing
from api.schemas.resources import TEXT_SCHEMA, CleanText
from api.security.authz import Authorizer
from scheduler.core.errors import Forbidden, InvalidInput
from scheduler.core.names import MAX_NAME_LENGTH, NAME_PATTERN, validate_name
from scheduler.core.paging import Sort
from scheduler.decisions.identity import (
    ALL_TEAMS,
    Action,
    Decision,
    Role,
    Scope,
    default_expiry,
    grants,
    may_mint,
)
from scheduler.store import identities

router = APIRouter(tags=["identities"])

RoleName = Annotated[str, Field(pattern="^(viewer|operator|admin)$")]


class WhoAmI(BaseModel):
    subject: str
    identity: str | None
    #: team -> role (``*``: every team)
    roles: dict[str, str]
    scopes: list[str]
    permissions: dict[str, list[str]] = Field(
        default_factory=dict,
        description="What the caller may do, as the API decides it: action (`job.write`, "
        "`cluster.mark`, ...) -> the teams it is allowed on (`*`: every team; teamless actions "
        'are `["*"]` when allowed). Actions allowed nowhere are absent. Clients such as the '
        "console show only the controls the caller can use.",
        examples=[{"job.read": ["ads"], "job.write": ["ads"], "catalog.read": ["*"]}],
    )


class TeamCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[
        str, Field(min_length=1, max_length=128, json_schema_extra=TEXT_SCHEMA), CleanText
    ]
    description: Annotated[str, Field(max_length=512, json_schema_extra=TEXT_SCHEMA), CleanText] = (
        ""
    )


class TeamPublic(BaseModel):
    name: str
    description: str
    created_at: datetime
    #: identity -> role
    members: dict[str, str]


class TeamPage(Page[TeamPublic]):
    """A page of teams, by name."""


class MemberPut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: RoleName
    #: created when the identity does not exist yet
    kind: Annotated[str, Field(pattern="^(user|service)$")] = "user"


#: a minted token's lifetime when the request names none (cut to the minting credential's)
DEFAULT_TOKEN_LIFETIME_S = 90 * 86400


class TokenCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: whose token (default: the caller's own identity)
    identity: (
        Annotated[
            str, Field(min_length=1, max_length=128, json_schema_extra=TEXT_SCHEMA), CleanText
        ]
        | None
    ) = None
    scopes: list[Scope] = Field(default_factory=lambda: [Scope.READ, Scope.WRITE], max_length=2)
    expires_in_seconds: Annotated[
        int | None,
        Field(
            ge=60,
            le=10 * 365 * 86400,
            description="lifetime in seconds; absent: 90 days, cut to the minting credential's "
            "own expiry; `null` (explicitly): never expires, for a platform admin whose own "
            "credential never expires. A minted token never outlives, nor outranks, the "
            "credential minting it (403).",
        ),
    ] = DEFAULT_TOKEN_LIFETIME_S
    description: Annotated[str, Field(max_length=256, json_schema_extra=TEXT_SCHEMA), CleanText] = (
        ""
    )


class TokenPublic(BaseModel):
    id: int
    identity: str
    #: the first characters of the secret (to recognise it); never the secret
    prefix: str
    scopes: list[str]
    description: str
    created_by: str
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    parent_id: int | None = Field(
        default=None,
        description="the token that minted this one (null: minted by no token: the CLI on the "
        "store's host, or a JWT); revoking that token revokes this one",
        examples=[7],
    )


class TokenCreated(TokenPublic):
    #: the token itself: shown once, never again
    token: str


class TokenPage(Page[TokenPublic]):
    """A page of tokens, by id."""


@router.get("/v1/whoami", operation_id="get_whoami", summary="Who am I", response_model=WhoAmI)
def whoami(principal: PrincipalDep, request: Request) -> WhoAmI:
    """Who the credential is: subject, role bindings, scopes, and what it may do."""
    authorizer: Authorizer = request.app.state.authorizer

    def decide_on(action: Action, team: str | None) -> Decision:
        return authorizer.decide(principal, action, resource="whoami", team=team)

    return WhoAmI(
        subject=principal.subject,
        identity=principal.identity,
        roles={t: str(r) for t, r in sorted(principal.roles.items())},
        scopes=sorted(s.value for s in principal.scopes),
        permissions=grants(principal, decide_on),
    )


def _team(record: identities.TeamRecord) -> TeamPublic:
    return TeamPublic(
        name=record.name,
        description=record.description,
        created_at=record.created_at,
        members=record.members,
    )


@router.post(
    "/v1/teams",
    operation_id="create_team",
    summary="Create a team",
    description=(
        "Create a team (names are unique: 409). Members are bound to it with `PUT "
        "/v1/teams/{team}/members/{identity}`."
    ),
    status_code=status.HTTP_201_CREATED,
    response_model=TeamPublic,
    responses=problem_responses(409, 415),
)
def create_team(body: TeamCreate, caller: CallerDep) -> TeamPublic:
    if body.name == ALL_TEAMS:
        raise InvalidInput("'*' means every team; it is not a team name")
    with caller.store.transaction() as session:
        team = identities.create_team(session, body.name, body.description)
        after = {"name": team.name, "description": team.description}
        caller.audit(session, "team.create", team.name, team=team.name, after=after)
    return _team(team)


@router.get("/v1/teams", operation_id="list_teams", summary="List teams", response_model=TeamPage)
def list_teams(
    request: Request,
    response: Response,
    store: StoreDep,
    principal: PrincipalDep,
    asked: PageDep,
) -> TeamPage:
    """The teams the caller may see, by name, with their members' roles."""
    visible = principal.teams()
    listing = Listing(
        order=Sort("name"),
        key_kinds=(str,),
        page=lambda session, window: identities.page_teams(session, window, visible),
        count_all=lambda session: identities.count_teams(session, visible),
        page_model=TeamPage,
    )
    return listing.read(request, response, store, asked, _team)


@router.get(
    "/v1/teams/{team}",
    operation_id="get_team",
    summary="Read a team",
    description="The team with its members and their roles.",
    response_model=TeamPublic,
    responses=problem_responses(404),
)
def get_team(team: NamePath, store: StoreDep) -> TeamPublic:
    with store.session() as session:
        return _team(identities.get_team(session, validate_name(team, "team name")))


#: the ``{team}`` of a binding: a team's name, or ``*`` (the platform's own bindings)
TeamPath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_NAME_LENGTH,
        description="the team's name, or `*` for the platform's own bindings",
        examples=["ads"],
        json_schema_extra={"pattern": r"^(?:\*|" + NAME_PATTERN[1:-1] + ")$"},
    ),
]


def _member_target(team: str, identity: str) -> tuple[str, str]:
    if team != ALL_TEAMS:
        validate_name(team, "team name")
    return team, validate_name(identity, "identity name")


@router.put(
    "/v1/teams/{team}/members/{identity}",
    operation_id="set_team_member",
    summary="Bind an identity to a team with a role",
    response_model=TeamPublic,
    responses=problem_responses(404, 409, 415),
)
def put_member(
    team: TeamPath, identity: NamePath, body: MemberPut, caller: CallerDep
) -> TeamPublic:
    """Give ``identity`` ``role`` on ``team`` (creating the identity when it is new)."""
    team, identity = _member_target(team, identity)
    with caller.store.transaction() as session:
        identities.ensure_identity(session, identity, body.kind)
        previous = identities.bind(session, identity, team, Role.parse(body.role))
        caller.audit(
            session,
            "team.bind",
            team,
            {"identity": identity},
            team=team,
            before=None if previous is None else {"identity": identity, "role": previous},
            after={"identity": identity, "role": body.role},
        )
        record = identities.get_team(session, team) if team != ALL_TEAMS else None
    if record is None:
        return TeamPublic(
            name=ALL_TEAMS, description="every team", created_at=datetime.now(UTC), members={}
        )
    return _team(record)


@router.delete(
    "/v1/teams/{team}/members/{identity}",
    operation_id="remove_team_member",
    summary="Remove an identity from a team",
    description="Unbind the identity from the team; its tokens no longer act on the team's jobs.",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problem_responses(404, 409),
)
def delete_member(team: TeamPath, identity: NamePath, caller: CallerDep) -> Response:
    team, identity = _member_target(team, identity)
    with caller.store.transaction() as session:
        role = identities.unbind(session, identity, team)
        before = {"identity": identity, "role": role}
        caller.audit(session, "team.unbind", team, {"identity": identity}, team=team, before=before)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _token(record: identities.TokenRecord) -> dict[str, Any]:
    return record.as_dict()


@router.post(
    "/v1/tokens",
    operation_id="create_token",
    summary="Create an API token",
    status_code=status.HTTP_201_CREATED,
    response_model=TokenCreated,
    responses=problem_responses(404, 409, 415),
)
def create_token(
    body: TokenCreate, caller: CallerDep, request: Request, response: Response
) -> TokenCreated:
    """A new token for ``identity`` (default: the caller). Its secret is in this answer only.

    The token minting it is its parent: the new token carries none of the parent's missing
    scopes, expires no later than it, and is revoked with it."""
    principal = caller.principal
    identity = body.identity or principal.identity
    if identity is None:
        raise InvalidInput("name the identity: this credential has no stored identity")
    now = datetime.now(UTC)
    scopes = frozenset(body.scopes)
    expires: datetime | None
    if "expires_in_seconds" not in body.model_fields_set:
        expires = default_expiry(principal, now, timedelta(seconds=DEFAULT_TOKEN_LIFETIME_S))
    elif body.expires_in_seconds is None:
        expires = None  # asked for explicitly
    else:
        expires = now + timedelta(seconds=body.expires_in_seconds)
    authorizer: Authorizer = request.app.state.authorizer
    admin = expires is None and authorizer.decide(principal, Action.PLATFORM_ADMIN).allowed
    bounded = may_mint(principal, scopes, expires, platform_admin=admin)
    if not bounded.allowed:
        raise Forbidden(f"{principal.subject} may not mint this token: {bounded.reason}")
    with caller.store.transaction() as session:
        new, record = identities.create_token(
            session,
            validate_name(identity, "identity name"),
            scopes=scopes,
            expires_at=expires,
            description=body.description,
            created_by=caller.actor,
            parent_id=principal.token_id,
        )
        caller.audit(
            session,
            "token.create",
            str(record.id),
            {"minted_by_token": principal.token_id},
            after=_token(record),
        )
    response.headers["Cache-Control"] = "no-store"
    return TokenCreated(**_token(record), token=new.secret)


@router.get(
    "/v1/tokens", operation_id="list_tokens", summary="List API tokens", response_model=TokenPage
)
def list_tokens(
    request: Request,
    response: Response,
    store: StoreDep,
    principal: PrincipalDep,
    asked: PageDep,
) -> TokenPage:
    """Every token for a platform admin; the caller's own tokens for anyone else (by id)."""
    whose: frozenset[str] | None = None
    if not principal.platform_admin:
        whose = frozenset({principal.identity} if principal.identity is not None else ())
    listing = Listing(
        order=Sort("id"),
        key_kinds=(int,),
        page=lambda session, window: identities.page_tokens(session, window, identities=whose),
        count_all=lambda session: identities.count_tokens(session, identities=whose),
        page_model=TokenPage,
    )
    return listing.read(request, response, store, asked, lambda t: TokenPublic(**_token(t)))


@router.delete(
    "/v1/tokens/{token_id}",
    operation_id="revoke_token",
    summary="Revoke an API token",
    response_model=TokenPublic,
    responses=problem_responses(404, 409),
)
def revoke_token(
    token_id: Annotated[int, Field(ge=1, le=2**31 - 1)], caller: CallerDep
) -> TokenPublic:
    """Revoke a token at once (idempotent), and every token it minted (down the generations);
    they are refused from the next request on."""
    with caller.store.transaction() as session:
        revoked = identities.revoke_token(session, token_id)
        caller.audit(
            session,
            "token.revoke",
            str(token_id),
            {"also_revoked": list(revoked.descendants)},
            before=_token(revoked.before),
            after=_token(revoked.after),
        )
    return TokenPublic(**_token(revoked.after))
