"""runs: whether a run's end counts against the job's restart budget"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.add_column(
        "runs",
        sa.Column("counts_as_failure", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    # before this flag, every run that ended on its own counted
    op.execute("UPDATE runs SET counts_as_failure = 1 WHERE state IN ('FAILED', 'FINISHED')")


def downgrade() -> None:
    op.drop_column("runs", "counts_as_failure")
