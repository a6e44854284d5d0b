"""Alert channels and alerts (``scheduler.decisions.alerts`` says what is alerted, folded, routed).

- ``/v1/alert-channels``: the platform's channels (team ``*``: every team's job alerts, and the
  clusters'); platform admins only.
- ``/v1/teams/{team}/alert-channels``: a team's channels (its jobs' alerts, and the alert of a
  cluster its jobs are folded into); the team's admins manage them, its members read them.
- ``POST .../{name}/test``: queue a test message (its delivery shows in ``GET /v1/alerts``).
- ``/v1/alerts``: alerts, newest first, with their deliveries; a caller sees its teams' alerts
  and the teamless ones (clusters).

Mutations are audited in their transaction. A channel's ``secret`` is never shown again, and
its URL (a Slack webhook URL is a credential) only to the admins of its team; everyone else,
and the audit log, see its scheme and host. A channel's destination must be public
(``scheduler.decisions.destinations``): checked here when it is created, and before every send.
"""

from __future__ import annotations

import socket
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status

from api.deps import Caller, CallerDep, NamePath, PrincipalDep, StoreDep
from api.paging import Page, PageDep, links, window
from api.problems import problem_responses
from api.schemas.alerts import AlertChannelCreate, AlertChannelPublic, AlertPublic
from api.security.authz import Authorizer
from scheduler.core.clock import utcnow
from scheduler.core.errors import NotFound
from scheduler.core.names import validate_name
from scheduler.core.paging import Sort
from scheduler.decisions.alerts import PLATFORM, AlertKind, ChannelRecord, Event, Severity
from scheduler.decisions.destinations import mask_url
from scheduler.decisions.identity import Action, Principal
from scheduler.store import alerts as alert_store

router = APIRouter(tags=["alerts"])

#: the order of GET /v1/alerts (its cursor is the last alert's id)
NEWEST_FIRST = Sort("id", descending=True)


def _known_team(store: Any, team: str) -> str:
    """``team`` if it names a team; otherwise a 404 (a malformed name is a 400)."""
    from scheduler.store import identities

    validate_name(team, "team")
    with store.session() as session:
        if not identities.team_exists(session, team):
            raise NotFound(f"no team named {team!r}")
    return team


def _doc(channel: ChannelRecord) -> dict[str, Any]:
    """The channel as the audit log keeps it (its URL masked)."""
    return AlertChannelPublic.of(channel, whole_url=False).model_dump(mode="json")


def _whole_urls(request: Request, principal: Principal, team: str) -> bool:
    """Whether the caller sees the whole URLs of ``team``'s channels (its admins do)."""
    authorizer: Authorizer = request.app.state.authorizer
    decision = authorizer.decide(principal, Action.TEAM_ADMIN, resource=f"team/{team}", team=team)
    return decision.allowed


def _audited_team(team: str) -> str:
    """The team the audit row of a change to a channel of ``team`` names (the platform's: none)."""
    return "" if team == PLATFORM else team


def _public_destination(ctx: Any, url: str) -> None:
    """Refuse (422) a destination that is, or now resolves to, a non-public address; a name
    that does not resolve now is checked before each send."""
    try:
        ctx.settings.alert_destinations.check(url, socket.getaddrinfo)
    except OSError:
        pass


def _create(body: AlertChannelCreate, team: str, caller: Caller) -> AlertChannelPublic:
    url = str(body.url)
    _public_destination(caller.ctx, url)
    record = ChannelRecord(
        id=0,
        name=body.name,
        kind=body.kind,
        url=url,
        team=team,
        kinds=tuple(str(k) for k in body.kinds),
        min_severity=Severity.parse(body.min_severity),
        enabled=body.enabled,
        secret=body.secret,
        description=body.description,
    )
    with caller.store.transaction() as session:
        channel = alert_store.create_channel(session, record)
        caller.audit(
            session,
            "alert_channel.create",
            channel.name,
            {
                **body.model_dump(mode="json", exclude={"secret"}),
                "url": mask_url(url),
                "team": team,
            },
            team=_audited_team(team),
            after=_doc(channel),
        )
    return AlertChannelPublic.of(channel)


def _delete(name: str, team: str | None, caller: Caller) -> Response:
    with caller.store.transaction() as session:
        channel = alert_store.delete_channel(
            session, validate_name(name, "channel name"), team=team
        )
        caller.audit(
            session,
            "alert_channel.delete",
            channel.name,
            team=_audited_team(channel.team),
            before=_doc(channel),
        )
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _test(name: str, team: str | None, caller: Caller) -> dict[str, int]:
    with caller.store.transaction() as session:
        channel = alert_store.get_channel(session, validate_name(name, "channel name"), team=team)
        alert_id = alert_store.add_test_alert(session, channel, caller.actor, utcnow())
        caller.audit(session, "alert_channel.test", channel.name, team=_audited_team(channel.team))
    return {"alert_id": alert_id}


# -- the platform's channels -----------------------------------------------------------------


@router.post(
    "/v1/alert-channels",
    status_code=status.HTTP_201_CREATED,
    response_model=AlertChannelPublic,
    responses=problem_responses(409, 415),
    operation_id="create_platform_alert_channel",
    summary="Create a platform alert channel",
    description="A channel of the platform (team `*`): it gets every job's alerts and the "
    "clusters'.",
)
def create_platform_channel(body: AlertChannelCreate, caller: CallerDep) -> AlertChannelPublic:
    return _create(body, PLATFORM, caller)


