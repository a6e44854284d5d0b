"""Idempotency keys on a real store (SQLite and MariaDB): retrying an
idempotent call with the same key never creates a second job, run or command; the same key with
another request is a 422; concurrent duplicates are safe; keys expire; a crashed holder's key is
taken over, and a request that lost its key cannot commit."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import NodeContext
from api.idempotency import idempotency_key
from scheduler.config import Settings
from scheduler.core.errors import StaleWrite
from scheduler.decisions.idempotency import Decision
from scheduler.store import idempotency as keys_store
from scheduler.store.db import Store
from scheduler.store.models import (
    AuditEntry,
    IdempotencyKey,
    Job,
    JobEvent,
    Operation,
    OperationItem,
    Run,
)
from tests.support.auth import auth_headers, member_token
from tests.support.fakes import add_unreachable_clusters

pytestmark = pytest.mark.integration

PIPELINE = "/opt/pipelines/p.py"
BODY = {"name": "orders", "entrypoint": PIPELINE, "team": "ads"}


@pytest.fixture
def app(store: Store, settings: Settings) -> Any:
    # the failover routes probe no real cluster: every source is unreachable
    return create_app(NodeContext(settings, store, reachable=lambda _cluster: False))


@pytest.fixture
def client(app: Any, admin_headers: dict[str, str]) -> Iterator[TestClient]:
    with TestClient(app, base_url="http://127.0.0.1", headers=admin_headers) as c:
        yield c


def key(k: str) -> dict[str, str]:
    return {"Idempotency-Key": k}


def count(store: Store, model: Any, *where: Any) -> int:
    with store.session() as session:
        return int(session.scalar(sa.select(sa.func.count()).select_from(model).where(*where)))


def generation(store: Store, name: str = "orders") -> int:
    with store.session() as session:
        return int(session.scalar(sa.select(Job.generation).where(Job.name == name)))


def test_a_retried_create_returns_the_first_answer_and_creates_nothing(
    client: TestClient, store: Store
) -> None:
    first = client.post("/v1/jobs", json=BODY, headers=key("create-1"))
    assert first.status_code == 201 and "idempotent-replayed" not in first.headers
    again = client.post("/v1/jobs", json=dict(reversed(BODY.items())), headers=key("create-1"))
    assert again.status_code == 201 and again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    for header in ("location", "etag", "content-type"):
        assert again.headers[header] == first.headers[header]
    assert count(store, Job) == 1
    assert count(store, AuditEntry, AuditEntry.action == "job.create") == 1
    # without a key a second create is the usual 409
    assert client.post("/v1/jobs", json=BODY).status_code == 409


def test_retried_commands_change_nothing_again(client: TestClient, store: Store) -> None:
    client.post("/v1/jobs", json=BODY)
    events = count(store, JobEvent)
    start = client.post("/v1/jobs/orders/start", headers=key("start-1"))
    assert start.status_code == 202
    for _ in range(3):
        replay = client.post("/v1/jobs/orders/start", headers=key("start-1"))
        assert replay.status_code == 202 and replay.json() == start.json()
    assert count(store, JobEvent) == events + 1

    before = generation(store)
    restart = client.post("/v1/jobs/orders/restart", headers=key("restart-1"))
    assert restart.status_code == 202
    assert client.post("/v1/jobs/orders/restart", headers=key("restart-1")).json() == (
        restart.json()
    )
    assert generation(store) == before + 1  # one new run asked for, not two
    # a new key is a new restart
    client.post("/v1/jobs/orders/restart", headers=key("restart-2"))
    assert generation(store) == before + 2

    stop = client.post("/v1/jobs/orders/stop", headers=key("stop-1"))
    replay = client.post("/v1/jobs/orders/stop", headers=key("stop-1"))
    assert stop.status_code == replay.status_code == 202 and replay.json() == stop.json()


def test_a_key_sent_with_another_request_is_a_422(client: TestClient, store: Store) -> None:
    client.post("/v1/jobs", json=BODY, headers=key("k"))
    for method, path, body, extra in [
        ("POST", "/v1/jobs", {**BODY, "args": ["x"]}, {}),  # another body
        ("POST", "/v1/jobs/orders/start", None, {}),  # another route
        ("POST", "/v1/jobs", BODY, {"If-Match": '"1"'}),  # another precondition
    ]:
        response = client.request(method, path, json=body, headers={**key("k"), **extra})
        assert response.status_code == 422, response.text
        problem = response.json()
        assert problem["type"] == "urn:drover:problem:idempotency-key-reused"
        assert response.headers["content-type"] == "application/problem+json"
    assert count(store, Job) == 1
    for bad in ("", "a b", "x" * 256):
        response = client.post("/v1/jobs", json=BODY, headers=key(bad))
        assert response.status_code == 422, (bad, response.text)


def test_keys_are_the_callers_own(app: Any, client: TestClient, store: Store) -> None:
    client.post("/v1/jobs", json=BODY, headers=key("shared"))
    other = auth_headers(member_token(store, "olga", "ads", "operator"))
    with TestClient(app, base_url="http://127.0.0.1", headers=other) as olga:
        response = olga.post("/v1/jobs/orders/start", headers=key("shared"))
    assert response.status_code == 202 and "idempotent-replayed" not in response.headers


def test_a_failed_request_keeps_no_key(client: TestClient, store: Store) -> None:
    client.post("/v1/jobs", json=BODY)
    refused = client.post("/v1/jobs", json=BODY, headers=key("after-fix"))
    assert refused.status_code == 409
    assert count(store, IdempotencyKey) == 0
    client.post("/v1/jobs/orders/stop")
    assert client.delete("/v1/jobs/orders").status_code == 204
    created = client.post("/v1/jobs", json=BODY, headers=key("after-fix"))
    assert created.status_code == 201 and "idempotent-replayed" not in created.headers


def test_concurrent_duplicates_run_once(app: Any, store: Store, admin_headers: dict[str, str]):
    async def burst(path: str, body: Any, k: str, n: int) -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=admin_headers
        ) as ac:
            return await asyncio.gather(
                *(ac.post(path, json=body, headers=key(k)) for _ in range(n))
            )

    answers = asyncio.run(burst("/v1/jobs", BODY, "burst-create", 8))
    assert {a.status_code for a in answers} == {201}, [a.text for a in answers]
    assert len({a.text for a in answers}) == 1
    assert sum("idempotent-replayed" not in a.headers for a in answers) == 1
    assert count(store, Job) == 1

    assert asyncio.run(burst("/v1/jobs/orders/start", None, "burst-start", 1))[0].status_code == 202
    before = generation(store)
    answers = asyncio.run(burst("/v1/jobs/orders/restart", None, "burst-restart", 8))
    assert {a.status_code for a in answers} == {202}, [a.text for a in answers]
    assert generation(store) == before + 1


def test_keys_expire(client: TestClient, store: Store) -> None:
    client.post("/v1/jobs", json={**BODY, "desired_state": "RUNNING"})
    before = generation(store)
    client.post("/v1/jobs/orders/restart", headers=key("old"))
    with store.transaction() as session:
        session.execute(
            sa.update(IdempotencyKey).values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
        )
    again = client.post("/v1/jobs/orders/restart", headers=key("old"))
    assert again.status_code == 202 and "idempotent-replayed" not in again.headers
    assert generation(store) == before + 2
    with store.transaction() as session:
        session.execute(
            sa.update(IdempotencyKey).values(expires_at=datetime.now(UTC) - timedelta(seconds=1))
        )
        assert keys_store.purge_expired(session, datetime.now(UTC)) == 1
    assert count(store, IdempotencyKey) == 0


def _reserve(store: Store, k: str, now: datetime, lease_s: float = 60) -> keys_store.Outcome:
    with store.transaction() as session:
        return keys_store.reserve(
            session,
            subject="root",
            key=k,
            fingerprint="f",
            operation="POST /x",
            now=now,
            ttl_s=3600,
            lease_s=lease_s,
        )


def test_a_dead_holder_is_taken_over_and_cannot_commit_after(store: Store) -> None:
    now = datetime.now(UTC)
    first = _reserve(store, "dead", now, lease_s=1)
    assert first.decision is Decision.RESERVE and first.reservation is not None
    assert _reserve(store, "dead", now).decision is Decision.WAIT
    later = now + timedelta(seconds=2)
    second = _reserve(store, "dead", later)
    assert second.decision is Decision.TAKE_OVER and second.reservation is not None
    with pytest.raises(StaleWrite), store.transaction() as session:  # the old holder woke up
        keys_store.mark_applied(session, first.reservation)
    with store.transaction() as session:
        keys_store.mark_applied(session, second.reservation)
    # applied, the holder died before recording its answer: never done again
    assert _reserve(store, "dead", later + timedelta(seconds=120)).decision is (
        Decision.LOST_ANSWER
    )


def test_a_lost_answer_is_a_409_not_a_second_change(client: TestClient, store: Store) -> None:
    client.post("/v1/jobs", json={**BODY, "desired_state": "RUNNING"})
    before = generation(store)
    client.post("/v1/jobs/orders/restart", headers=key("lost"))
    with store.transaction() as session:  # as if the node died after the commit
        session.execute(
            sa.update(IdempotencyKey).values(
                state="applied",
                status_code=None,
                response_body=None,
                locked_until=datetime.now(UTC) - timedelta(seconds=1),
            )
        )
    response = client.post("/v1/jobs/orders/restart", headers=key("lost"))
    assert response.status_code == 409, response.text
    assert response.json()["type"] == "urn:drover:problem:idempotency-key-in-use"
    assert generation(store) == before + 1


# -- every idempotent route (found by walking the app) ---------------------------------------------

#: POST routes that must honour Idempotency-Key: creations, commands, operations
MUST_BE_IDEMPOTENT = re.compile(
    r"^/v1/(jobs|failovers|bulk[^/]*|operations)$"  # create a job, a failover, a bulk operation
    r"|^/v1/jobs/\{name\}/(start|stop|restart|upgrade|rollback)$"
)
#: PATCH routes that must honour it: a spec change to a running job is an upgrade
MUST_BE_IDEMPOTENT_PATCH = re.compile(r"^/v1/jobs/\{name\}$")


def _post_routes(routes: Any) -> Iterator[APIRoute]:
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _post_routes(included.routes)
        elif isinstance(route, APIRoute):
            yield route


def idempotent_routes(app: Any) -> set[tuple[str, str]]:
    """``(method, path)`` of every route that takes ``dependencies=[Idempotent]``."""
    return {
        (method, route.path)
        for route in _post_routes(app.routes)
        if any(d.dependency is idempotency_key for d in route.dependencies)
        for method in route.methods or ()
    }


@dataclass
class Call:
    method: str
    path: str
    body: Any = None

    def send(self, client: TestClient, k: str) -> httpx.Response:
        return client.request(self.method, self.path, json=self.body, headers=key(k))


@dataclass
class Case:
    """A route's first request, and another request for the same key (a 422)."""

    first: Call
    other: Call


