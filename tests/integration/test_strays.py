"""The stray sweep (scheduler/loops/strays.py) against a real store (SQLite and MariaDB) and the
YARN backend on a simulated ResourceManager: a live application of a closed run -- as a
ResourceManager that recovered it brings it back -- is killed and recorded on its job; the live
application of an open run, and another deployment's application with the same job name and run
id, are left alone."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.simyarn import SimResourceManager, fake_spark_submit
from scheduler.backends.yarn import YarnBackend, yarn_tags
from scheduler.core.ledger import fencing_digest
from scheduler.core.records import ClusterRecord, JobSpec
from scheduler.decisions.catalog import ClusterSpec
from scheduler.loops.strays import StraySweep
from scheduler.store import catalog as catalog_store
from scheduler.store import jobs as jobs_store
from scheduler.store.db import Store
from scheduler.store.models import Job, JobEvent, Run, utcnow
from tests.conftest import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def rm() -> Iterator[SimResourceManager]:
    sim = SimResourceManager(app_start_delay=0).start()
    yield sim
    sim.stop()


def _run(store: Store, job: str, state: str, cluster: str) -> tuple[int, str]:
    """A run of ``job`` in ``state`` (what the reconciler would have recorded)."""
    token = secrets.token_hex(16)
    with store.transaction() as session:
        row = session.query(Job).filter_by(name=job).one()
        run = Run(
            job_id=row.id,
            attempt=1,
            cluster_name=cluster,
            node_id="test-node",
            fencing_token=fencing_digest(token),  # the store keeps the token's digest
            app_name="",
            state=state,
            created_at=utcnow(),
        )
        session.add(run)
        session.flush()
        run.app_name = f"drover:{job}:{run.id}"
        return run.id, token


def _yarn_cluster(
    store: Store, rm: SimResourceManager, tmp_path: Path, *jobs: str
) -> ClusterRecord:
    """Cluster ``yarn-a`` on the simulated ResourceManager, group ``gy`` with ``jobs``."""
    with store.transaction() as session:
        cluster = catalog_store.create_cluster(
            session,
            "yarn-a",
            ClusterSpec(
                kind="yarn",
                storage_root="hdfs://127.0.0.1:9105/drover/a",
                rest_url=rm.url,
                hadoop_conf_dir=str(rm.write_conf(tmp_path / "conf")),
            ),
        )
        catalog_store.create_group(session, "gy", primary_cluster="yarn-a")
        for name in jobs:
            jobs_store.create_job(
                session,
                JobSpec(name=name, entrypoint="/opt/pipelines/p.py", group="gy"),
                cause="test",
                node_id="test-node",
            )
    return cluster


def test_a_live_application_of_a_closed_run_is_killed_and_recorded(
    store: Store, rm: SimResourceManager, tmp_path: Path
) -> None:
    cluster = _yarn_cluster(store, rm, tmp_path, "orders", "ads")
    killed_run, killed_token = _run(store, "orders", "KILLED", "yarn-a")
    live_run, live_token = _run(store, "ads", "RUNNING", "yarn-a")
    stray = rm.submit(
        f"drover:orders:{killed_run}", yarn_tags("orders", killed_run, killed_token), ""
    )
    current = rm.submit(f"drover:ads:{live_run}", yarn_tags("ads", live_run, live_token), "")
    # another deployment's run with the same job name and run id: its token is not ours
    foreign = rm.submit(
        f"drover:orders:{killed_run}", yarn_tags("orders", killed_run, "their-token"), ""
    )

    backend = YarnBackend(rm.url, tmp_path / "conf", spark_home=fake_spark_submit(tmp_path / "s"))
    sweep = StraySweep(store, lambda c: backend, node_id="test-node")
    assert sweep.sweeps(cluster)
    found = sweep.sweep(cluster)
    assert [s.app_id for s in found] == [stray]
    states = {a["id"]: a["state"] for a in rm.apps(None, None)}
    assert states == {stray: "KILLED", current: "RUNNING", foreign: "RUNNING"}
    # recorded once on the job, however often the sweep runs
    assert sweep.sweep(cluster) == []
    with store.session() as session:
        events = [e.message for e in session.query(JobEvent).filter_by(cause="stray-sweep").all()]
    assert len(events) == 1
    assert f"application {stray} of run {killed_run} (closed: KILLED)" in events[0]
    assert "killed again" in events[0]
    backend.close()


def test_clusters_that_cannot_list_tags_are_not_swept(store: Store) -> None:
    class Standalone:
        def list_applications(self) -> list[object]:
            return []

    cluster = ClusterRecord(
        "s",
        "standalone",
        "spark://h:7077",
        "http://h:6066",
        "http://h:8080",
        "",
        "",
        "/x",
        "NORMAL",
        0,
    )
    sweep = StraySweep(store, lambda c: Standalone(), node_id="n")  # type: ignore[arg-type,return-value]
    assert not sweep.sweeps(cluster)
    assert sweep.sweep(cluster) == []


def test_a_late_second_application_of_an_open_run_is_killed_and_recorded(
    store: Store, rm: SimResourceManager, tmp_path: Path
) -> None:
    """A submission whose outcome was unknown reached the ResourceManager only after the run was
    reissued and submitted again: the application the run did not record is killed, the one it
    recorded keeps running."""
    cluster = _yarn_cluster(store, rm, tmp_path, "orders")
    run_id, token = _run(store, "orders", "STARTING", "yarn-a")
    tag = f"drover:orders:{run_id}"
    late = rm.submit(tag, yarn_tags("orders", run_id, "the-superseded-token"), "")
    recorded = rm.submit(tag, yarn_tags("orders", run_id, token), "")
    with store.transaction() as session:  # what the reissue and the submission recorded
        row = session.get(Run, run_id)
        assert row is not None
        row.submission_id = recorded
        row.superseded_tokens = fencing_digest("the-superseded-token")

    backend = YarnBackend(rm.url, tmp_path / "conf", spark_home=fake_spark_submit(tmp_path / "s"))
    sweep = StraySweep(store, lambda c: backend, node_id="test-node")
    found = sweep.sweep(cluster)
    assert [(s.app_id, s.duplicate_of) for s in found] == [(late, recorded)]
    states = {a["id"]: a["state"] for a in rm.apps(None, None)}
    assert states == {late: "KILLED", recorded: "RUNNING"}
    assert sweep.sweep(cluster) == []
    with store.session() as session:
        events = [e.message for e in session.query(JobEvent).filter_by(cause="stray-sweep").all()]
    assert len(events) == 1 and f"second live application of run {run_id}" in events[0]
    backend.close()


def test_a_late_second_driver_on_a_standalone_master_is_killed(store: Store) -> None:
    """On a standalone master (simulated) the sweep lists live drivers with the run tag and the
    fence tag of their launch command: the late driver of an open run (a superseded token) is
    killed, the recorded one and another deployment's driver with the same tag are left alone,
    and a closed run's driver is killed as a stray."""
    from harness.simcluster import SimCluster
    from scheduler.backends.standalone import StandaloneRestBackend
    from scheduler.core.backend import SubmitRequest

    sim = SimCluster(app_start_delay=0.1).start()
    backend = StandaloneRestBackend(
        sim.rest_url, sim.master_url, sim.ui_url, python="/usr/bin/python3", timeout_s=2.0
    )
    try:
        with store.transaction() as session:
            cluster = catalog_store.create_cluster(
                session,
                "sa",
                ClusterSpec(
                    kind="standalone",
                    storage_root="/tmp/drover-strays-sa",
                    master_url=sim.master_url,
                    rest_url=sim.rest_url,
                    ui_url=sim.ui_url,
                ),
            )
            catalog_store.create_group(session, "gs", primary_cluster="sa")
            for name in ("orders", "ads"):
                jobs_store.create_job(
                    session,
                    JobSpec(name=name, entrypoint="/opt/pipelines/p.py", group="gs"),
                    cause="test",
                    node_id="test-node",
                )
        run_id, token = _run(store, "orders", "STARTING", "sa")
        closed_id, closed_token = _run(store, "ads", "KILLED", "sa")

        def submit(job: str, run: int, token: str) -> str:
            request = SubmitRequest(job, run, token, "/opt/pipelines/p.py")
            return backend.submit(request).submission_id

        late = submit("orders", run_id, "the-superseded-token")
        recorded = submit("orders", run_id, token)
        foreign = submit("orders", run_id, "another-deployments-token")
        closed = submit("ads", closed_id, closed_token)
        with store.transaction() as session:  # what the reissue and the submission recorded
            row = session.get(Run, run_id)
            assert row is not None
            row.submission_id = recorded
            row.superseded_tokens = fencing_digest("the-superseded-token")

        sweep = StraySweep(store, lambda c: backend, node_id="test-node")
        assert sweep.sweeps(cluster)
        found = sweep.sweep(cluster)
        assert sorted((s.handle, s.duplicate_of) for s in found) == sorted(
            [(late, recorded), (closed, "")]
        )
        wait_until(
            lambda: (
                {info.submission_id for info, _ in backend.list_tagged()} == {recorded, foreign}
            ),
            timeout=5,
            interval=0.1,
            what="the duplicate to be gone, the others alive",
        )
        with store.session() as session:
            events = [e.message for e in session.query(JobEvent).filter_by(cause="stray-sweep")]
        assert len(events) == 2
        assert any(f"second live application of run {run_id}" in e for e in events)
    finally:
        backend.close()
        sim.stop()
