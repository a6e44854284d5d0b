"""Alerts, the pure decisions: folding, routing, messages, retries
(scheduler/decisions/alerts.py)."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime

from scheduler.decisions.alerts import (
    AlertKind,
    AlertRecord,
    ChannelKind,
    ChannelRecord,
    Event,
    Severity,
    fold_target,
    render,
    retry_delay,
    routes,
    signature,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def alert(kind: AlertKind, subject: str, team: str = "", **kw: object) -> AlertRecord:
    severity = Severity.CRITICAL if kind == AlertKind.CLUSTER_ABNORMAL else Severity.WARNING
    return AlertRecord(
        id=kw.pop("id", 1),  # type: ignore[arg-type]
        key=f"{kind}:{subject}",
        kind=kind,
        subject=subject,
        severity=severity,
        status=Event.FIRING,
        summary=f"{kind} {subject}",
        team=team,
        cluster=kw.pop("cluster", "spark-a"),  # type: ignore[arg-type]
        group="g1",
        details={},
        started_at=T0,
    )


def channel(id_: int, team: str, **kw: object) -> ChannelRecord:
    return ChannelRecord(id_, f"c{id_}", ChannelKind.WEBHOOK, "http://x", team, **kw)  # type: ignore[arg-type]


def test_a_job_alert_folds_into_its_clusters_firing_alert() -> None:
    firing = {"spark-a": 7}
    assert fold_target("spark-a", AlertKind.JOB_STALLED, firing) == 7
    assert fold_target("spark-b", AlertKind.JOB_STALLED, firing) is None
    assert fold_target("spark-a", AlertKind.CLUSTER_ABNORMAL, firing) is None
    assert fold_target(None, AlertKind.JOB_FAILED, firing) is None


def test_routing_by_team_kind_and_severity() -> None:
    channels = [
        channel(1, "*"),
        channel(2, "ads"),
        channel(3, "web"),
        channel(4, "ads", kinds=("job_given_up",)),
        channel(5, "ads", min_severity=Severity.CRITICAL),
        channel(6, "ads", enabled=False),
    ]
    stalled = alert(AlertKind.JOB_STALLED, "orders", team="ads")
    assert [c.id for c in routes(stalled, channels)] == [1, 2]
    cluster = alert(AlertKind.CLUSTER_ABNORMAL, "spark-a")
    assert [c.id for c in routes(cluster, channels)] == [1]
    assert [c.id for c in routes(cluster, channels, folded_teams=["ads"])] == [1, 2, 5]


def test_webhook_and_slack_bodies() -> None:
    cluster = alert(AlertKind.CLUSTER_ABNORMAL, "spark-a", id=9)
    folded = [alert(AlertKind.JOB_STALLED, n, team="ads", id=i) for i, n in enumerate("ab", 10)]
    body = json.loads(render(channel(1, "*"), cluster, Event.FIRING, delivery_id=3, folded=folded))
    assert body["delivery_id"] == 3 and body["alert_id"] == 9 and body["event"] == "firing"
    assert body["subject"] == {"kind": "cluster", "name": "spark-a"}
    assert body["folded"] == {"count": 2, "jobs": ["a", "b"], "by_kind": {"job_stalled": 2}}
    slack = ChannelRecord(2, "s", ChannelKind.SLACK, "http://x", "*")
    text = json.loads(render(slack, cluster, Event.RESOLVED, delivery_id=4, folded=folded))
    assert set(text) == {"text"} and "RESOLVED" in text["text"] and "a, b" in text["text"]


def test_signature_and_retries() -> None:
    expected = hmac.new(b"k" * 16, b"123." + b"{}", hashlib.sha256).hexdigest()
    assert signature("k" * 16, "123", b"{}") == f"sha256={expected}"
    assert [retry_delay(n) for n in (1, 2, 3, 20)] == [2.0, 4.0, 8.0, 300.0]
