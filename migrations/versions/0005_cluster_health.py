"""cluster health: the monitor's votes, health transitions with evidence, the state's reason"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.columns import create_table_with_id, foreign_key, name_type, utc_datetime

revision = "0005"
down_revision = "0004"


def upgrade() -> None:
    # plain ADD COLUMN (no table rebuild on SQLite: other tables' foreign keys point at clusters)
    op.add_column(
        "clusters", sa.Column("health_reason", sa.Text(), nullable=False, server_default="")
    )
    op.add_column("clusters", sa.Column("health_since", utc_datetime(), nullable=True))
    create_table_with_id(
        "cluster_votes",
        sa.Column("cluster_name", name_type(), nullable=False),
        sa.Column("node_id", sa.String(128), nullable=False),
        sa.Column("at", utc_datetime(), nullable=False),
        sa.Column("ok", sa.Boolean(), nullable=False),
        sa.Column("latency_s", sa.Float(), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        foreign_key("cluster_votes", "cluster_name", "clusters.name"),
    )
    op.create_index("ix_cluster_votes_cluster_name_at", "cluster_votes", ["cluster_name", "at"])
    create_table_with_id(
        "cluster_health_events",
        sa.Column("cluster_name", name_type(), nullable=False),
        sa.Column("at", utc_datetime(), nullable=False),
        sa.Column("from_state", sa.String(32), nullable=False),
        sa.Column("to_state", sa.String(32), nullable=False),
        sa.Column("decided_by", sa.String(16), nullable=False),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("evidence", sa.JSON(), nullable=False),
        sa.Column("node_id", sa.String(128), nullable=False),
        foreign_key("cluster_health_events", "cluster_name", "clusters.name"),
    )
    op.create_index(
        "ix_cluster_health_events_cluster_name", "cluster_health_events", ["cluster_name"]
    )


def downgrade() -> None:
    # dropping a table drops its indexes (MariaDB refuses to drop one a foreign key needs)
    op.drop_table("cluster_health_events")
    op.drop_table("cluster_votes")
    op.drop_column("clusters", "health_since")
    op.drop_column("clusters", "health_reason")
