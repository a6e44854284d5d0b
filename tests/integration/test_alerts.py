"""Alerts through the store (SQLite and MariaDB): de-duplication, folding into the cluster's
alert, routing per team, the outbox's retries with backoff, order and claims (two nodes never
send one message at once)."""

from __future__ import annotations

import json
import socket
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from scheduler.actors.alerts import AlertLoop
from scheduler.core.clock import utcnow
from scheduler.decisions.alerts import AlertKind, ChannelKind, ChannelRecord, Signal, key_of
from scheduler.decisions.destinations import Destinations
from scheduler.store import alerts as alert_store
from scheduler.store.db import Store

pytestmark = pytest.mark.integration


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self):  # type: ignore[no-untyped-def]
        return self.now


class Receiver:
    """httpx transport: records requests; answers the statuses queued (then 204)."""

    def __init__(self, *statuses: int) -> None:
        self.statuses = list(statuses)
        self.bodies: list[tuple[str, dict]] = []  # type: ignore[type-arg]
        self.requests: list[httpx.Request] = []
        #: what the receiver answers in its body (never shown back: see last_error)
        self.reply = ""

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append((str(request.url), json.loads(request.content)))
        self.requests.append(request)
        return httpx.Response(self.statuses.pop(0) if self.statuses else 204, text=self.reply)


def loop(
    store: Store,
    receiver: Receiver,
    clock: Clock,
    node: str = "n1",
    *,
    allowed: str = "hooks",
    resolve: Any = None,
) -> AlertLoop:
    """The alert loop of node ``node``, sending to ``receiver``. The tests' receivers are
    internal hosts: allowed explicitly (``allowed``, as DROVER_ALERT_ALLOWED_HOSTS)."""
    return AlertLoop(
        store,
        node_id=node,
        interval=1,
        clock=clock,
        transport=httpx.MockTransport(receiver),
        destinations=Destinations.parse(allowed),
        **({"resolve": resolve} if resolve is not None else {}),
    )


def channels(store: Store) -> None:
    with store.transaction() as s:
        for name, team in (("plat", "*"), ("ads", "ads"), ("web", "web")):
            alert_store.create_channel(
                s, ChannelRecord(0, name, ChannelKind.WEBHOOK, f"http://hooks/{name}", team)
            )


def stalled(job: str, team: str = "ads", cluster: str = "local") -> Signal:
    return Signal(AlertKind.JOB_STALLED, job, f"{job} stalled", team=team, cluster=cluster)


def test_dedupe_route_fold_and_resolve(store: Store) -> None:
    channels(store)
    clock, receiver = Clock(), Receiver()
    with store.transaction() as s:
        assert alert_store.raise_alert(s, stalled("a"), clock.now) is not None
        assert alert_store.raise_alert(s, stalled("a"), clock.now) is None  # firing: no second
    sender = loop(store, receiver, clock)
    assert sender.send_due() == (2, 0)
    assert sorted(url for url, _ in receiver.bodies) == ["http://hooks/ads", "http://hooks/plat"]
    # the cluster goes abnormal: one alert; a job's stall folds into it (its team told once)
    with store.transaction() as s:
        cluster = alert_store.raise_alert(
            s, Signal(AlertKind.CLUSTER_ABNORMAL, "local", "down", cluster="local"), clock.now
        )
        assert cluster is not None
        b = alert_store.raise_alert(s, stalled("b"), clock.now)
        c = alert_store.raise_alert(s, stalled("c", team="web"), clock.now)
        assert b is not None and b.folded_into == cluster.id and c is not None
    receiver.bodies.clear()
    assert sender.send_due() == (3, 0)  # the cluster alert to plat, ads, web; no job message
    assert {body["kind"] for _, body in receiver.bodies} == {"cluster_abnormal"}
    with store.transaction() as s:  # b recovers during the outage: never told
        assert alert_store.resolve_alert(s, key_of(AlertKind.JOB_STALLED, "b"), "ok", clock.now)
    receiver.bodies.clear()
    assert sender.send_due() == (0, 0)
    with store.transaction() as s:
        alert_store.resolve_alert(s, cluster.key, "NORMAL again", clock.now)
    sent, _ = sender.send_due()
    kinds = sorted((b["kind"], b["event"], url) for url, b in receiver.bodies)
    assert ("cluster_abnormal", "resolved", "http://hooks/plat") in kinds
    # c still stalls: sent on its own now, to its team and the platform
    assert ("job_stalled", "firing", "http://hooks/web") in kinds
    assert not any(b["subject"]["name"] == "b" for _, b in receiver.bodies)
    resolved = [b for _, b in receiver.bodies if b["kind"] == "cluster_abnormal"][0]
    assert resolved["folded"]["count"] == 2 and resolved["folded"]["jobs"] == ["b", "c"]


