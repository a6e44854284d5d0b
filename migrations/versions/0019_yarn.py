"""YARN clusters: a cluster's Hadoop client configuration directory, a business's YARN queue

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("clusters") as batch:
        batch.add_column(
            sa.Column("hadoop_conf_dir", sa.String(1024), nullable=False, server_default="")
        )
    with op.batch_alter_table("business_quotas") as batch:
        batch.add_column(sa.Column("yarn_queue", sa.String(255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("business_quotas") as batch:
        batch.drop_column("yarn_queue")
    with op.batch_alter_table("clusters") as batch:
        batch.drop_column("hadoop_conf_dir")