def _job(client: TestClient, name: str, **extra: Any) -> None:
    response = client.post("/v1/jobs", json={**BODY, "name": name, **extra})
    assert response.status_code == 201, response.text


def _command_case(command: str) -> Callable[[TestClient, Store], Case]:
    def build(client: TestClient, store: Store) -> Case:
        _job(client, "orders", desired_state="RUNNING" if command != "start" else "STOPPED")
        _job(client, "clicks")
        return Case(
            Call("POST", f"/v1/jobs/orders/{command}"), Call("POST", f"/v1/jobs/clicks/{command}")
        )

    return build


def _update_case(client: TestClient, store: Store) -> Case:
    _job(client, "orders", desired_state="RUNNING")
    return Case(
        Call("PATCH", "/v1/jobs/orders", {"args": ["--window", "5m"]}),
        Call("PATCH", "/v1/jobs/orders", {"args": ["--window", "10m"]}),
    )


def _two_clusters(store: Store, tmp: str) -> None:
    with store.transaction() as s:
        root = f"file:///var/drover-test/{tmp}"
        add_unreachable_clusters(s, root, ["spark-a", "spark-b"], group="ads")


def _failover_case(client: TestClient, store: Store) -> Case:
    _two_clusters(store, uuid.uuid4().hex[:8])
    _job(client, "orders", group="ads", desired_state="RUNNING")
    body = {"source": "spark-a", "selector": {"all": True}, "reason": "zone outage"}
    return Case(
        Call("POST", "/v1/failovers", body),
        Call("POST", "/v1/failovers", {**body, "parallelism": 2}),
    )


