"""Alerts: what to tell the platform's people, and to whom -- the pure decisions.

Drover raises an alert when something needs a person (the kinds below), keeps it **firing**
while the condition lasts, and sends one **resolved** message when it ends. An alert is
identified by its *key* (``kind:subject``): while one is firing for a key no second one is
raised (de-duplication), and a condition seen again later raises a new one.

========================  ========  =====================================================
kind                      severity  fires / resolves
========================  ========  =====================================================
``job_stalled``           warning   the job's owner marks it stalled / it moves again, or
                                    stops running
``job_failed``            warning   a run of the job failed (Drover restarts it within its
                                    budget) / the job is RUNNING again, or stopped
``job_given_up``          critical  the restart budget is spent: the job is FAILED / it is
                                    started again, or stopped
``cluster_abnormal``      critical  the cluster's health leaves NORMAL / it is NORMAL again
``auto_failover``         warning   a group's automatic failover was created for an
                                    abnormal cluster / the failover ended
``auto_failover_held``    critical  a due automatic failover was held (paused, no or an
                                    abnormal target, the target cooling down) / it was
                                    created, or the cluster is NORMAL again
========================  ========  =====================================================

**Folding.** While a cluster is abnormal, the alerts of the jobs on it are *folded* into the
cluster's one alert: they are recorded, counted and named in the cluster alert's messages, but
not sent on their own (an outage of a cluster with 500 jobs is one message, not 501). When the
cluster is NORMAL again, the folded alerts still firing are sent on their own; those that
resolved meanwhile are never sent.

**Routing.** A channel belongs to a team or to the platform (team ``*``). A job's alerts go to
its team's channels and the platform's; a cluster's alerts go to the platform's channels and to
the channels of every team with jobs folded into it. A channel may name the kinds it wants
(empty: all) and a least severity.

**Delivery** (``scheduler/alertsender.py``): from an outbox in the store, retried with
exponential backoff (:func:`retry_delay`), at most ``max_attempts`` times; messages of one alert
to one channel go in order.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

PLATFORM = "*"


class AlertKind(enum.StrEnum):
    JOB_STALLED = "job_stalled"
    JOB_FAILED = "job_failed"
    JOB_GIVEN_UP = "job_given_up"
    CLUSTER_ABNORMAL = "cluster_abnormal"
    #: automatic failover's decisions about a group's abnormal cluster (subject
    #: ``<group>:<cluster>``; scheduler/decisions/operations/auto.py)
    AUTO_FAILOVER = "auto_failover"
    AUTO_FAILOVER_HELD = "auto_failover_held"
    #: a channel's test message (``POST .../alert-channels/{name}/test``)
    TEST = "test"


class Severity(enum.IntEnum):
    INFO = 1
    WARNING = 2
    CRITICAL = 3

    @classmethod
    def parse(cls, name: str) -> Severity:
        return cls[name.upper()]

    def __str__(self) -> str:
        return self.name.lower()


SEVERITY: Mapping[AlertKind, Severity] = {
    AlertKind.JOB_STALLED: Severity.WARNING,
    AlertKind.JOB_FAILED: Severity.WARNING,
    AlertKind.JOB_GIVEN_UP: Severity.CRITICAL,
    AlertKind.CLUSTER_ABNORMAL: Severity.CRITICAL,
    AlertKind.AUTO_FAILOVER: Severity.WARNING,
    AlertKind.AUTO_FAILOVER_HELD: Severity.CRITICAL,
    AlertKind.TEST: Severity.INFO,
}
JOB_KINDS = frozenset({AlertKind.JOB_STALLED, AlertKind.JOB_FAILED, AlertKind.JOB_GIVEN_UP})


class ChannelKind(enum.StrEnum):
    WEBHOOK = "webhook"
    SLACK = "slack"


class Event(enum.StrEnum):
    FIRING = "firing"
    RESOLVED = "resolved"


def key_of(kind: AlertKind, subject: str) -> str:
    return f"{kind}:{subject}"


@dataclass(frozen=True)
class Signal:
    """A condition seen now: raise an alert for it (unless one is firing for its key)."""

    kind: AlertKind
    subject: str
    summary: str
    team: str = ""
    cluster: str | None = None
    group: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return key_of(self.kind, self.subject)


@dataclass(frozen=True)
class AlertRecord:
    id: int
    key: str
    kind: AlertKind
    subject: str
    severity: Severity
    status: Event
    summary: str
    team: str
    cluster: str | None
    group: str | None
    details: Mapping[str, Any]
    started_at: datetime
    resolved_at: datetime | None = None
    #: the cluster alert this one is folded into (None: sent on its own)
    folded_into: int | None = None
    resolution: str = ""


@dataclass(frozen=True)
class ChannelRecord:
    id: int
    name: str
    kind: ChannelKind
    url: str
    team: str
    kinds: tuple[str, ...] = ()
    min_severity: Severity = Severity.WARNING
    enabled: bool = True
    secret: str | None = None
    description: str = ""
    created_at: datetime | None = None
    updated_at: datetime | None = None


# -- folding -------------------------------------------------------------------------------------


def fold_target(
    signal_cluster: str | None, kind: AlertKind, firing_clusters: Mapping[str, int]
) -> int | None:
    """The cluster alert a new job alert folds into (its cluster's, while that fires)."""
    if kind not in JOB_KINDS or signal_cluster is None:
        return None
    return firing_clusters.get(signal_cluster)


# -- routing ---------------------------------------------------------------------------------------


def routes(
    alert: AlertRecord,
    channels: Iterable[ChannelRecord],
    *,
    folded_teams: Iterable[str] = (),
) -> list[ChannelRecord]:
    """The channels ``alert``'s messages go to (enabled, wanting its kind and severity, of its
    team or the platform; a cluster alert also to the teams with jobs folded into it)."""
    teams = {alert.team} | set(folded_teams) if alert.team else set(folded_teams)
    chosen = []
    for channel in channels:
        if not channel.enabled:
            continue
        if alert.kind != AlertKind.TEST:
            if channel.kinds and str(alert.kind) not in channel.kinds:
                continue
            if alert.severity < channel.min_severity:
                continue
        if channel.team == PLATFORM or channel.team in teams:
            chosen.append(channel)
    return sorted(chosen, key=lambda c: c.id)


# -- messages --------------------------------------------------------------------------------------


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def subject_kind(kind: AlertKind) -> str:
    """What an alert of ``kind`` is about: a job, a cluster, a group's cluster, a channel."""
    if kind == AlertKind.CLUSTER_ABNORMAL:
        return "cluster"
    if kind in (AlertKind.AUTO_FAILOVER, AlertKind.AUTO_FAILOVER_HELD):
        return "group-cluster"
    return "channel" if kind == AlertKind.TEST else "job"


def webhook_body(
    alert: AlertRecord,
    event: Event,
    *,
    delivery_id: int,
    folded: Sequence[AlertRecord] = (),
) -> dict[str, Any]:
    """The generic webhook's JSON body (docs/observability.md documents it)."""
    body: dict[str, Any] = {
        "version": 1,
        "delivery_id": delivery_id,
        "alert_id": alert.id,
        "event": str(event),
        "status": str(alert.status),
        "kind": str(alert.kind),
        "severity": str(alert.severity),
        "summary": alert.summary,
        "subject": {"kind": subject_kind(alert.kind), "name": alert.subject},
        "team": alert.team or None,
        "cluster": alert.cluster,
        "group": alert.group,
        "started_at": _iso(alert.started_at),
        "resolved_at": _iso(alert.resolved_at),
        "resolution": alert.resolution or None,
        "details": dict(alert.details),
    }
    if alert.kind == AlertKind.CLUSTER_ABNORMAL:
        jobs = sorted({f.subject for f in folded})
        body["folded"] = {
            "count": len(folded),
            "jobs": jobs[:50],
            "by_kind": {
                str(k): sum(1 for f in folded if f.kind == k)
                for k in sorted({f.kind for f in folded})
            },
        }
    return body


def slack_body(
    alert: AlertRecord, event: Event, *, folded: Sequence[AlertRecord] = ()
) -> dict[str, Any]:
    """A Slack incoming-webhook message (``text``; any Slack-compatible receiver)."""
    mark = (
        ":white_check_mark: RESOLVED"
        if event == Event.RESOLVED
        else (":rotating_light: " + str(alert.severity).upper())
    )
    lines = [f"{mark} {alert.summary}"]
    where = ", ".join(
        f"{label} {value}"
        for label, value in (
            ("team", alert.team),
            ("cluster", alert.cluster),
            ("group", alert.group),
        )
        if value
    )
    if where:
        lines.append(where)
    if alert.kind == AlertKind.CLUSTER_ABNORMAL and folded:
        names = sorted({f.subject for f in folded})
        more = f" and {len(names) - 10} more" if len(names) > 10 else ""
        lines.append(f"{len(folded)} job alert(s) folded in: {', '.join(names[:10])}{more}")
    if event == Event.RESOLVED and alert.resolution:
        lines.append(alert.resolution)
    return {"text": "\n".join(lines)}


def render(
    channel: ChannelRecord,
    alert: AlertRecord,
    event: Event,
    *,
    delivery_id: int,
    folded: Sequence[AlertRecord] = (),
) -> bytes:
    body = (
        slack_body(alert, event, folded=folded)
        if channel.kind == ChannelKind.SLACK
        else webhook_body(alert, event, delivery_id=delivery_id, folded=folded)
    )
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """``X-Drover-Signature``: HMAC-SHA256 of ``<timestamp>.<body>`` with the channel's secret."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


# -- retries ---------------------------------------------------------------------------------------

#: first retry after this many seconds, doubling, at most MAX_DELAY
FIRST_DELAY = 2.0
MAX_DELAY = 300.0
MAX_ATTEMPTS = 12


def retry_delay(attempts: int, first: float = FIRST_DELAY, most: float = MAX_DELAY) -> float:
    """Seconds before attempt ``attempts + 1`` (``attempts`` >= 1 failed so far)."""
    return min(most, first * 2 ** max(0, attempts - 1))
