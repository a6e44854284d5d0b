"""idempotency_keys: clients' Idempotency-Key headers and the first answer to each"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import mysql

from migrations.columns import create_table_with_id, name_type, utc_datetime

revision = "0012"
down_revision = "0011"


def upgrade() -> None:
    create_table_with_id(
        "idempotency_keys",
        sa.Column("subject", name_type(200), nullable=False),
        sa.Column("key", name_type(255), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("operation", sa.String(length=300), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("holder", sa.String(length=32), nullable=False),
        sa.Column("locked_until", utc_datetime(), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("response_headers", sa.JSON(), nullable=True),
        sa.Column(
            "response_body",
            sa.Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb"),
            nullable=True,
        ),
        sa.Column("created_at", utc_datetime(), nullable=False),
        sa.Column("expires_at", utc_datetime(), nullable=False),
        sa.UniqueConstraint("subject", "key", name=op.f("uq_idempotency_keys_subject_key")),
    )
    op.create_index(
        op.f("ix_idempotency_keys_expires_at"), "idempotency_keys", ["expires_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_idempotency_keys_expires_at"), table_name="idempotency_keys")
    op.drop_table("idempotency_keys")
