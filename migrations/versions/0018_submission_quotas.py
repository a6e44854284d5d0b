"""submission gate: business quotas with their shared token buckets (and dedicated groups), the
queue of jobs the gate holds back (position and reason)

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def _name(length: int = 128) -> sa.types.TypeEngine[str]:
    return sa.String(length).with_variant(
        mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"), "mysql", "mariadb"
    )


def _when() -> sa.types.TypeEngine[object]:
    # naive UTC with microseconds, as every time column (scheduler.store.models.UtcDateTime)
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def upgrade() -> None:
    op.create_table(
        "business_quotas",
        sa.Column("business", _name(), nullable=False),
        sa.Column("rate", sa.Float(), nullable=True),
        sa.Column("burst", sa.Integer(), nullable=False),
        sa.Column("dedicated_group", _name(), nullable=True),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("refilled_at", _when(), nullable=False),
        sa.Column("bucket_version", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_by", sa.String(160), nullable=False),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("updated_at", _when(), nullable=False),
        sa.ForeignKeyConstraint(
            ["dedicated_group"],
            ["scheduling_groups.name"],
            name="fk_business_quotas_dedicated_group_scheduling_groups",
        ),
        sa.PrimaryKeyConstraint("business", name="pk_business_quotas"),
    )
    op.create_index("ix_business_quotas_dedicated_group", "business_quotas", ["dedicated_group"])
    op.create_table(
        "submission_queue",
        sa.Column("job_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("node_id", sa.String(128), nullable=False),
        sa.Column("since", _when(), nullable=False),
        sa.Column("updated_at", _when(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name="fk_submission_queue_job_id_jobs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", name="pk_submission_queue"),
    )


def downgrade() -> None:
    op.drop_table("submission_queue")
    op.drop_table("business_quotas")
