"""auto_failover_events: what automatic failover decided (created, held and why) and what
operators did to it (paused, resumed, a cluster's cool-down cleared)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.columns import create_table_with_id, name_type, utc_datetime

revision = "0024"
down_revision = "0023"


def upgrade() -> None:
    create_table_with_id(
        "auto_failover_events",
        sa.Column("at", utc_datetime(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("code", sa.String(32), nullable=False),
        sa.Column("group_name", name_type(), nullable=True),
        sa.Column("cluster", name_type(), nullable=True),
        sa.Column("target", name_type(), nullable=True),
        sa.Column("incident", sa.String(300), nullable=True),
        sa.Column("operation_id", sa.Integer(), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("actor", sa.String(160), nullable=False),
        sa.Column("node_id", sa.String(128), nullable=False),
    )
    op.create_index("ix_auto_failover_events_kind_id", "auto_failover_events", ["kind", "id"])
    op.create_index(
        "ix_auto_failover_events_group_cluster_id",
        "auto_failover_events",
        ["group_name", "cluster", "id"],
    )


def downgrade() -> None:
    op.drop_index("ix_auto_failover_events_group_cluster_id", table_name="auto_failover_events")
    op.drop_index("ix_auto_failover_events_kind_id", table_name="auto_failover_events")
    op.drop_table("auto_failover_events")