@router.get(
    "/v1/alert-channels",
    description=(
        "Every alert channel the caller may see: the platform's and every team's, with the kinds "
        "of alerts each receives."
    ),
    response_model=list[AlertChannelPublic],
    operation_id="list_alert_channels",
    summary="Every alert channel (platform and teams)",
)
def list_channels(store: StoreDep) -> list[AlertChannelPublic]:
    with store.session() as session:
        return [AlertChannelPublic.of(c) for c in alert_store.list_channels(session)]


@router.get(
    "/v1/alert-channels/{name}",
    description="One alert channel by name: its kind, target and the alerts it receives.",
    response_model=AlertChannelPublic,
    responses=problem_responses(404),
    operation_id="get_alert_channel",
    summary="One alert channel",
)
def get_channel(name: NamePath, store: StoreDep) -> AlertChannelPublic:
    with store.session() as session:
        return AlertChannelPublic.of(
            alert_store.get_channel(session, validate_name(name, "channel name"))
        )


@router.delete(
    "/v1/alert-channels/{name}",
    description="Delete an alert channel, whichever team owns it; alerts no longer go to it.",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problem_responses(404),
    operation_id="delete_alert_channel",
    summary="Delete an alert channel (any team's)",
)
def delete_channel(name: NamePath, caller: CallerDep) -> Response:
    return _delete(name, None, caller)


@router.post(
    "/v1/alert-channels/{name}/test",
    description="Queue a test message to the channel; its delivery shows in `GET /v1/alerts`.",
    status_code=status.HTTP_202_ACCEPTED,
    responses=problem_responses(404),
    operation_id="test_alert_channel",
    summary="Queue a test message to an alert channel",
)
def test_channel(name: NamePath, caller: CallerDep) -> dict[str, int]:
    return _test(name, None, caller)


# -- a team's channels ---------------------------------------------------------------------------


@router.post(
    "/v1/teams/{team}/alert-channels",
    status_code=status.HTTP_201_CREATED,
    response_model=AlertChannelPublic,
    responses=problem_responses(404, 409, 415),
    operation_id="create_team_alert_channel",
    summary="Create a team's alert channel",
    description="It gets the alerts of the team's jobs, and the alert of a cluster the team's "
    "jobs are folded into.",
)
def create_team_channel(
    team: NamePath, body: AlertChannelCreate, caller: CallerDep
) -> AlertChannelPublic:
    return _create(body, _known_team(caller.store, team), caller)


@router.get(
    "/v1/teams/{team}/alert-channels",
    description="The alert channels of one team (404 for an unknown team); their URLs whole "
    "for the team's admins, else masked to scheme and host.",
    response_model=list[AlertChannelPublic],
    responses=problem_responses(404),
    operation_id="list_team_alert_channels",
    summary="A team's alert channels",
)
def list_team_channels(
    team: NamePath, store: StoreDep, request: Request, principal: PrincipalDep
) -> list[AlertChannelPublic]:
    _known_team(store, team)
    whole = _whole_urls(request, principal, team)
    with store.session() as session:
        return [
            AlertChannelPublic.of(c, whole_url=whole)
            for c in alert_store.list_channels(session, team=team)
        ]


@router.delete(
    "/v1/teams/{team}/alert-channels/{name}",
    description="Delete one of the team's alert channels (404 for an unknown team or channel).",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=problem_responses(404),
    operation_id="delete_team_alert_channel",
    summary="Delete a team's alert channel",
)
def delete_team_channel(team: NamePath, name: NamePath, caller: CallerDep) -> Response:
    return _delete(name, _known_team(caller.store, team), caller)


@router.post(
    "/v1/teams/{team}/alert-channels/{name}/test",
    description=(
        "Queue a test message to one of the team's channels; its delivery shows in `GET "
        "/v1/alerts`."
    ),
    status_code=status.HTTP_202_ACCEPTED,
    responses=problem_responses(404),
    operation_id="test_team_alert_channel",
    summary="Queue a test message to a team's alert channel",
)
def test_team_channel(team: NamePath, name: NamePath, caller: CallerDep) -> dict[str, int]:
    return _test(name, _known_team(caller.store, team), caller)


# -- alerts ----------------------------------------------------------------------------------------


@router.get(
    "/v1/alerts",
    response_model=Page[AlertPublic],
    operation_id="list_alerts",
    summary="Alerts, newest first, with their deliveries",
    description="`status=firing` for what is open now. A caller sees its teams' alerts and "
    "the teamless ones (clusters). Cursor pages (`limit`, `cursor`; `next` on each page).",
)
def list_alerts(
    request: Request,
    response: Response,
    store: StoreDep,
    principal: PrincipalDep,
    status_: Annotated[Event | None, Query(alias="status")] = None,
    kind: AlertKind | None = None,
    *,
    asked: PageDep,
) -> Page[AlertPublic]:
    limit = asked.limit
    filters = {"status": status_, "kind": kind}
    place = window(NEWEST_FIRST, asked.cursor, limit, filters, (int,))
    before = int(place.after[0]) if place.after else None  # type: ignore[arg-type]
    with store.session() as session:
        alerts, total = alert_store.list_alerts(
            session,
            status=status_,
            kind=kind,
            teams=principal.teams(),
            limit=limit + 1,
            before_id=before,
            count=asked.count,
        )
        data = [
            AlertPublic.of(
                a,
                deliveries=alert_store.deliveries_of(session, a.id),
                folded=len(alert_store.folded_into(session, a.id))
                if a.kind == AlertKind.CLUSTER_ABNORMAL
                else 0,
            )
            for a in alerts[:limit]
        ]
    more = len(alerts) > limit
    next_cursor, next_url = links(
        request, response, NEWEST_FIRST, (data[-1].id,) if more and data else None, filters
    )
    return Page[AlertPublic](
        data=data, limit=limit, next_cursor=next_cursor, next=next_url, count=total
    )
