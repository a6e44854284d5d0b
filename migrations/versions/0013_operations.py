"""operations (failovers): persisted plans and their items; job directives; fenced runs; groups'
automatic failover policies

- ``operations`` / ``operation_items``: an operation over many jobs (kind ``failover`` first)
  and, per job, its planned action, step and step history (scheduler/decisions/operations/);
- ``jobs.directive``: what an operation asks of the job's owner (scheduler/core/directive.py);
- ``runs.fenced_at`` / ``runs.fence_superseded_at``: a run closed by fencing (its cluster could
  not be reached), and when its driver was first answered "superseded";
- ``group_failover_policies``: a group's automatic failover (off unless enabled).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.columns import create_table_with_id, foreign_key, name_type, utc_datetime

revision = "0013"
down_revision = "0012"


def upgrade() -> None:
    # plain ADD COLUMN: no table rebuild on SQLite (runs and job_events point at jobs)
    op.add_column("jobs", sa.Column("directive", sa.JSON(), nullable=True))
    op.add_column("runs", sa.Column("fenced_at", utc_datetime(), nullable=True))
    op.add_column("runs", sa.Column("fence_superseded_at", utc_datetime(), nullable=True))
    create_table_with_id(
        "operations",
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("home_group", name_type(), nullable=False),
        sa.Column("source_cluster", name_type(), nullable=True),
        sa.Column("target_cluster", name_type(), nullable=True),
        sa.Column("selector", sa.JSON(), nullable=False),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_by", sa.String(160), nullable=False),
        sa.Column("incident", sa.String(300), nullable=True),
        sa.Column("plan_digest", sa.String(64), nullable=False),
        sa.Column("executor", sa.String(128), nullable=True),
        sa.Column("executor_epoch", sa.BigInteger(), nullable=False),
        sa.Column("executor_since", utc_datetime(), nullable=True),
        sa.Column("cancel_requested_at", utc_datetime(), nullable=True),
        sa.Column("cancel_requested_by", sa.String(160), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", utc_datetime(), nullable=False),
        sa.Column("updated_at", utc_datetime(), nullable=False),
        sa.Column("started_at", utc_datetime(), nullable=True),
        sa.Column("finished_at", utc_datetime(), nullable=True),
        sa.UniqueConstraint("incident", name=op.f("uq_operations_incident")),
    )
    op.create_index("ix_operations_state_home_group", "operations", ["state", "home_group"])
    create_table_with_id(
        "operation_items",
        sa.Column("operation_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=True),
        sa.Column("job_name", name_type(), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("why", sa.Text(), nullable=False),
        sa.Column("step", sa.String(24), nullable=False),
        sa.Column("history", sa.JSON(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=False),
        sa.Column("source_cluster", name_type(), nullable=True),
        sa.Column("target_cluster", name_type(), nullable=True),
        sa.Column("source_run_id", sa.Integer(), nullable=True),
        sa.Column("target_run_id", sa.Integer(), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
        sa.Column("not_before", utc_datetime(), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", utc_datetime(), nullable=False),
        sa.Column("started_at", utc_datetime(), nullable=True),
        sa.Column("finished_at", utc_datetime(), nullable=True),
        foreign_key("operation_items", "operation_id", "operations.id", ondelete="CASCADE"),
    )
    op.create_index(
        "ix_operation_items_operation_id_position",
        "operation_items",
        ["operation_id", "position"],
        unique=True,
    )
    op.create_index("ix_operation_items_job_id", "operation_items", ["job_id"])
    op.create_table(
        "group_failover_policies",
        sa.Column("group_name", name_type(), nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("after_seconds", sa.Float(), nullable=False),
        sa.Column("min_priority", sa.String(16), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_by", sa.String(160), nullable=False),
        sa.Column("updated_at", utc_datetime(), nullable=False),
        foreign_key(
            "group_failover_policies", "group_name", "scheduling_groups.name", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("group_name", name=op.f("pk_group_failover_policies")),
    )


def downgrade() -> None:
    op.drop_table("group_failover_policies")
    op.drop_table("operation_items")
    op.drop_table("operations")
    # SQLite 3.35+ and MariaDB drop a column in place
    op.drop_column("runs", "fence_superseded_at")
    op.drop_column("runs", "fenced_at")
    op.drop_column("jobs", "directive")