def _cancel_case(client: TestClient, store: Store) -> Case:
    return _cancel_of(_failover_case(client, store), client)


def _bulk_case(client: TestClient, store: Store) -> Case:
    _job(client, "orders", desired_state="RUNNING")
    body = {"kind": "restart", "selector": {"jobs": ["orders"]}, "reason": "new certificates"}
    return Case(
        Call("POST", "/v1/operations", body),
        Call("POST", "/v1/operations", {**body, "kind": "stop"}),
    )


def _bulk_cancel_case(client: TestClient, store: Store) -> Case:
    return _cancel_of(_bulk_case(client, store), client)


def _cancel_of(case: Case, client: TestClient) -> Case:
    """The cancel of the operation ``case``'s first request creates, and of one that does not
    exist."""
    created = client.post(case.first.path, json=case.first.body)
    assert created.status_code == 201, created.text
    op = created.json()["id"]
    return Case(
        Call("POST", f"{case.first.path}/{op}/cancel"),
        Call("POST", f"{case.first.path}/999999/cancel"),
    )


def _rollback_case(client: TestClient, store: Store) -> Case:
    _job(client, "orders")
    for window in ("10m", "15m"):  # revisions 2 and 3
        changed = client.patch("/v1/jobs/orders", json={"args": ["--window", window]})
        assert changed.status_code == 200, changed.text
    return Case(
        Call("POST", "/v1/jobs/orders/rollback", {"revision": 1}),
        Call("POST", "/v1/jobs/orders/rollback", {"revision": 2}),
    )


