"""YARN clusters: a cluster's Hadoop client configuration directory, a business's YARN queue"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"


def upgrade() -> None:
    op.add_column(
        "clusters",
        sa.Column("hadoop_conf_dir", sa.String(1024), nullable=False, server_default=""),
    )
    op.add_column("business_quotas", sa.Column("yarn_queue", sa.String(255), nullable=True))


def downgrade() -> None:
    op.drop_column("business_quotas", "yarn_queue")
    op.drop_column("clusters", "hadoop_conf_dir")
