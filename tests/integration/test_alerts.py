"""Alerts through the store (SQLite and MariaDB): de-duplication, folding into the cluster's
alert, routing per team, the outbox's retries with backoff, order and claims (two nodes never
send one message at once)."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
import pytest

from scheduler.actors.alerts import AlertLoop
from scheduler.core.clock import utcnow
from scheduler.decisions.alerts import AlertKind, ChannelKind, ChannelRecord, Signal, key_of
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

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append((str(request.url), json.loads(request.content)))
        return httpx.Response(self.statuses.pop(0) if self.statuses else 204)


def loop(store: Store, receiver: Receiver, clock: Clock, node: str = "n1") -> AlertLoop:
    return AlertLoop(
        store, node_id=node, interval=1, clock=clock, transport=httpx.MockTransport(receiver)
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