#: how to call each idempotent route: a route with Idempotent but no case here fails
#: test_every_idempotent_route_has_a_case (add its case when adding the route)
CASES: dict[tuple[str, str], Callable[[TestClient, Store], Case]] = {
    ("POST", "/v1/jobs"): lambda client, store: Case(
        Call("POST", "/v1/jobs", BODY), Call("POST", "/v1/jobs", {**BODY, "priority": "high"})
    ),
    ("PATCH", "/v1/jobs/{name}"): _update_case,
    ("POST", "/v1/jobs/{name}/start"): _command_case("start"),
    ("POST", "/v1/jobs/{name}/stop"): _command_case("stop"),
    ("POST", "/v1/jobs/{name}/restart"): _command_case("restart"),
    ("POST", "/v1/failovers"): _failover_case,
    ("POST", "/v1/failovers/{operation_id}/cancel"): _cancel_case,
    ("POST", "/v1/jobs/{name}/rollback"): _rollback_case,
    ("POST", "/v1/operations"): _bulk_case,
    ("POST", "/v1/operations/{operation_id}/cancel"): _bulk_cancel_case,
}


def everything(store: Store) -> dict[str, Any]:
    """What a second request must not change: rows of the tables a write creates (jobs, runs,
    operations and their items, events, audit) and every job's generation and version."""
    with store.session() as session:
        counts = {
            model.__tablename__: int(
                session.scalar(sa.select(sa.func.count()).select_from(model)) or 0
            )
            for model in (Job, Run, Operation, OperationItem, JobEvent, AuditEntry)
        }
        jobs = sorted(
            session.execute(sa.select(Job.name, Job.generation, Job.version, Job.desired_state))
        )
    return {"counts": counts, "jobs": [tuple(j) for j in jobs]}


def test_every_idempotent_route_has_a_case(app: Any) -> None:
    found = idempotent_routes(app)
    assert found - set(CASES) == set(), "idempotent routes without a case in CASES"
    assert set(CASES) - found == set(), "cases of routes that no longer honour Idempotency-Key"
    must = {
        ("POST", route.path)
        for route in _post_routes(app.routes)
        if "POST" in (route.methods or ()) and MUST_BE_IDEMPOTENT.match(route.path)
    } | {
        ("PATCH", route.path)
        for route in _post_routes(app.routes)
        if "PATCH" in (route.methods or ()) and MUST_BE_IDEMPOTENT_PATCH.match(route.path)
    }
    assert must - found == set(), "creations and commands must take dependencies=[Idempotent]"


@pytest.mark.parametrize("route", sorted(CASES), ids=lambda r: f"{r[0]} {r[1]}")
def test_each_idempotent_route_retried_changes_nothing(
    route: tuple[str, str],
    client: TestClient,
    store: Store,
) -> None:
    case = CASES[route](client, store)
    k = f"acceptance-3-{uuid.uuid4()}"
    first = case.first.send(client, k)
    assert 200 <= first.status_code < 300, first.text
    assert "idempotent-replayed" not in first.headers
    after_first = everything(store)
    for _ in range(2):
        again = case.first.send(client, k)
        assert again.status_code == first.status_code, again.text
        assert again.headers["idempotent-replayed"] == "true"
        assert again.content == first.content
        assert everything(store) == after_first  # no second job, run, operation or event
    reused = case.other.send(client, k)
    assert reused.status_code == 422, reused.text
    assert reused.json()["type"] == "urn:drover:problem:idempotency-key-reused"
    assert reused.headers["content-type"] == "application/problem+json"
    assert everything(store) == after_first
