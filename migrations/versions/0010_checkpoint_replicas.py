"""checkpoint replication: jobs.replicate and the checkpoint_replicas table (one row per job)"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.columns import foreign_key, name_type, utc_datetime

revision = "0010"
down_revision = "0009"


def upgrade() -> None:
    # plain ADD COLUMN: no table rebuild on SQLite (runs and job_events point at jobs)
    op.add_column("jobs", sa.Column("replicate", sa.Boolean(), nullable=True))
    op.create_table(
        "checkpoint_replicas",
        sa.Column("job_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("source_cluster", name_type(), nullable=False),
        sa.Column("source_location", sa.String(1024), nullable=False),
        sa.Column("target_cluster", name_type(), nullable=False),
        sa.Column("location", sa.String(1024), nullable=False),
        sa.Column("source_batch", sa.BigInteger(), nullable=True),
        sa.Column("source_batch_at", utc_datetime(), nullable=True),
        sa.Column("replica_batch", sa.BigInteger(), nullable=True),
        sa.Column("replica_batch_at", utc_datetime(), nullable=True),
        sa.Column("lag_batches", sa.BigInteger(), nullable=False),
        sa.Column("oldest_missing_at", utc_datetime(), nullable=True),
        sa.Column("observed_at", utc_datetime(), nullable=True),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("error_since", utc_datetime(), nullable=True),
        sa.Column("files_copied", sa.BigInteger(), nullable=False),
        sa.Column("bytes_copied", sa.BigInteger(), nullable=False),
        sa.Column("last_copy_at", utc_datetime(), nullable=True),
        sa.Column("last_copy_files", sa.Integer(), nullable=False),
        sa.Column("last_copy_bytes", sa.BigInteger(), nullable=False),
        sa.Column("last_copy_seconds", sa.Float(), nullable=False),
        sa.Column("node_id", sa.String(128), nullable=False),
        sa.Column("lease_holder", sa.String(160), nullable=True),
        sa.Column("lease_until", utc_datetime(), nullable=True),
        sa.Column("created_at", utc_datetime(), nullable=False),
        sa.Column("updated_at", utc_datetime(), nullable=False),
        foreign_key("checkpoint_replicas", "job_id", "jobs.id", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", name="pk_checkpoint_replicas"),
    )
    op.create_index(
        "ix_checkpoint_replicas_target_cluster", "checkpoint_replicas", ["target_cluster"]
    )


def downgrade() -> None:
    op.drop_table("checkpoint_replicas")
    op.drop_column("jobs", "replicate")
