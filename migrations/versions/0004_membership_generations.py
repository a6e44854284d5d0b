"""membership generations: epochs that survive a ZooKeeper whose data was wiped"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.columns import name_type, utc_datetime

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    # No rows: the first node that reads a group's members znode records its incarnation under
    # the generation that keeps the group's stored epochs claimable (0 when ZooKeeper kept its
    # data, so epochs stay what they were; see scheduler.decisions.epochs.generation_for).
    op.create_table(
        "membership_generations",
        sa.Column(
            "group_name",
            name_type(128),
            nullable=False,
        ),
        sa.Column("generation", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("czxid", sa.BigInteger(), nullable=False),
        sa.Column("ctime", sa.BigInteger(), nullable=False),
        sa.Column("recorded_by", sa.String(length=128), nullable=False),
        sa.Column(
            "recorded_at",
            utc_datetime(),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("group_name", "generation", name=op.f("pk_membership_generations")),
        sa.UniqueConstraint(
            "group_name",
            "czxid",
            "ctime",
            name=op.f("uq_membership_generations_group_name_czxid_ctime"),
        ),
    )


def downgrade() -> None:
    op.drop_table("membership_generations")
