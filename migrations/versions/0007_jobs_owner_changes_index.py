"""jobs: an index for a reconciler's incremental reads (its own jobs changed since a time)"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"

INDEX = "ix_jobs_owner_owner_epoch_updated_at"


def upgrade() -> None:
    # WHERE owner = :node AND owner_epoch = :epoch AND updated_at >= :since (and owner IS NULL
    # for the claim of new jobs)
    op.create_index(INDEX, "jobs", ["owner", "owner_epoch", "updated_at"])


def downgrade() -> None:
    op.drop_index(INDEX, table_name="jobs")
