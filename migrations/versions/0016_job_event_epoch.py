"""job events name the membership epoch of the claim a node wrote them under (a fenced write's
proof, for audits and the chaos checker); null for events written without a claim (the API's)

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("job_events", sa.Column("owner_epoch", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("job_events", "owner_epoch")
