"""runs: when the run's pipeline first asked the fence endpoint (whether it fences itself)

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # naive UTC with microseconds, as every time column (scheduler.store.models.UtcDateTime)
    utc = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")
    op.add_column("runs", sa.Column("fence_checked_at", utc, nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "fence_checked_at")
