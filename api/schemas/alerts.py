"""The API's view of alert channels and alerts."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, StrictBool

from api.schemas import attributes
from api.schemas.resources import TEXT_SCHEMA, CleanText, Name
from scheduler.decisions.alerts import AlertKind, AlertRecord, ChannelKind, ChannelRecord, Event
from scheduler.decisions.destinations import mask_url


class AlertChannelCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name
    kind: ChannelKind = Field(
        default=ChannelKind.WEBHOOK,
        description="`webhook`: the documented JSON body (docs/observability.md), signed with "
        '`secret` when set; `slack`: a Slack incoming-webhook message (`{"text": ...}`)',
    )
    url: AnyHttpUrl = Field(
        description="where messages are POSTed (http or https), a public destination: a host "
        "that is, or resolves to, a loopback, private, link-local, shared or multicast address "
        "is refused (422) unless the operator allows it (DROVER_ALERT_ALLOWED_HOSTS); checked "
        "again before every send"
    )
    kinds: list[AlertKind] = Field(
        default_factory=list, max_length=16, description="the alert kinds wanted (empty: all)"
    )
    min_severity: Literal["info", "warning", "critical"] = "warning"
    secret: Annotated[str, Field(min_length=16, max_length=256)] | None = Field(
        default=None,
        description="HMAC-SHA256 key: each webhook message carries `X-Drover-Signature: "
        "sha256=<hex of HMAC(secret, X-Drover-Timestamp + '.' + body)>`. Never shown again.",
    )
    enabled: StrictBool = True
    description: Annotated[str, Field(max_length=512, json_schema_extra=TEXT_SCHEMA), CleanText] = (
        ""
    )


class AlertChannelPublic(BaseModel):
    name: str
    kind: ChannelKind
    url: str = Field(
        description="where messages are POSTed: whole for the channel's team's admins (the "
        "platform's admins for a platform channel), else only its scheme and host "
        "(`https://hooks.slack.com/…`: a webhook URL is a credential)"
    )
    team: str = Field(description="`*`: the platform's channel")
    kinds: list[str]
    min_severity: str
    enabled: bool
    signed: bool = Field(description="whether messages carry a signature (a secret is set)")
    description: str
    created_at: datetime | None
    updated_at: datetime | None

    @classmethod
    def of(cls, channel: ChannelRecord, *, whole_url: bool = True) -> AlertChannelPublic:
        return cls(
            **attributes(
                cls,
                channel,
                url=channel.url if whole_url else mask_url(channel.url),
                min_severity=str(channel.min_severity),
                signed=bool(channel.secret),
            )
        )


class AlertPublic(BaseModel):
    id: int
    kind: AlertKind
    subject: str
    severity: str
    status: Event
    summary: str
    resolution: str | None
    team: str | None
    cluster: str | None
    group: str | None
    details: dict[str, Any]
    started_at: datetime
    resolved_at: datetime | None
    folded_into: int | None = Field(
        description="the cluster alert this one was folded into (not sent on its own while "
        "that cluster alert fired)"
    )
    folded: int = Field(description="a cluster alert's folded job alerts")
    deliveries: list[dict[str, Any]]

    @classmethod
    def of(
        cls, alert: AlertRecord, *, deliveries: list[dict[str, Any]], folded: int
    ) -> AlertPublic:
        return cls(
            **attributes(
                cls,
                alert,
                severity=str(alert.severity),
                resolution=alert.resolution or None,
                team=alert.team or None,
                folded=folded,
                deliveries=deliveries,
            )
        )
