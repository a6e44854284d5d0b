"""initial schema"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.columns import create_table_with_id, foreign_key, name_type, utc_datetime

revision = "0001"
down_revision = None


def upgrade() -> None:
    create_table_with_id(
        "audit_log",
        sa.Column("at", utc_datetime(), nullable=False),
        sa.Column("actor", sa.String(length=128), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("target_kind", sa.String(length=32), nullable=False),
        sa.Column("target_name", name_type(300), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.Column("node_id", sa.String(length=128), nullable=False),
    )
    with op.batch_alter_table("audit_log", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_log_at"), ["at"], unique=False)

    op.create_table(
        "clusters",
        sa.Column("name", name_type(128), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("master_url", sa.String(length=512), nullable=False),
        sa.Column("rest_url", sa.String(length=512), nullable=False),
        sa.Column("ui_url", sa.String(length=512), nullable=False),
        sa.Column("az", sa.String(length=64), nullable=False),
        sa.Column("cloud", sa.String(length=64), nullable=False),
        sa.Column("storage_root", sa.String(length=1024), nullable=False),
        sa.Column("health", sa.String(length=32), nullable=False),
        sa.Column("max_concurrent_submissions", sa.Integer(), nullable=False),
        sa.Column("created_at", utc_datetime(), nullable=False),
        sa.Column("updated_at", utc_datetime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_clusters")),
    )
    op.create_table(
        "scheduling_groups",
        sa.Column("name", name_type(128), nullable=False),
        sa.Column("primary_cluster", name_type(128), nullable=False),
        sa.Column("failover_cluster", name_type(128), nullable=True),
        sa.Column("created_at", utc_datetime(), nullable=False),
        sa.Column("updated_at", utc_datetime(), nullable=False),
        foreign_key("scheduling_groups", "failover_cluster", "clusters.name"),
        foreign_key("scheduling_groups", "primary_cluster", "clusters.name"),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_scheduling_groups")),
    )
    create_table_with_id(
        "jobs",
        sa.Column("name", name_type(128), nullable=False),
        sa.Column("group_name", name_type(128), nullable=False),
        sa.Column("team", sa.String(length=128), nullable=False),
        sa.Column("business", sa.String(length=128), nullable=False),
        sa.Column("priority", sa.String(length=16), nullable=False),
        sa.Column("entrypoint", sa.String(length=1024), nullable=False),
        sa.Column("args", sa.JSON(), nullable=False),
        sa.Column("conf", sa.JSON(), nullable=False),
        sa.Column("checkpoint_location", sa.String(length=1024), nullable=False),
        sa.Column("desired_state", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("state_reason", sa.Text(), nullable=False),
        sa.Column("cluster_name", name_type(128), nullable=True),
        sa.Column("current_run_id", sa.Integer(), nullable=True),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("attempts_reset_at", utc_datetime(), nullable=False),
        sa.Column("not_before", utc_datetime(), nullable=True),
        sa.Column("owner", sa.String(length=128), nullable=True),
        sa.Column("owner_epoch", sa.BigInteger(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", utc_datetime(), nullable=False),
        sa.Column("updated_at", utc_datetime(), nullable=False),
        foreign_key("jobs", "cluster_name", "clusters.name"),
        foreign_key("jobs", "group_name", "scheduling_groups.name"),
        sa.UniqueConstraint("name", name=op.f("uq_jobs_name")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_jobs_cluster_name"), ["cluster_name"], unique=False)
        batch_op.create_index(batch_op.f("ix_jobs_desired_state"), ["desired_state"], unique=False)
        batch_op.create_index(batch_op.f("ix_jobs_group_name"), ["group_name"], unique=False)
        batch_op.create_index(batch_op.f("ix_jobs_state"), ["state"], unique=False)
        batch_op.create_index(batch_op.f("ix_jobs_team"), ["team"], unique=False)

    create_table_with_id(
        "job_events",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("at", utc_datetime(), nullable=False),
        sa.Column("from_state", sa.String(length=16), nullable=True),
        sa.Column("to_state", sa.String(length=16), nullable=True),
        sa.Column("cause", sa.String(length=64), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("node_id", sa.String(length=128), nullable=False),
        foreign_key("job_events", "job_id", "jobs.id", ondelete="CASCADE"),
    )
    with op.batch_alter_table("job_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_events_job_id"), ["job_id"], unique=False)

    create_table_with_id(
        "runs",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("cluster_name", name_type(128), nullable=False),
        sa.Column("node_id", sa.String(length=128), nullable=False),
        sa.Column("owner_epoch", sa.BigInteger(), nullable=False),
        sa.Column("fencing_token", sa.String(length=64), nullable=False),
        sa.Column("app_name", sa.String(length=300), nullable=False),
        sa.Column("checkpoint_location", sa.String(length=1024), nullable=False),
        sa.Column("submission_id", sa.String(length=256), nullable=True),
        sa.Column("app_id", sa.String(length=256), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("created_at", utc_datetime(), nullable=False),
        sa.Column("submitted_at", utc_datetime(), nullable=True),
        sa.Column("started_at", utc_datetime(), nullable=True),
        sa.Column("ended_at", utc_datetime(), nullable=True),
        foreign_key("runs", "job_id", "jobs.id", ondelete="CASCADE"),
        sa.UniqueConstraint("fencing_token", name=op.f("uq_runs_fencing_token")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index("ix_runs_job_id_attempt", ["job_id", "attempt"], unique=True)
        batch_op.create_index(batch_op.f("ix_runs_state"), ["state"], unique=False)


def downgrade() -> None:
    # Dropping a table drops its indexes; dropping them first fails on MySQL where an index
    # backs a foreign key.
    for table in ("runs", "job_events", "jobs", "scheduling_groups", "clusters", "audit_log"):
        op.drop_table(table)
