"""jobs: spec_version, the spec's own version (what If-Match protects)

Until now a job's ETag was its row ``version``, which the reconciler also moves on every state
change: an operator's PATCH with the ETag just read failed with 412 while the job was starting.
``spec_version`` moves only with spec changes; ``version`` stays the row's concurrency counter.
Existing rows start at their current ``version``, so ETags handed out before the upgrade stay good.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    # plain ADD COLUMN with a server default: SQLite needs no table rebuild (a rebuild would drop
    # a table that runs and job_events point at)
    op.add_column(
        "jobs",
        sa.Column("spec_version", sa.Integer(), server_default="1", nullable=False),
    )
    op.execute("UPDATE jobs SET spec_version = version")


def downgrade() -> None:
    # SQLite 3.35+ and MariaDB drop a column in place
    op.drop_column("jobs", "spec_version")
