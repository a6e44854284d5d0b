"""submission gate: business quotas with their shared token buckets (and dedicated groups), the
queue of jobs the gate holds back (position and reason)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.columns import foreign_key, name_type, utc_datetime

revision = "0018"
down_revision = "0017"


def upgrade() -> None:
    op.create_table(
        "business_quotas",
        sa.Column("business", name_type(), nullable=False),
        sa.Column("rate", sa.Float(), nullable=True),
        sa.Column("burst", sa.Integer(), nullable=False),
        sa.Column("dedicated_group", name_type(), nullable=True),
        sa.Column("tokens", sa.Float(), nullable=False),
        sa.Column("refilled_at", utc_datetime(), nullable=False),
        sa.Column("bucket_version", sa.Integer(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_by", sa.String(160), nullable=False),
        sa.Column("created_at", utc_datetime(), nullable=False),
        sa.Column("updated_at", utc_datetime(), nullable=False),
        foreign_key("business_quotas", "dedicated_group", "scheduling_groups.name"),
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
        sa.Column("since", utc_datetime(), nullable=False),
        sa.Column("updated_at", utc_datetime(), nullable=False),
        foreign_key("submission_queue", "job_id", "jobs.id", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", name="pk_submission_queue"),
    )


def downgrade() -> None:
    op.drop_table("submission_queue")
    op.drop_table("business_quotas")
