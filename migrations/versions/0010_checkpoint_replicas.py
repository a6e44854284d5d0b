"""checkpoint replication: jobs.replicate and the checkpoint_replicas table (one row per job)

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def _when() -> sa.types.TypeEngine[object]:
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def _name() -> sa.types.TypeEngine[str]:
    return sa.String(128).with_variant(
        mysql.VARCHAR(128, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )


def upgrade() -> None:
    # plain ADD COLUMN: no table rebuild on SQLite (runs and job_events point at jobs)
    op.add_column("jobs", sa.Column("replicate", sa.Boolean(), nullable=True))
    op.create_table(
        "checkpoint_replicas",
        sa.Column("job_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("source_cluster", _name(), nullable=False),
        sa.Column("source_location", sa.String(1024), nullable=False),
        sa.Column("target_cluster", _name(), nullable=False),
        sa.Column("location", sa.String(1024), nullable=False),
        sa.Column("source_batch", sa.BigInteger(), nullable=True),
        sa.Column("source_batch_at", _when(), nullable=True),
        sa.Column("replica_batch", sa.BigInteger(), nullable=True),
        sa.Column("replica_batch_at", _when(), nullable=True),
        sa.Column("lag_batches", sa.BigInteger(), nullable=False),
        sa.Column("oldest_missing_at", _when(), nullable=True),
        sa.Column("observed_at", _when(), nullable=True),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("error_since", _when(), nullable=True),
        sa.Column("files_copied", sa.BigInteger(), nullable=False),
        sa.Column("bytes_copied", sa.BigInteger(), nullable=False),
        sa.Column("last_copy_at", _when(), nullable=True),
        sa.Column("last_copy_files", sa.Integer(), nullable=False),
        sa.Column("last_copy_bytes", sa.BigInteger(), nullable=False),
        sa.Column("last_copy_seconds", sa.Float(), nullable=False),
        sa.Column("node_id", sa.String(128), nullable=False),
        sa.Column("lease_holder", sa.String(160), nullable=True),
        sa.Column("lease_until", _when(), nullable=True),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("updated_at", _when(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name="fk_checkpoint_replicas_job_id_jobs",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", name="pk_checkpoint_replicas"),
    )
    op.create_index(
        "ix_checkpoint_replicas_target_cluster", "checkpoint_replicas", ["target_cluster"]
    )


def downgrade() -> None:
    op.drop_table("checkpoint_replicas")
    op.drop_column("jobs", "replicate")
