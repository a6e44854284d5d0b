"""Creations in batches (``api/creations.py``) on SQLite and MariaDB: each creation of a batch
gets the answer it would get alone, refused ones leave the others alone, what is written is
what a creation alone writes, and a batch whose writes fail runs again one by one."""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import settings as examples
from hypothesis import strategies as st
from sqlalchemy import func, select

from api.app import create_app
from api.creations import Creation, Creations
from api.deps import NodeContext
from api.schemas.resources import JobPublic
from scheduler.config import Settings
from scheduler.core.errors import AlreadyExists, InvalidInput, RefusedSubmission
from scheduler.core.records import JobSpec
from scheduler.decisions.identity import Principal, Role
from scheduler.store import jobs as jobs_store
from scheduler.store.db import Store
from scheduler.store.models import AuditEntry, Job, JobEvent, JobLabel, JobRevision

pytestmark = pytest.mark.integration

#: a fresh prefix per example of the equivalence test (the store is the test's, not the example's)
_EXAMPLES = itertools.count()

ADMIN = Principal(subject="user:root", roles={"*": Role.ADMIN})
OPERATOR = Principal(subject="user:op", roles={"ads": Role.OPERATOR})


def _creation(name: str, principal: Principal = ADMIN, **spec: Any) -> Creation:
    fields: dict[str, Any] = {"entrypoint": "/opt/pipelines/p.py", "team": "ads", **spec}
    return Creation(JobSpec(name=name, **fields), principal, principal.subject, {"name": name})


def _counts(store: Store) -> dict[str, int]:
    with store.session() as session:
        return {
            model.__tablename__: int(session.scalar(select(func.count()).select_from(model)) or 0)
            for model in (Job, JobLabel, JobRevision, JobEvent, AuditEntry)
        }


def _exists(store: Store, name: str) -> None:
    """A job named ``name``, created before the test's creations."""
    with store.transaction() as session:
        jobs_store.create_job(
            session,
            JobSpec(name=name, entrypoint="/opt/pipelines/p.py", team="ads"),
            cause="before",
            node_id="n",
        )


def _added_since(before: dict[str, int], store: Store) -> dict[str, int]:
    after = _counts(store)
    return {table: after[table] - before[table] for table in after}


def test_a_batch_answers_each_creation_as_alone(store: Store, settings: Settings) -> None:
    _exists(store, "old")
    before = _counts(store)
    batch = [
        _creation("a", labels={"tier": "gold", "env": "prod"}),
        _creation("a"),  # taken by the one before it in the batch
        _creation("old"),  # taken before the batch
        _creation("b", group="nowhere"),
        _creation("c", entrypoint="/etc/evil.py"),
        _creation("d", OPERATOR, conf={"spark.driver.extraJavaOptions": "-Dx"}),
        _creation("e", args=("--x", "1"), conf={"spark.executor.cores": "2"}),
        _creation("f", labels={"bad key!": "x"}),
    ]
    outcomes = Creations(store, settings).run_batch(batch)
    kinds = [type(o) for o in outcomes]
    assert kinds == [
        JobPublic,
        AlreadyExists,
        AlreadyExists,
        InvalidInput,
        RefusedSubmission,
        RefusedSubmission,
        JobPublic,
        InvalidInput,
    ]
    assert "outside the artifact roots" in str(outcomes[4])
    assert "extraJavaOptions" in str(outcomes[5])
    # what was written is what a creation alone writes: the record read back, its labels,
    # one revision and one event each, and an audit row each
    with store.session() as session:
        for made in (outcomes[0], outcomes[6]):
            assert isinstance(made, JobPublic)
            assert JobPublic.of(jobs_store.get_job(session, made.name)) == made
    assert _added_since(before, store) == {
        "jobs": 2,
        "job_labels": 2,
        "job_revisions": 2,
        "job_events": 2,
        "audit_log": 2,
    }


@pytest.mark.parametrize("returning", [True, False], ids=["insert-returning", "ids-read-back"])
def test_a_batch_knows_the_ids_of_its_jobs(
    store: Store, settings: Settings, monkeypatch: pytest.MonkeyPatch, returning: bool
) -> None:
    """The jobs of a batch get their ids from the insert where the store returns them
    (MariaDB, SQLite), read back by name where it cannot (MySQL proper): either way each job's
    labels, revision and event carry its own id."""
    if not returning:
        monkeypatch.setattr(store.engine.dialect, "insert_executemany_returning", False)
    names = [f"ids-{returning}-{i}" for i in range(4)]
    outcomes = Creations(store, settings).run_batch(
        [_creation(name, labels={"n": name}) for name in names]
    )
    assert all(isinstance(o, JobPublic) for o in outcomes)
    with store.session() as session:
        ids = dict(session.execute(select(Job.name, Job.id).where(Job.name.in_(names))).all())
        assert sorted(ids) == sorted(names)
        for table in (JobLabel, JobRevision, JobEvent):
            of_job = dict(
                session.execute(
                    select(table.job_id, func.count())
                    .where(table.job_id.in_(ids.values()))
                    .group_by(table.job_id)
                ).all()
            )
            assert of_job == dict.fromkeys(ids.values(), 1), table.__tablename__
        labelled = dict(
            session.execute(
                select(JobLabel.job_id, JobLabel.value).where(JobLabel.job_id.in_(ids.values()))
            ).all()
        )
    assert labelled == {job_id: name for name, job_id in ids.items()}


