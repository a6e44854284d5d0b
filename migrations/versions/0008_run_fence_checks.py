"""runs: when the run's pipeline first asked the fence endpoint (whether it fences itself)

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.columns import utc_datetime

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("fence_checked_at", utc_datetime(), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "fence_checked_at")
