"""clusters catalog: capacity limits and versions of clusters and groups"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"

CLUSTER_COLUMNS = (("max_running_apps", "0"), ("max_cores", "0"), ("version", "1"))


def upgrade() -> None:
    # Plain ADD COLUMN with a server default: existing rows get the default, and SQLite needs no
    # table rebuild (a rebuild would drop a table other tables' foreign keys point at).
    for name, default in CLUSTER_COLUMNS:
        op.add_column(
            "clusters", sa.Column(name, sa.Integer(), server_default=default, nullable=False)
        )
    op.add_column(
        "scheduling_groups",
        sa.Column("version", sa.Integer(), server_default="1", nullable=False),
    )


def downgrade() -> None:
    # SQLite 3.35+ and MariaDB drop a column in place.
    op.drop_column("scheduling_groups", "version")
    for name, _ in reversed(CLUSTER_COLUMNS):
        op.drop_column("clusters", name)
