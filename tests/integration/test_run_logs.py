"""``GET /v1/jobs/{name}/runs/{attempt}/log`` on a real store, the run's cluster a fake backend
(``tests/support/fakes.py``; the backends' own reading is the contract suite's,
``tests/unit/test_backend_contract.py``): the tail, a range, following from ``next_offset``,
characters never cut, streams, who may read, and every way there is no log."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from api.deps import NodeContext
from scheduler.config import Settings
from scheduler.core.backend import SubmitRequest, app_name_for
from scheduler.core.clock import utcnow
from scheduler.core.records import JobSpec
from scheduler.core.states import RunState
from scheduler.store import jobs as jobs_store
from scheduler.store import ledger
from scheduler.store.db import Store
from tests.support.auth import admin_token, auth_headers, member_token
from tests.support.fakes import FakeBackend, FakeBackends

pytestmark = pytest.mark.integration

JOB = "orders"
LOG = f"/v1/jobs/{JOB}/runs/1/log"


@pytest.fixture
def cluster() -> FakeBackend:
    return FakeBackend(start_running=True)


@pytest.fixture
def api(store: Store, settings: Settings, cluster: FakeBackend) -> Iterator[TestClient]:
    context = NodeContext(settings, store, backends=FakeBackends(local=cluster))
    with TestClient(create_app(context), base_url="http://127.0.0.1") as client:
        client.headers.update(auth_headers(admin_token(store)))
        yield client


def add_run(store: Store, submission_id: str | None, node: str = "test-node") -> None:
    """A run of the job on the default (local) cluster, started by ``node``."""
    with store.transaction() as s:
        if not jobs_store.list_jobs(s, limit=1, offset=0)[0]:
            spec = JobSpec(name=JOB, entrypoint="/opt/pipelines/p.py", team="ads")
            jobs_store.create_job(s, spec, cause="test", node_id="n")
        job = jobs_store.get_job(s, JOB)
        run = ledger.create_run(
            s,
            job,
            cluster="local",
            node_id=node,
            owner_epoch=0,
            checkpoint_location="",
            app_name_for=app_name_for,
        )
        if submission_id is not None:
            ledger.update_run(s, run, state=RunState.RUNNING, submission_id=submission_id)


def submitted(cluster: FakeBackend) -> str:
    request = SubmitRequest(job_name=JOB, run_id=1, fencing_token="t", entrypoint="/p.py")
    return cluster.submit(request).submission_id


def test_the_tail_then_follow_from_next_offset(
    api: TestClient, store: Store, cluster: FakeBackend
) -> None:
    sid = submitted(cluster)
    add_run(store, sid)
    first = api.get(LOG)
    assert first.status_code == 200, first.text
    doc = first.json()
    assert doc["stream"] == "stdout" and doc["streams"] == ["stdout", "stderr"]
    assert doc["text"] == f"driver of drover:{JOB}:1 started as app-1\n"
    assert doc["offset"] == 0 and doc["next_offset"] == doc["size"] == len(doc["text"])
    assert doc["at_end"] and not doc["run_ended"]
    assert (doc["job"], doc["attempt"], doc["cluster"]) == (JOB, 1, "local")
    cluster.write_log(sid, "batch 1 committed: 1733 rows, Zürich\n")
    more = api.get(LOG, params={"offset": doc["next_offset"]}).json()
    assert more["text"] == "batch 1 committed: 1733 rows, Zürich\n"
    assert more["offset"] == doc["next_offset"] and more["at_end"]
    nothing = api.get(LOG, params={"offset": more["next_offset"]}).json()
    assert nothing["text"] == "" and nothing["next_offset"] == more["next_offset"]
    tail = api.get(LOG, params={"limit": 10}).json()
    assert tail["text"] == ", Zürich\n"  # the last 10 bytes
    assert tail["next_offset"] == tail["size"]
    assert api.get(LOG, params={"stream": "stderr"}).json()["text"] == ""


def test_a_character_is_never_cut_by_a_range(
    api: TestClient, store: Store, cluster: FakeBackend
) -> None:
    sid = submitted(cluster)
    add_run(store, sid)
    start = api.get(LOG).json()["next_offset"]
    cluster.write_log(sid, "ü€😀\n")  # 2, 3 and 4 bytes
    text, offset = "", start
    while True:  # one byte at a time: each read ends before a character it would cut
        piece = api.get(LOG, params={"offset": offset, "limit": 1}).json()
        if piece["at_end"] and not piece["text"]:
            break
        if piece["next_offset"] == offset:  # a character longer than the limit: ask for more
            piece = api.get(LOG, params={"offset": offset, "limit": 4}).json()
        text, offset = text + piece["text"], piece["next_offset"]
    assert text == "ü€😀\n"
    tail = api.get(LOG, params={"limit": 4}).json()  # starts inside the 4-byte character
    assert tail["text"] == "\n" and tail["offset"] == tail["size"] - 1


def test_who_may_read_a_runs_log(api: TestClient, store: Store, cluster: FakeBackend) -> None:
    add_run(store, submitted(cluster))
    viewer = member_token(store, "vera", "ads", "viewer")
    stranger = member_token(store, "sam", "web", "admin")
    assert api.get(LOG, headers=auth_headers(viewer)).status_code == 200
    assert api.get(LOG, headers=auth_headers(stranger)).status_code == 403
    anonymous = api.get(LOG, headers={"Authorization": ""})
    assert anonymous.status_code == 401
    internal = api.get(f"/v1/internal/jobs/{JOB}/runs/1/log")
    assert internal.status_code == 403  # nodes only


def test_no_log_is_a_404_or_a_502(api: TestClient, store: Store, cluster: FakeBackend) -> None:
    assert api.get(LOG).status_code == 404  # no job
    add_run(store, None)  # recorded, never submitted
    never = api.get(LOG)
    assert never.status_code == 404 and "never submitted" in never.json()["detail"]
    assert api.get(f"/v1/jobs/{JOB}/runs/2/log").status_code == 404  # no such attempt
    add_run(store, "driver-999")  # run 2: the cluster does not know it (any more)
    assert api.get(f"/v1/jobs/{JOB}/runs/2/log").status_code == 404
    add_run(store, submitted(cluster), node="node-b")  # run 3: a local run of another node
    elsewhere = api.get(f"/v1/jobs/{JOB}/runs/3/log")
    assert elsewhere.status_code == 404 and "node-b" in elsewhere.json()["detail"]
    bad = api.get(LOG.replace("/1/", "/3/"), params={"stream": "nonsense"})
    assert bad.status_code == 422
    add_run(store, "driver-1")  # run 4, on the fake's first driver
    cluster.unreachable = True
    down = api.get(f"/v1/jobs/{JOB}/runs/4/log")
    assert down.status_code == 502 and down.json()["type"].endswith("cluster-unreachable")


def test_an_ended_runs_log_says_so(api: TestClient, store: Store, cluster: FakeBackend) -> None:
    sid = submitted(cluster)
    add_run(store, sid)
    with store.transaction() as s:
        run = jobs_store.get_run(s, JOB, 1)
        ledger.update_run(s, run, state=RunState.FINISHED, ended_at=utcnow())
    doc = api.get(LOG).json()
    assert doc["run_ended"] and doc["at_end"]
