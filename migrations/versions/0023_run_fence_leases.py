"""runs: the latest end of a fence lease granted to the run's driver (a run is never counted as
ended while a lease it holds may still be valid)

Revision ID: 0023
Revises: 0022
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.columns import utc_datetime

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("lease_until", utc_datetime(), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "lease_until")
