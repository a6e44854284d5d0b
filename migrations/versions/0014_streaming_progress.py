"""streaming progress and alerts: jobs' stall settings, each run's latest progress, a short
history; alert channels, alerts, their delivery outbox
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.columns import create_table_with_id, foreign_key, name_type, utc_datetime

revision = "0014"
down_revision = "0013"


def upgrade() -> None:
    op.add_column("jobs", sa.Column("stall_after", sa.Float(), nullable=True))
    op.add_column(
        "jobs", sa.Column("on_stall", sa.String(16), nullable=False, server_default="alert")
    )
    op.create_table(
        "run_progress",
        sa.Column("run_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("batch_id", sa.BigInteger(), nullable=True),
        sa.Column("rows", sa.BigInteger(), nullable=True),
        sa.Column("input_rate", sa.Float(), nullable=True),
        sa.Column("processing_rate", sa.Float(), nullable=True),
        sa.Column("batch_duration_ms", sa.BigInteger(), nullable=True),
        sa.Column("trigger_interval_ms", sa.BigInteger(), nullable=True),
        sa.Column("spark_timestamp", sa.String(40), nullable=True),
        sa.Column("declared_at", utc_datetime(), nullable=False),
        sa.Column("reported_at", utc_datetime(), nullable=False),
        sa.Column("heartbeat_at", utc_datetime(), nullable=False),
        sa.Column("reports", sa.BigInteger(), nullable=False),
        sa.Column("stalled_since", utc_datetime(), nullable=True),
        foreign_key("run_progress", "run_id", "runs.id", ondelete="CASCADE"),
        foreign_key("run_progress", "job_id", "jobs.id", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("run_id", name="pk_run_progress"),
    )
    op.create_index("ix_run_progress_job_id", "run_progress", ["job_id"])
    create_table_with_id(
        "progress_samples",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("at", utc_datetime(), nullable=False),
        sa.Column("batch_id", sa.BigInteger(), nullable=True),
        sa.Column("rows", sa.BigInteger(), nullable=True),
        sa.Column("input_rate", sa.Float(), nullable=True),
        sa.Column("processing_rate", sa.Float(), nullable=True),
        sa.Column("batch_duration_ms", sa.BigInteger(), nullable=True),
        foreign_key("progress_samples", "job_id", "jobs.id", ondelete="CASCADE"),
    )
    op.create_index("ix_progress_samples_job_id_at", "progress_samples", ["job_id", "at"])
    op.create_index("ix_progress_samples_at", "progress_samples", ["at"])
    create_table_with_id(
        "alert_channels",
        sa.Column("name", name_type(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("url", sa.String(2048), nullable=False),
        sa.Column("team", name_type(), nullable=False),
        sa.Column("kinds", sa.JSON(), nullable=False),
        sa.Column("min_severity", sa.String(16), nullable=False),
        sa.Column("secret", sa.String(256), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("description", sa.String(512), nullable=False),
        sa.Column("created_at", utc_datetime(), nullable=False),
        sa.Column("updated_at", utc_datetime(), nullable=False),
        sa.UniqueConstraint("name", name="uq_alert_channels_name"),
    )
    op.create_index("ix_alert_channels_team", "alert_channels", ["team"])
    create_table_with_id(
        "alerts",
        sa.Column("key", name_type(300), nullable=False),
        sa.Column("open_key", name_type(300), nullable=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("subject", name_type(300), nullable=False),
        sa.Column("severity", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("resolution", sa.Text(), nullable=False),
        sa.Column("team", sa.String(128), nullable=False),
        sa.Column("cluster", name_type(), nullable=True),
        sa.Column("group_name", name_type(), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("folded_into", sa.Integer(), nullable=True),
        sa.Column("started_at", utc_datetime(), nullable=False),
        sa.Column("resolved_at", utc_datetime(), nullable=True),
        sa.UniqueConstraint("open_key", name="uq_alerts_open_key"),
    )
    for column in ("key", "status", "team", "cluster", "folded_into"):
        op.create_index(f"ix_alerts_{column}", "alerts", [column])
    create_table_with_id(
        "alert_deliveries",
        sa.Column("alert_id", sa.Integer(), nullable=False),
        sa.Column("channel_id", sa.Integer(), nullable=False),
        sa.Column("event", sa.String(16), nullable=False),
        sa.Column("pending", sa.Boolean(), nullable=False),
        sa.Column("created_at", utc_datetime(), nullable=False),
        sa.Column("next_attempt_at", utc_datetime(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("claimed_by", sa.String(128), nullable=True),
        sa.Column("claim_token", sa.String(32), nullable=True),
        sa.Column("claimed_until", utc_datetime(), nullable=True),
        sa.Column("delivered_at", utc_datetime(), nullable=True),
        sa.Column("failed_at", utc_datetime(), nullable=True),
        sa.Column("response_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        foreign_key("alert_deliveries", "alert_id", "alerts.id", ondelete="CASCADE"),
        foreign_key("alert_deliveries", "channel_id", "alert_channels.id", ondelete="CASCADE"),
        sa.UniqueConstraint(
            "alert_id", "channel_id", "event", name="uq_alert_deliveries_alert_id_channel_id_event"
        ),
    )
    op.create_index(
        "ix_alert_deliveries_pending_next_attempt_at",
        "alert_deliveries",
        ["pending", "next_attempt_at"],
    )
    op.create_index("ix_alert_deliveries_channel_id", "alert_deliveries", ["channel_id"])
    op.create_index("ix_alert_deliveries_claim_token", "alert_deliveries", ["claim_token"])


def downgrade() -> None:
    op.drop_table("alert_deliveries")
    op.drop_table("alerts")
    op.drop_table("alert_channels")
    op.drop_table("progress_samples")
    op.drop_table("run_progress")
    op.drop_column("jobs", "on_stall")
    op.drop_column("jobs", "stall_after")