def test_retries_with_backoff_in_order_and_claims(store: Store) -> None:
    channels(store)
    clock, receiver = Clock(), Receiver(500, 503)
    with store.transaction() as s:
        alert_store.raise_alert(s, stalled("a", team="web"), clock.now)
        alert_store.resolve_alert(s, key_of(AlertKind.JOB_STALLED, "a"), "moving", clock.now)
    sender = loop(store, receiver, clock)
    other = loop(store, Receiver(), clock, node="n2")
    # firing to plat fails (500), firing to web fails (503); the resolves wait their turn
    assert sender.send_due() == (0, 2)
    assert other.send_due() == (0, 0)  # nothing due: retried in 2 s, resolves behind them
    clock.now += timedelta(seconds=2.5)
    assert sender.send_due() == (2, 0)
    assert sender.send_due() == (2, 0)  # now the resolves
    events = [(b["event"], url) for url, b in receiver.bodies]
    assert events[-2:] == [("resolved", "http://hooks/plat"), ("resolved", "http://hooks/web")]
    with store.session() as s:
        alerts, _ = alert_store.list_alerts(s)
        deliveries = alert_store.deliveries_of(s, alerts[0].id)
    assert (
        all(d["delivered_at"] for d in deliveries) and max(d["attempts"] for d in deliveries) == 2
    )
    assert {d["event"] for d in deliveries} == {"firing", "resolved"}


def test_a_claim_keeps_a_message_from_a_second_node(store: Store) -> None:
    channels(store)
    clock = Clock()
    with store.transaction() as s:
        alert_store.raise_alert(s, stalled("a", team="web"), clock.now)
    with store.transaction() as s:
        token = alert_store.claim_due(s, "n1", clock.now, lease=60, limit=10)
    assert token is not None
    with store.transaction() as s:
        assert alert_store.claim_due(s, "n2", clock.now, lease=60, limit=10) is None
    with store.transaction() as s:  # the claim ran out (n1 died): n2 sends it
        assert alert_store.claim_due(s, "n2", clock.now + timedelta(seconds=61), lease=60,
                                     limit=10) is not None  # fmt: skip


# -- destinations: no requests into the node's own network (SSRF) -------------------------------


def resolving(answers: dict[str, list[str]]) -> Any:
    """A getaddrinfo stand-in: each name resolves to what ``answers`` says now."""

    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in answers[host]]

    return getaddrinfo


def delivery(store: Store) -> dict[str, Any]:
    with store.session() as s:
        alerts, _ = alert_store.list_alerts(s)
        (only,) = [d for a in alerts for d in alert_store.deliveries_of(s, a.id)]
    return only


def test_send_time_checks_the_address_and_sends_to_the_one_it_checked(store: Store) -> None:
    """A name that resolved to a public address when its channel was made and resolves to an
    internal one now (DNS rebinding) gets nothing; a public one gets the message at the
    address that was checked, with its own name as Host and TLS server name."""
    with store.transaction() as s:
        alert_store.create_channel(
            s, ChannelRecord(0, "rebind", ChannelKind.WEBHOOK, "https://rebind.example/h", "ads")
        )
    clock, receiver = Clock(), Receiver()
    answers = {"rebind.example": ["169.254.169.254"]}
    sender = loop(store, receiver, clock, allowed="", resolve=resolving(answers))
    with store.transaction() as s:
        alert_store.raise_alert(s, stalled("a"), clock.now)
    assert sender.send_due() == (0, 1)
    assert receiver.requests == []  # never sent
    failed = delivery(store)
    assert "not a public address" in failed["last_error"]
    assert "169.254" not in failed["last_error"]  # nothing about the inside is told

    answers["rebind.example"] = ["93.184.216.34"]
    clock.now += timedelta(seconds=3)
    assert sender.send_due() == (1, 0)
    (request,) = receiver.requests
    assert request.url.host == "93.184.216.34" and request.url.path == "/h"
    assert request.headers["host"] == "rebind.example"
    assert request.extensions["sni_hostname"] == "rebind.example"


