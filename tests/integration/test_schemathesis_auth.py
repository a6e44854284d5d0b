"""Schemathesis over the whole published API, with and without credentials: who may do what.

The node's app runs in process on a seeded SQLite store behind a witness (an ASGI wrapper that
sees every request). For each caller -- nobody, an operator of team ``ads``, a viewer of team
``web``, a read-only token of an operator of ``ads``, and a pipeline's fencing token (of a run
of job ``orders``) -- schemathesis generates requests for every operation. The run must show: no
5xx, no failed schemathesis check, every 401/403 an RFC 9457 problem document, every refused
request (401/403) leaving the store exactly as it was, and no 2xx that the authorization matrix
forbids (``FORBIDDEN``: a read-only token changes nothing; a fencing token opens its own job's
fence check only). At least ``MIN_REQUESTS`` requests in all.

(``test_schemathesis.py``, with an admin, covers the rest of the contract; this one is about
who may do what.)
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings

from api.app import create_app
from api.deps import NodeContext
from scheduler.config import Settings
from scheduler.core.records import JobSpec
from scheduler.decisions.identity import Scope
from scheduler.store import identities
from scheduler.store import jobs as jobs_store
from scheduler.store.bootstrap import ensure_defaults
from scheduler.store.db import Store
from tests.support.auth import CLIENT_HEADERS, auth_headers, member_token, store_fingerprint
from tests.support.runs import record_run

pytestmark = [pytest.mark.integration, pytest.mark.heavy]

MIN_REQUESTS = 1000
TRUSTED = "testserver,127.0.0.1,localhost"
#: generated examples per operation and caller (8: ~1,700 requests, MIN_REQUESTS with room to
#: spare). Only Hypothesis' generate phase: the explicit phase adds schemathesis' boundary cases
#: (~70 per operation, ~13,000 requests in all), which test_schemathesis.py's coverage phase runs
#: against the API once; who may do what does not depend on them
EXAMPLES = int(os.environ.get("DROVER_SCHEMATHESIS_AUTH_EXAMPLES", "8"))
#: seconds an in-process answer may take: not a latency bound (the suite runs this module at
#: nice 19 beside the e2e tests, where one request can wait seconds for a core)
ANSWER_TIMEOUT_S = 120.0


@dataclass
class Tally:
    requests: int = 0
    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)


class Witness:
    """Sees every request: counts it, checks refusals are problem documents that changed
    nothing (the store is fingerprinted before and after each refused request)."""

    def __init__(self, app: Any, store: Store | None, tally: Tally) -> None:
        self.app, self.store, self.tally = app, store, tally
        self.caller = "?"

    def fingerprint(self) -> Any:
        return None if self.store is None else store_fingerprint(self.store)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        before = self.fingerprint()
        answer: dict[str, Any] = {"body": b""}

        async def observe(message: Any) -> None:
            if message["type"] == "http.response.start":
                answer["status"] = message["status"]
                answer["headers"] = {
                    k.decode("latin-1"): v.decode("latin-1") for k, v in message["headers"]
                }
            elif message["type"] == "http.response.body":
                answer["body"] += message.get("body", b"")
            await send(message)

        await self.app(scope, receive, observe)
        status = answer["status"]
        self.tally.requests += 1
        self.tally.statuses[(self.caller, status)] += 1
        where = f"{self.caller}: {scope['method']} {scope['path']} -> {status}"
        if status >= 500:
            self.tally.problems.append(f"{where}: a server error {answer['body'][:200]!r}")
        forbids = FORBIDDEN.get(self.caller)
        if 200 <= status < 300 and forbids is not None and forbids(scope["method"], scope["path"]):
            self.tally.problems.append(f"{where}: a success the authorization matrix forbids")
        if status in (401, 403):
            if answer["headers"].get("content-type") != "application/problem+json":
                self.tally.problems.append(f"{where}: not a problem document")
            else:
                body = json.loads(answer["body"])
                if body.get("status") != status or not body.get("type"):
                    self.tally.problems.append(f"{where}: a malformed problem {body}")
            if self.fingerprint() != before:
                self.tally.problems.append(f"{where}: a refused request changed the store")


@dataclass
class World:
    witness: Witness
    tally: Tally
    #: caller -> its credential's headers
    tokens: dict[str, dict[str, str]]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp: Path = tmp_path_factory.mktemp("schemathesis-auth")
    node = Settings(
        data_dir=tmp / "data",
        node_id="st-auth",
        artifact_roots="/opt/pipelines/",
        trusted_hosts=TRUSTED,  # schemathesis' in-process client calls itself "testserver"
        auth_failure_limit=0,  # who may do what, not how often one may fail (test_api_edge.py)
    )
    store = Store(f"sqlite:///{tmp / 'drover.db'}")
    store.upgrade()
    ensure_defaults(store, node)
    with store.transaction() as s:
        for name, team in (("orders", "ads"), ("clicks", "web")):
            spec = JobSpec(name=name, entrypoint="/opt/pipelines/p.py", team=team)
            jobs_store.create_job(s, spec, cause="seed", node_id="seed")
    with store.transaction() as s:
        run = record_run(s, "orders")
    operator = member_token(store, "olga", "ads", "operator")
    with store.transaction() as s:
        reader, _ = identities.create_token(s, "olga", scopes=frozenset({Scope.READ}))
    tokens = {
        "operator-ads": auth_headers(operator),
        "viewer-web": auth_headers(member_token(store, "vic", "web", "viewer")),
        "read-only-ads": auth_headers(reader.secret),
        "fencing-token": {**CLIENT_HEADERS, "X-Drover-Fencing-Token": run.fencing_secret or ""},
    }
    # the witness schemathesis calls now serves the seeded app
    WITNESS.app, WITNESS.store = create_app(NodeContext(node, store)), store
    tally = WITNESS.tally
    yield World(WITNESS, tally, tokens)
    store.dispose()
    print(f"\nschemathesis with and without credentials: {tally.requests} requests")
    for (caller, status), count in sorted(tally.statuses.items()):
        print(f"  {caller:<14} {status}: {count}")


CALLERS = ("anonymous", "operator-ads", "viewer-web", "read-only-ads", "fencing-token")
PUBLIC = ("/healthz", "/readyz", "/metrics", "/openapi.json")

#: caller -> (method, path) -> whether a success there is one the authorization matrix forbids
FORBIDDEN: dict[str, Callable[[str, str], bool]] = {
    # a read-only token reads: any success of another method is a change it may not make
    "read-only-ads": lambda method, path: method not in ("GET", "HEAD"),
    # a fencing token opens its own job's fence check (and nothing needs one for the probes)
    "fencing-token": lambda method, path: (
        path not in PUBLIC and (method, path) != ("GET", "/v1/jobs/orders/fence")
    ),
}


#: what schemathesis calls: the schema comes from an unseeded app of the same code; the module
#: fixture then points the witness at the seeded one
WITNESS = Witness(
    create_app(NodeContext(Settings(node_id="schema", trusted_hosts=TRUSTED), Store("sqlite://"))),
    None,
    Tally(),
)
schema = schemathesis.openapi.from_asgi("/openapi.json", WITNESS)


@pytest.mark.parametrize("caller", CALLERS)
@schema.parametrize()
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    phases=[Phase.generate],
)
def test_api_with_and_without_credentials(case: Any, caller: str, world: World) -> None:
    world.witness.caller = caller
    headers = dict(CLIENT_HEADERS) if caller == "anonymous" else world.tokens[caller]
    response = case.call(headers={**(case.headers or {}), **headers}, timeout=ANSWER_TIMEOUT_S)
    assert response.status_code < 500, response.text
    if caller == "anonymous" and case.path not in ("/healthz", "/readyz", "/metrics"):
        assert response.status_code in (401, 415, 400), (case.path, response.status_code)


def test_the_run_was_big_enough_and_clean(world: World) -> None:
    """Runs last in this module: the totals of the parametrized run above."""
    assert world.tally.requests >= MIN_REQUESTS, world.tally.requests
    assert world.tally.problems == [], "\n".join(world.tally.problems[:20])
