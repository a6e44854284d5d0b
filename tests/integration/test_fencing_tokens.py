"""Fencing tokens are stored hashed, like API tokens: the store keeps their SHA-256, the driver
gets the token itself once, in its submission. A node that takes over a run whose submission
was never recorded cannot know the token of a submission that may have been sent: it gives the
run a fresh one (a fenced write) before it submits it, so a driver of the lost submission, if
there is one, is superseded. Real store (SQLite and MariaDB), the real API's fence check, the
reconciler with in-memory clusters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from api.app import create_app
from api.deps import NodeContext
from scheduler.config import Settings
from scheduler.core.backend import SubmitRequest, app_name_for
from scheduler.core.ownership import Claim, Fence
from scheduler.core.records import JobSpec
from scheduler.core.states import DesiredState
from scheduler.decisions.planning import RestartPolicy
from scheduler.loops.reconciler import Reconciler
from scheduler.store import jobs as jobs_store
from scheduler.store.db import Store
from scheduler.store.ledger import SqlLedger
from scheduler.store.models import Job, Run
from tests.support.fakes import FakeBackend, FakeBackends
from tests.support.schema import seed_jobs

pytestmark = pytest.mark.integration


def node(
    store: Store, node_id: str, epoch: int, backend: FakeBackend, *, in_doubt_grace: float = 60.0
) -> Reconciler:
    return Reconciler(
        SqlLedger(store, node_id=node_id, app_name_for=app_name_for),
        FakeBackends(local=backend),
        node_id=node_id,
        group="default",
        claim=lambda: Claim("default", Fence(node_id, epoch), 0, 1),
        policy=RestartPolicy(backoff_initial=0.0, in_doubt_grace=in_doubt_grace),
    )


def stored_tokens(store: Store) -> list[str]:
    with store.session() as session:
        return list(session.scalars(select(Run.fencing_token)))


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@pytest.fixture
def api(store: Store, settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(NodeContext(settings, store)), base_url="http://127.0.0.1") as c:
        yield c


def fence(api: TestClient, token: str) -> dict[str, object]:
    answer = api.get("/v1/jobs/orders/fence", headers={"X-Drover-Fencing-Token": token})
    assert answer.status_code in (200, 401), answer.text
    return dict(answer.json()) if answer.status_code == 200 else {"current": False}


def test_the_store_keeps_digests_and_a_takeover_reissues_the_token(
    store: Store, api: TestClient
) -> None:
    with store.transaction() as session:
        spec = JobSpec(name="orders", entrypoint="/p.py", desired_state=DesiredState.RUNNING)
        jobs_store.create_job(session, spec, cause="test", node_id="test")
    sent: list[SubmitRequest] = []

    # node a records the intent, then its submission's outcome is unknown (it may have left)
    lost = FakeBackend(on_submit=sent.append)
    lost.unreachable = True
    node(store, "a", 1, lost).tick()
    assert sent == []  # refused before the on_submit hook: nothing reached the cluster
    [first] = stored_tokens(store)
    assert len(first) == 64  # a SHA-256, never a token a driver holds

    # node b takes the group over: nothing of the run on the cluster, but the submission is in
    # doubt (the cluster may still create its driver): b only looks it up
    cluster = FakeBackend(on_submit=sent.append)
    node(store, "b", 2, cluster).tick()
    assert sent == []
    with store.session() as session:
        reason = session.scalar(select(Job.state_reason).where(Job.name == "orders"))
    assert reason is not None and "is in doubt until" in reason, reason
    # once the doubt is over (no grace here), b submits that run, with a token of its own (it
    # cannot know the first one: the store has only its digest)
    node(store, "b", 2, cluster, in_doubt_grace=0.0).tick()
    [request] = sent
    token = request.fencing_token
    assert token and len(token) == 32
    assert stored_tokens(store) == [digest(token)] != [first]
    answer = fence(api, token)
    assert answer["current"] is True and answer["fencing_token"] == token
    assert fence(api, first)["current"] is not True  # a driver of a lost submission: superseded


def test_new_runs_carry_their_token_once(store: Store, api: TestClient) -> None:
    with store.transaction() as session:
        spec = JobSpec(name="orders", entrypoint="/p.py", desired_state=DesiredState.RUNNING)
        jobs_store.create_job(session, spec, cause="test", node_id="test")
    sent: list[SubmitRequest] = []
    node(store, "a", 1, FakeBackend(on_submit=sent.append)).tick()
    [request] = sent
    assert stored_tokens(store) == [digest(request.fencing_token)]
    assert fence(api, request.fencing_token)["current"] is True
    assert (
        fence(api, digest(request.fencing_token))["current"] is not True
    )  # the digest opens nothing


def test_the_migration_hashes_the_tokens_of_existing_runs(empty_store: Store) -> None:
    from sqlalchemy import text

    empty_store.upgrade("0019")
    seed_jobs(empty_store, {"orders": ""})
    with empty_store.engine.begin() as conn:
        for attempt, token in ((1, "a" * 32), (2, "b" * 32)):
            conn.execute(
                text(
                    "INSERT INTO runs (job_id, attempt, generation, cluster_name, node_id, "
                    "owner_epoch, fencing_token, app_name, checkpoint_location, state, reason, "
                    "counts_as_failure, created_at) VALUES ((SELECT id FROM jobs), :attempt, 0, "
                    "'c', 'n', 0, :token, '', '', 'RUNNING', '', 0, '2024-01-01 00:00:00')"
                ),
                {"attempt": attempt, "token": token},
            )
    empty_store.upgrade()
    assert sorted(stored_tokens(empty_store)) == sorted([digest("a" * 32), digest("b" * 32)])
    empty_store.downgrade("0019")
    empty_store.upgrade()  # digests are left as they are: hashed once, never twice
    assert sorted(stored_tokens(empty_store)) == sorted([digest("a" * 32), digest("b" * 32)])
