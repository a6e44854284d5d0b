"""The metadata store on SQLite and on real MariaDB: migrations, repository, fenced writes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy.orm import Session

from scheduler.core.backend import app_name_for
from scheduler.core.errors import AlreadyExists, Conflict, NotFound, StaleWrite
from scheduler.core.ownership import name_crc32
from scheduler.core.records import JobRecord, JobSpec, RunRecord
from scheduler.core.states import CommandEffect, DesiredState, JobState, RunState
from scheduler.store import catalog as catalog_store
from scheduler.store import inspection, journal, ledger
from scheduler.store import jobs as jobs_store
from scheduler.store.db import Store
from scheduler.store.models import Base

pytestmark = pytest.mark.integration

TABLES = {
    "clusters",
    "scheduling_groups",
    "jobs",
    "job_labels",
    "job_revisions",
    "runs",
    "job_events",
    "audit_log",
    "membership_generations",
    "cluster_votes",
    "checkpoint_replicas",
    "cluster_health_events",
    "teams",
    "identities",
    "role_bindings",
    "api_tokens",
    "idempotency_keys",
    "operations",
    "operation_items",
    "group_failover_policies",
    "run_progress",
    "progress_samples",
    "alert_channels",
    "alerts",
    "alert_deliveries",
    "business_quotas",
    "submission_queue",
    "auto_failover_events",
}


def _tables(store: Store) -> set[str]:
    return set(sa.inspect(store.engine).get_table_names()) - {"alembic_version"}


def test_upgrade_downgrade_upgrade(empty_store: Store) -> None:
    empty_store.upgrade()
    assert _tables(empty_store) == TABLES
    assert empty_store.current_revision() == empty_store.head_revision()
    empty_store.downgrade("base")
    assert _tables(empty_store) == set()
    assert empty_store.current_revision() is None
    empty_store.upgrade()
    assert _tables(empty_store) == TABLES
    empty_store.check_schema()


def test_migrations_match_the_models(store: Store) -> None:
    with store.engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == []


def test_out_of_date_schema_is_refused_with_the_command_to_run(empty_store: Store) -> None:
    from scheduler.core.errors import SchemaOutOfDate

    with pytest.raises(SchemaOutOfDate, match="drover db upgrade"):
        empty_store.check_schema()


def _create(store: Store, name: str, **kw: object) -> None:
    with store.transaction() as s:
        jobs_store.create_job(
            s, JobSpec(name=name, entrypoint="/p.py", **kw), cause="t", node_id="n"
        )  # type: ignore[arg-type]


def _new_run(session: Session, job: JobRecord) -> RunRecord:
    """A new run of ``job`` on the local cluster, recorded by node ``n``."""
    return ledger.create_run(
        session,
        job,
        cluster="local",
        node_id="n",
        owner_epoch=0,
        checkpoint_location="file:///c",
        app_name_for=app_name_for,
    )


def test_job_names_are_case_sensitive_unicode_identities(store: Store) -> None:
    for name in ("orders", "Orders", "café-订单"):
        _create(store, name)
    with pytest.raises(AlreadyExists):
        _create(store, "café-订单")
    with store.session() as s:
        jobs, count = jobs_store.list_jobs(s)
        assert count == 3
        assert {j.name for j in jobs} == {"orders", "Orders", "café-订单"}
        assert jobs_store.get_job(s, "café-订单").name == "café-订单"


def test_crc32_in_sql_matches_the_ownership_hash(store: Store) -> None:
    names = ["orders-enrich", "café-订单", "ÄÖÜ.x_y"]
    for name in names:
        _create(store, name)
    with store.session() as s:
        assert sorted(j.name for j in jobs_store.list_jobs(s)[0]) == sorted(names)
    if store.engine.dialect.name != "sqlite":  # SQLite has no CRC32(); MySQL selects by it
        with store.engine.connect() as conn:
            rows = dict(conn.execute(sa.text("SELECT name, CRC32(name) FROM jobs")).all())
        assert rows == {n: name_crc32(n) for n in names}


def test_conditional_transition_refuses_a_stale_version(store: Store) -> None:
    _create(store, "j", desired_state=DesiredState.RUNNING)
    with store.session() as s:
        seen = jobs_store.get_job(s, "j")
    assert seen.state == JobState.QUEUED
    with store.transaction() as s:
        ledger.transition_job(s, seen, JobState.SUBMITTING, reason="r", cause="t", node_id="n")
    with pytest.raises(StaleWrite), store.transaction() as s:
        ledger.transition_job(s, seen, JobState.STOPPED, reason="late", cause="t", node_id="n")
    with store.session() as s:
        now = jobs_store.get_job(s, "j")
        events, _ = journal.list_events(s, "j")
    assert (now.state, now.version) == (JobState.SUBMITTING, seen.version + 1)
    assert [(e.from_state, e.to_state) for e in events] == [
        ("QUEUED", "SUBMITTING"),
        (None, "QUEUED"),
    ]


def test_runs_history_timestamps_and_failure_window(store: Store) -> None:
    _create(store, "j", desired_state=DesiredState.RUNNING)
    with store.transaction() as s:
        job = jobs_store.get_job(s, "j")
        run = _new_run(s, job)
    assert run.app_name == f"drover:j:{run.id}" and run.attempt == 1
    ended = datetime(2030, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    with store.transaction() as s:
        ledger.update_run(
            s,
            run,
            state=RunState.FAILED,
            reason="exit code 1",
            exit_code=1,
            ended_at=ended,
            counts_as_failure=True,
        )
        with pytest.raises(StaleWrite):
            ledger.update_run(s, run, state=RunState.RUNNING)
    with store.session() as s:
        runs, count = jobs_store.list_runs(s, "j")
        assert count == 1 and runs[0].ended_at == ended  # microseconds and UTC survive
        assert ledger.failures_since(s, job, ended - timedelta(seconds=1)) == (1, ended)
        assert ledger.failures_since(s, job, ended + timedelta(seconds=1))[0] == 0


def test_delete_refuses_a_running_job_and_cascades(store: Store) -> None:
    _create(store, "j", desired_state=DesiredState.RUNNING)
    with pytest.raises(Conflict), store.transaction() as s:
        jobs_store.delete_job(s, "j", expected_version=None)
    with store.transaction() as s:
        job = jobs_store.get_job(s, "j")
        ledger.create_run(
            s,
            job,
            cluster="local",
            node_id="n",
            owner_epoch=0,
            checkpoint_location="",
            app_name_for=app_name_for,
        )
        jobs_store.delete_job(s, "j", expected_version=None, refuse_if_running=False)
    with store.session() as s:
        counts = inspection.table_counts(s)
        with pytest.raises(NotFound):
            jobs_store.get_job(s, "j")
    assert counts["jobs"] == counts["runs"] == counts["job_events"] == 0


# -- clusters and groups (catalog) ----------------------------------------------------------------


def test_catalog_migration_keeps_existing_clusters_and_groups(empty_store: Store) -> None:
    empty_store.upgrade("0001")
    with empty_store.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO clusters (name, kind, master_url, rest_url, ui_url, az, cloud, "
                "storage_root, health, max_concurrent_submissions, created_at, updated_at) "
                "VALUES ('old', 'local', '', '', '', '', '', 'file:///ck/old', 'NORMAL', 2, "
                "'2024-01-01 00:00:00', '2024-01-01 00:00:00')"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO scheduling_groups (name, primary_cluster, created_at, updated_at) "
                "VALUES ('g', 'old', '2024-01-01 00:00:00', '2024-01-01 00:00:00')"
            )
        )
    empty_store.upgrade()
    with empty_store.session() as s:
        old = catalog_store.get_cluster(s, "old")
        group = catalog_store.get_group(s, "g")
    assert (old.max_concurrent_submissions, old.max_running_apps, old.max_cores) == (2, 0, 0)
    assert old.version == 1 and group.version == 1
    empty_store.downgrade("0001")
    with empty_store.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT name FROM clusters")).scalars().all() == ["old"]
    assert "max_cores" not in {
        c["name"] for c in sa.inspect(empty_store.engine).get_columns("clusters")
    }


def _cluster(store: Store, name: str, root: str) -> None:
    from scheduler.decisions.catalog import ClusterSpec

    with store.transaction() as s:
        catalog_store.create_cluster(
            s, name, ClusterSpec(kind="spark-submit", master_url="yarn", storage_root=root)
        )


def test_explicit_checkpoint_locations_lie_under_the_primary_clusters_root(store: Store) -> None:
    from scheduler.core.errors import InvalidInput

    _cluster(store, "a", "s3a://ck-a/drover")
    _cluster(store, "b", "s3a://ck-b/drover")
    with store.transaction() as s:
        catalog_store.create_group(s, "g", primary_cluster="a", failover_cluster="b")
    with store.session() as s:
        check = catalog_store.validate_checkpoint_location
        assert check(s, "g", "") == ""
        assert check(s, "g", "s3a://ck-a/drover/x/../orders/") == "s3a://ck-a/drover/orders"
        for bad in ("s3a://ck-b/drover/orders", "s3a://ck-a/other", "s3a://ck-a/drover", "/tmp/x"):
            with pytest.raises(InvalidInput):
                check(s, "g", bad)
        with pytest.raises(InvalidInput, match="no group"):
            check(s, "nope", "s3a://ck-a/drover/x")


def test_cluster_and_group_names_are_case_sensitive(store: Store) -> None:
    _cluster(store, "spark", "/ck/lower")
    _cluster(store, "Spark", "/ck/upper")
    with pytest.raises(AlreadyExists):
        _cluster(store, "spark", "/ck/again")
    with store.transaction() as s:
        catalog_store.create_group(s, "G", primary_cluster="Spark", failover_cluster="spark")
    with store.session() as s:
        assert [c.name for c in catalog_store.list_clusters(s)] == ["Spark", "local", "spark"]
        assert catalog_store.get_group(s, "G").failover_cluster == "spark"


def test_only_runs_flagged_as_failures_use_the_restart_budget(store: Store) -> None:
    """A kill by Drover, a run never submitted, a failure on an abnormal cluster: not counted."""
    _create(store, "j", desired_state=DesiredState.RUNNING)
    ended = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    for state, counts in [
        (RunState.KILLED, False),
        (RunState.LOST, False),
        (RunState.FAILED, False),
        (RunState.FAILED, True),
        (RunState.FINISHED, True),
    ]:
        with store.transaction() as s:
            run = _new_run(s, jobs_store.get_job(s, "j"))
            ledger.update_run(s, run, state=state, ended_at=ended, counts_as_failure=counts)
    with store.session() as s:
        assert ledger.failures_since(
            s, jobs_store.get_job(s, "j"), ended - timedelta(seconds=1)
        ) == (
            2,
            ended,
        )


# -- spec version (what If-Match protects; state changes never move it) ----------------------------


def test_only_spec_changes_move_the_spec_version(store: Store) -> None:
    """State changes, commands and ownership move ``version`` (the reconciler's concurrency
    counter) and leave ``spec_version`` (what If-Match protects) alone."""
    from scheduler.core.errors import PreconditionFailed
    from scheduler.core.ownership import Claim, Fence

    _create(store, "j", desired_state=DesiredState.RUNNING)
    with store.transaction() as s:
        ledger.claim_jobs(s, Claim("default", Fence("n", 4), 0, 1))
    with store.session() as s:
        job = jobs_store.get_job(s, "j")
    assert (job.version, job.spec_version, job.owner) == (1, 1, "n")
    with store.transaction() as s:
        ledger.transition_job(
            s, job, JobState.SUBMITTING, reason="r", cause="t", node_id="n", fence=Fence("n", 4)
        )
    with store.transaction() as s:
        job = jobs_store.apply_command(
            s,
            "j",
            CommandEffect(DesiredState.STOPPED, False, False, state=None),
            expected_version=1,  # checked against the spec version, which did not move
            cause="t",
            node_id="n",
            message="stop",
        )
    assert (job.version, job.spec_version) == (3, 1)
    with store.transaction() as s:
        job = jobs_store.update_job_spec(
            s, "j", {"args": ["--x"]}, expected_version=1, cause="t", node_id="n"
        )
    assert (job.version, job.spec_version, job.args) == (4, 2, ("--x",))
    with pytest.raises(PreconditionFailed, match="spec version 2, not 1"), store.transaction() as s:
        jobs_store.update_job_spec(
            s, "j", {"team": "t"}, expected_version=1, cause="t", node_id="n"
        )
    with pytest.raises(PreconditionFailed), store.transaction() as s:
        jobs_store.delete_job(s, "j", expected_version=4, refuse_if_running=False)
    with store.session() as s:
        assert (jobs_store.get_job(s, "j").version, jobs_store.get_job(s, "j").spec_version) == (
            4,
            2,
        )


def test_spec_version_migration_starts_from_the_row_version(empty_store: Store) -> None:
    """Existing jobs get ``spec_version = version``: ETags handed out before the upgrade hold."""
    empty_store.upgrade("0006")
    now = "'2024-01-01 00:00:00'"
    with empty_store.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO clusters (name, kind, master_url, rest_url, ui_url, az, cloud, "
                "storage_root, health, max_concurrent_submissions, created_at, updated_at) "
                f"VALUES ('c', 'local', '', '', '', '', '', 'file:///ck/c', 'NORMAL', 0, {now}, "
                f"{now})"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO scheduling_groups (name, primary_cluster, created_at, updated_at) "
                f"VALUES ('g', 'c', {now}, {now})"
            )
        )
        for name, version in (("old", 7), ("new", 1)):
            conn.execute(
                sa.text(
                    "INSERT INTO jobs (name, group_name, team, business, priority, entrypoint, "
                    "args, conf, checkpoint_location, desired_state, state, state_reason, "
                    "generation, attempts_reset_at, owner_epoch, version, created_at, updated_at)"
                    f" VALUES ('{name}', 'g', '', '', 'normal', '/p.py', '[]', '{{}}', '', "
                    f"'STOPPED', 'STOPPED', '', 0, {now}, 0, {version}, {now}, {now})"
                )
            )
    empty_store.upgrade()
    with empty_store.session() as s:
        assert {j.name: (j.version, j.spec_version) for j in jobs_store.list_jobs(s)[0]} == {
            "old": (7, 7),
            "new": (1, 1),
        }
    empty_store.downgrade("0006")
    assert "spec_version" not in {
        c["name"] for c in sa.inspect(empty_store.engine).get_columns("jobs")
    }
    with empty_store.engine.connect() as conn:
        assert sorted(conn.execute(sa.text("SELECT name FROM jobs")).scalars()) == ["new", "old"]


def test_a_group_is_deleted_only_when_empty(store: Store) -> None:
    from scheduler.core.errors import PreconditionFailed

    with store.transaction() as s:
        catalog_store.create_group(s, "g", primary_cluster="local")
    _create(store, "j", group="g")
    with pytest.raises(Conflict, match="still has 1 job"), store.transaction() as s:
        catalog_store.delete_group(s, "g", expected_version=None)
    with store.transaction() as s:
        jobs_store.delete_job(s, "j", expected_version=None)
    with pytest.raises(PreconditionFailed), store.transaction() as s:
        catalog_store.delete_group(s, "g", expected_version=2)
    with store.transaction() as s:
        deleted = catalog_store.delete_group(s, "g", expected_version=1)
    assert deleted.name == "g"
    with store.session() as s, pytest.raises(NotFound):
        catalog_store.get_group(s, "g")
