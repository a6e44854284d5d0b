"""operations: the team an operation acts for (bulk operations are team-scoped; NULL: several
teams or the platform, e.g. a failover)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"


def upgrade() -> None:
    op.add_column("operations", sa.Column("team", sa.String(128), nullable=True))
    op.create_index("ix_operations_team_id", "operations", ["team", "id"])


def downgrade() -> None:
    op.drop_index("ix_operations_team_id", table_name="operations")
    op.drop_column("operations", "team")