def test_a_batch_whose_writes_fail_runs_again_one_by_one(
    store: Store, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another node creates one of the names between the batch's checks and its writes: the
    batch's insert fails (an IntegrityError), nothing of it stays, and run again one by one the
    others are created and that one is told its name is taken."""
    _exists(store, "raced")  # another node's
    real = jobs_store.creation_facts

    def blind(session: Any, specs: Any) -> jobs_store.CreationFacts:
        facts = real(session, specs)
        facts.taken.discard("raced")  # read before the other node's commit
        return facts

    monkeypatch.setattr(jobs_store, "creation_facts", blind)
    before = _counts(store)
    outcomes = Creations(store, settings).run_batch(
        [_creation("x1"), _creation("raced"), _creation("x2")]
    )
    assert [type(o) for o in outcomes] == [JobPublic, AlreadyExists, JobPublic]
    assert _added_since(before, store) == {
        "jobs": 2,
        "job_labels": 0,
        "job_revisions": 2,
        "job_events": 2,
        "audit_log": 2,
    }


def test_concurrent_creations_through_the_api(
    store: Store, settings: Settings, admin_headers: dict[str, str]
) -> None:
    """Requests at once, some for the same names: each name is created once (201), every other
    request for it is a 409, and each created job has its one audit row."""
    names = [f"burst-{i % 10}" for i in range(30)]
    statuses: list[tuple[str, int]] = []
    lock = threading.Lock()
    start = threading.Barrier(len(names))
    app = create_app(NodeContext(settings, store))
    with TestClient(app, base_url="http://127.0.0.1", headers=admin_headers) as client:

        def post(name: str) -> None:
            start.wait(timeout=30)
            answer = client.post(
                "/v1/jobs",
                json={"name": name, "entrypoint": "/opt/pipelines/p.py", "team": "ads"},
            )
            with lock:
                statuses.append((name, answer.status_code))

        threads = [threading.Thread(target=post, args=(n,)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
            assert not t.is_alive()
    per_name = Counter((name, status) for name, status in statuses)
    for name in set(names):
        assert per_name[(name, 201)] == 1
        assert per_name[(name, 409)] == names.count(name) - 1
    with store.session() as session:
        created = session.scalars(
            select(AuditEntry.target_name).where(AuditEntry.action == "job.create")
        ).all()
    assert sorted(created) == sorted(set(names))


def test_only_a_created_job_marks_its_request_key(store: Store, settings: Settings) -> None:
    """Each creation's commit hook (its ``Idempotency-Key``) runs in the transaction that
    commits it, and only if it is created; the hook of the thread that happens to run the
    batch runs for nothing but its own creation."""
    from scheduler.store.db import COMMIT_HOOK

    marked: list[str] = []
    leading: list[str] = []

    def mark(name: str) -> Callable[[Any], None]:
        return lambda session: marked.append(name)

    def creation(name: str, key: str) -> Creation:
        made = _creation(name)
        return Creation(made.spec, made.principal, made.actor, made.detail, mark(key))

    token = COMMIT_HOOK.set(lambda session: leading.append("leader"))
    try:
        outcomes = Creations(store, settings).run_batch(
            [creation("k1", "first"), creation("k1", "second"), creation("k2", "third")]
        )
    finally:
        COMMIT_HOOK.reset(token)
    assert [type(o) for o in outcomes] == [JobPublic, AlreadyExists, JobPublic]
    assert marked == ["first", "third"] and leading == []


#: what a creation in the equivalence test may vary: (name, group, entrypoint, conf, who asks)
_VARIANTS = st.tuples(
    st.sampled_from(["a", "b", "c", "old"]),
    st.sampled_from(["default", "nowhere"]),
    st.sampled_from(["/opt/pipelines/p.py", "/etc/evil.py"]),
    st.sampled_from([{}, {"spark.executor.cores": "2"}, {"spark.driver.extraJavaOptions": "-D"}]),
    st.sampled_from([ADMIN, OPERATOR]),
)


@examples(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(variants=st.lists(_VARIANTS, min_size=1, max_size=8))
def test_a_batch_answers_what_the_creations_one_by_one_answer(
    store: Store, settings: Settings, variants: list[tuple[Any, ...]]
) -> None:
    """The same creations, once as one batch and once one by one (each a batch of one), under
    two prefixes of the same store: the same outcomes, in the same order."""
    run = next(_EXAMPLES)
    creations = Creations(store, settings)

    def answers(prefix: str, batched: bool) -> list[tuple[str, str]]:
        _exists(store, f"{prefix}-old")  # a name taken before
        batch = [
            _creation(f"{prefix}-{name}", who, group=group, entrypoint=entrypoint, conf=conf)
            for name, group, entrypoint, conf, who in variants
        ]
        outcomes = (
            creations.run_batch(batch)
            if batched
            else [creations.run_batch([creation])[0] for creation in batch]
        )
        return [
            (type(o).__name__, str(o).replace(prefix, "*") if not isinstance(o, JobPublic) else "")
            for o in outcomes
        ]

    assert answers(f"b{run}", batched=True) == answers(f"s{run}", batched=False)