def test_a_receivers_answer_is_never_shown(store: Store) -> None:
    channels(store)
    clock, receiver = Clock(), Receiver(500, 500)
    receiver.reply = "internal-service-secret: hunter2"
    with store.transaction() as s:
        alert_store.raise_alert(s, stalled("a", team="web"), clock.now)
    assert loop(store, receiver, clock).send_due() == (0, 2)
    with store.session() as s:
        alerts, _ = alert_store.list_alerts(s)
        errors = [d["last_error"] for d in alert_store.deliveries_of(s, alerts[0].id)]
    assert errors == ["HTTP 500", "HTTP 500"]


def test_channels_refuse_internal_destinations_and_mask_urls(store: Store, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from api.app import create_app
    from api.deps import NodeContext
    from scheduler.config import Settings
    from tests.support.auth import admin_token, auth_headers, member_token, store_fingerprint

    settings = Settings(data_dir=tmp_path / "d", node_id="a")
    admin = auth_headers(member_token(store, "ada", "ads", "admin"))
    viewer = auth_headers(member_token(store, "vic", "ads", "viewer"))
    root = auth_headers(admin_token(store))
    with TestClient(create_app(NodeContext(settings, store)), base_url="http://127.0.0.1") as api:
        before = store_fingerprint(store)
        for url in (
            "http://127.0.0.1:9/hook",
            "http://localhost:8000/v1/internal/nudge",
            "http://169.254.169.254/latest/meta-data/",
            "http://10.0.0.7/",
            "http://100.64.0.1/",
            "http://[::1]:8000/",
            "http://[::ffff:127.0.0.1]:8000/",
            "http://224.0.0.1/",
        ):
            for path, who in (
                ("/v1/teams/ads/alert-channels", admin),
                ("/v1/alert-channels", root),
            ):
                refused = api.post(path, json={"name": "evil", "url": url}, headers=who)
                assert refused.status_code == 422, (url, refused.text)
                assert refused.headers["content-type"] == "application/problem+json"
        assert store_fingerprint(store) == before
        with store.session() as s:
            assert alert_store.list_channels(s) == []

        slack = "https://hooks.slack.com/services/T0/B0/xoxb-secret"
        made = api.post(
            "/v1/teams/ads/alert-channels", json={"name": "slack", "url": slack}, headers=admin
        )
        assert made.status_code == 201, made.text
        assert made.json()["url"] == slack  # the team's admin
        shown = {
            who: api.get("/v1/teams/ads/alert-channels", headers=headers).json()[0]["url"]
            for who, headers in (("admin", admin), ("viewer", viewer), ("root", root))
        }
        assert shown == {
            "admin": slack,
            "root": slack,
            "viewer": "https://hooks.slack.com/…",
        }
        audit = api.get("/v1/audit", params={"action": "alert_channel.create"}, headers=root)
        assert "xoxb-secret" not in audit.text  # a webhook URL is a credential

    # an operator allows an internal receiver explicitly
    inside = Settings(data_dir=tmp_path / "d", node_id="a", alert_allowed_hosts="127.0.0.1")
    with TestClient(create_app(NodeContext(inside, store)), base_url="http://127.0.0.1") as api:
        ok = api.post(
            "/v1/teams/ads/alert-channels",
            json={"name": "local", "url": "http://127.0.0.1:9/hook"},
            headers=admin,
        )
        assert ok.status_code == 201, ok.text
