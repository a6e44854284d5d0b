"""The API's Core reads (``scheduler.store.reads``) answer exactly what the ORM reads they
replace answer, on SQLite and on MariaDB: jobs with and without a current run, progress, a
directive and labels; pages in every sort, after a cursor, filtered, with their queue rows; a
job's queue row, replica and group (one joined read) and the clusters; and a token's
credential."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scheduler.config import Settings
from scheduler.core.clock import utcnow
from scheduler.core.paging import Sort, Window
from scheduler.core.records import JobRecord, JobSpec
from scheduler.core.states import DesiredState, JobState
from scheduler.decisions.gate import QueueRow
from scheduler.decisions.identity import Role
from scheduler.store import catalog as catalog_store
from scheduler.store import identities, reads
from scheduler.store import jobs as jobs_store
from scheduler.store import quotas as quotas_store
from scheduler.store import replicas as replicas_store
from scheduler.store.db import Store
from scheduler.store.models import CheckpointReplica, Job, QueueEntry, Run, RunProgress
from tests.support.auth import member_token

pytestmark = pytest.mark.integration


def _seed(store: Store) -> None:
    now = utcnow()
    with store.transaction() as session:
        for i in range(12):
            spec = JobSpec(
                name=f"job-{i:02d}",
                entrypoint="/opt/pipelines/p.py",
                team="ads" if i % 2 else "web",
                labels={"env": "prod"} if i % 3 == 0 else {},
                args=("--n", str(i)),
                conf={"spark.executor.cores": "1"},
                desired_state=DesiredState.RUNNING if i < 6 else DesiredState.STOPPED,
            )
            jobs_store.create_job(session, spec, cause="test", node_id="n")
    with store.transaction() as session:
        for i in (1, 2, 3):
            job = session.query(Job).filter(Job.name == f"job-{i:02d}").one()
            run = Run(
                job_id=job.id,
                attempt=1,
                cluster_name="local",
                node_id="n",
                fencing_token=f"token-{i}",
                app_name="",
                state="RUNNING",
                started_at=now,
                drain_deadline=now + timedelta(seconds=30) if i == 3 else None,
            )
            session.add(run)
            session.flush()
            job.current_run_id, job.state, job.cluster_name = run.id, "RUNNING", "local"
            job.updated_at = now + timedelta(seconds=i)
            if i != 3:  # a run that never reported
                session.add(
                    RunProgress(
                        run_id=run.id,
                        job_id=job.id,
                        batch_id=7 * i,
                        rows=100,
                        input_rate=1.5,
                        processing_rate=2.5,
                        declared_at=now,
                        reported_at=now,
                        heartbeat_at=now,
                        reports=3,
                    )
                )
        job = session.query(Job).filter(Job.name == "job-04").one()
        job.directive = {
            "operation": 5,
            "item": 6,
            "phase": "drain",
            "source": "local",
            "target": "local",
        }
        queued = session.query(Job).filter(Job.name == "job-05").one()
        session.add(QueueEntry(job_id=queued.id, position=2, kind="rate", reason="bucket empty"))
        session.add(
            CheckpointReplica(
                job_id=queued.id,
                state="CURRENT",
                source_cluster="local",
                source_location="file:///a",
                target_cluster="local",
                location="file:///b",
                lag_batches=0,
                updated_at=now,
            )
        )


def page_records(
    session: Any, selector: jobs_store.JobFilter, window: Window
) -> tuple[list[tuple[JobRecord, QueueRow | None]], tuple[Any, ...] | None]:
    """A page of ``reads.page_job_rows`` as records (job and queue row), and the next key."""
    page = reads.page_job_rows(session, selector, window)
    return [page.record(raw) for raw in page.rows], page.next_key


@pytest.fixture
def seeded(store: Store) -> Store:
    _seed(store)
    return store


def test_a_job_reads_the_same(seeded: Store) -> None:
    with seeded.session() as session:
        names = [j.name for j in jobs_store.page_jobs(session)[0]]
        assert len(names) == 12
        for name in names:
            found = reads.job_view(session, name)
            assert found is not None and found.job == jobs_store.get_job(session, name)
            assert reads.team_of_job(session, name) == jobs_store.get_job(session, name).team
        assert reads.job_view(session, "nope") is None
        assert reads.team_of_job(session, "nope") is None
        running = reads.job_view(session, "job-01")
        assert running is not None and running.job.current_run is not None
        assert running.job.progress is not None and running.job.progress.batch_id == 7
        unreported = reads.job_view(session, "job-03")  # a current run without progress
        assert unreported is not None and unreported.job.current_run is not None
        assert unreported.job.progress is None
        directed = reads.job_view(session, "job-04")
        assert directed is not None and directed.job.directive is not None


@pytest.mark.parametrize("sort", ["name", "-name", "state", "-state", "updated_at", "-updated_at"])
def test_pages_read_the_same(seeded: Store, sort: str) -> None:
    order = Sort.parse(sort, tuple(jobs_store.JOB_SORTS))
    selectors = [
        jobs_store.JobFilter(),
        jobs_store.JobFilter(teams=frozenset({"ads"})),
        jobs_store.JobFilter(state=JobState.RUNNING),
    ]
    with seeded.session() as session:
        for selector in selectors:
            after = None
            pages = 0
            while True:
                window = Window(order, after, 5)
                rows, after = page_records(session, selector, window)
                theirs = jobs_store.page_jobs(session, selector, window)
                assert ([job for job, _ in rows], after) == theirs
                queues = quotas_store.queue_of(session, [job.id for job, _ in rows])
                assert [queue for _, queue in rows] == [queues.get(job.id) for job, _ in rows]
                pages += 1
                if after is None:
                    break
            assert pages >= 1


def test_queue_replica_group_and_clusters_read_the_same(seeded: Store, settings: Settings) -> None:
    with seeded.session() as session:
        records = jobs_store.page_jobs(session)[0]
        queues = quotas_store.queue_of(session, [j.id for j in records])
        assert len(queues) == 1
        replicas = replicas_store.replicas_of(session, records)
        assert len(replicas) == 1
        for job in records:
            found = reads.job_view(session, job.name)
            assert found is not None
            assert found.queue == queues.get(job.id)
            assert found.replica == replicas.get(job.name)
            assert found.group == catalog_store.get_group(session, job.group)
        assert reads.clusters(session) == catalog_store.list_clusters(session)


def test_a_token_reads_the_same(seeded: Store) -> None:
    secret = member_token(seeded, "alice", "ads", Role.OPERATOR)
    now = datetime.now(UTC)
    with seeded.transaction() as session:
        identities.create_team(session, "web")
        identities.bind(session, "alice", "web", Role.VIEWER)
    with seeded.session() as session:
        found = identities.authenticate_token(session, secret, now)
        assert found is not None
        assert found.identity == "alice" and found.kind == "user"
        assert found.roles == {"ads": Role.OPERATOR, "web": Role.VIEWER}
        assert identities.authenticate_token(session, secret + "x", now) is None


def test_a_creation_writes_what_the_orm_wrote(store: Store) -> None:
    """``create_job`` inserts with Core: the record it answers is the row read back; labels, the
    first revision and the creation event are there; an audit row's JSON columns hold what an
    ORM insert would hold (JSON null for no ``before``)."""
    from sqlalchemy import Text, select, type_coerce

    from scheduler.store import journal
    from scheduler.store import revisions as revisions_store
    from scheduler.store.models import AuditEntry, JobEvent, JobLabel

    spec = JobSpec(
        name="fresh",
        entrypoint="/opt/pipelines/p.py",
        team="ads",
        business="retail",
        args=("--a", "1"),
        conf={"spark.executor.cores": "2"},
        labels={"tier": "gold", "env": "prod"},
        stall_after=30.0,
        desired_state=DesiredState.RUNNING,
    )
    with store.transaction() as session:
        made = jobs_store.create_job(session, spec, cause="api:create by t", node_id="n")
        journal.add_audit(
            session, actor="t", action="job.create", target_kind="job", target_name="fresh"
        )
        session.add(
            AuditEntry(
                actor="t",
                action="orm",
                target_kind="job",
                target_name="fresh",
                detail={},
                before=None,
                after=None,
            )
        )
    with store.session() as session:
        assert jobs_store.get_job(session, "fresh") == made
        assert made.state == JobState.QUEUED and made.spec_version == 1 and made.version == 1
        labels = session.execute(
            select(JobLabel.key, JobLabel.value).where(JobLabel.job_id == made.id)
        ).all()
        assert sorted(labels) == [("env", "prod"), ("tier", "gold")]
        history = revisions_store.page_revisions(
            session, "fresh", Window(Sort("revision"), None, 10)
        )
        assert [r.revision for r in history[0]] == [1] and history[0][0].message == "created"
        events = session.scalars(select(JobEvent).where(JobEvent.job_id == made.id)).all()
        assert [(e.from_state, e.to_state, e.message) for e in events] == [
            (None, "QUEUED", "created")
        ]
        audit = AuditEntry.__table__.c
        raw = session.execute(  # the stored text (no JSON decoding); names quoted per dialect
            select(
                audit.action,
                *(type_coerce(audit[c], Text) for c in ("detail", "before", "after")),
            ).order_by(audit.id)
        ).all()
        core, orm = (tuple(r[1:]) for r in raw[-2:])
        assert raw[-2][0] == "job.create" and core == orm


def test_a_reading_is_one_connection(store: Store) -> None:
    """``Store.reading``: the connections opened inside it are one; a failed read inside it is
    still a StoreError."""
    from sqlalchemy import text

    from scheduler.core.errors import StoreError

    with store.reading():
        with store.connection() as first, store.connection() as second:
            assert first is second
            assert reads.team_of_job(first, "nope") is None
        with pytest.raises(StoreError), store.connection() as connection:
            connection.execute(text("SELECT no_such_column FROM jobs"))
    with store.connection() as outside:
        assert outside is not first


def test_odd_values_read_the_same(store: Store) -> None:
    """What the raw reads (``scheduler/store/rowcodec.py``: one JSON_ARRAY per row) must give
    back exactly: fractional floats (to the 17th digit), integral floats, booleans,
    microseconds, quotes, newlines and characters beyond the BMP in text and in JSON."""
    from scheduler.store import ledger

    spec = JobSpec(
        name="odd",
        entrypoint='/opt/pipelines/p "odd".py',
        team="ads",
        args=("--name", 'ä"ö\n€ 😀', "\\x"),
        conf={"spark.app.note": "tab\there"},
        labels={"tier": "gold"},
        replicate=True,
        stall_after=0.1,
        desired_state=DesiredState.RUNNING,
    )
    with store.transaction() as session:
        job = jobs_store.create_job(session, spec, cause="test", node_id="n")
        ledger.transition_job(
            session,
            job,
            JobState.QUEUED,
            reason='waits "here"\nfor 😀',
            cause="test",
            node_id="n",
        )
    window = Window(Sort.parse("name", tuple(jobs_store.JOB_SORTS)), None, 10)

    def read_the_same() -> JobRecord:
        with store.session() as session:
            expected = jobs_store.get_job(session, "odd")
            found = reads.job_view(session, "odd")
            assert found is not None and found.job == expected
            [(paged, _)], _ = page_records(session, jobs_store.JobFilter(), window)
            assert paged == expected
            return expected

    odd = read_the_same()
    assert odd.stall_after is not None and abs(odd.stall_after - 0.1) < 1e-6
    assert odd.args == spec.args and odd.replicate is True
    with store.transaction() as session:  # an integral float
        jobs_store.update_job_spec(
            session, "odd", {"stall_after": 300.0}, expected_version=None, cause="t", node_id="n"
        )
    odd = read_the_same()
    assert odd.stall_after == 300.0 and isinstance(odd.stall_after, float)
    with store.transaction() as session:  # 17 significant digits (SQLite's JSON writes 15)
        jobs_store.update_job_spec(
            session,
            "odd",
            {"stall_after": 0.1 + 0.2},
            expected_version=None,
            cause="t",
            node_id="n",
        )
    read_the_same()
