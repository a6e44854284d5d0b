"""identities: teams, identities, role bindings, API tokens; audit before/after; artifact roots"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.columns import create_table_with_id, foreign_key, name_type, utc_datetime

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    op.create_table(
        "teams",
        sa.Column("name", name_type(128), nullable=False),
        sa.Column("description", sa.String(length=512), nullable=False),
        sa.Column("created_at", utc_datetime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_teams")),
    )
    op.create_table(
        "identities",
        sa.Column("name", name_type(128), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("disabled", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("created_at", utc_datetime(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_identities")),
    )
    create_table_with_id(
        "role_bindings",
        sa.Column("identity", name_type(128), nullable=False),
        # a team name, or "*" for every team (so no foreign key)
        sa.Column("team", name_type(128), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("created_at", utc_datetime(), nullable=False),
        foreign_key("role_bindings", "identity", "identities.name", ondelete="CASCADE"),
        sa.UniqueConstraint("identity", "team", name=op.f("uq_role_bindings_identity_team")),
    )
    op.create_index(op.f("ix_role_bindings_team"), "role_bindings", ["team"])
    create_table_with_id(
        "api_tokens",
        sa.Column("identity", name_type(128), nullable=False),
        sa.Column("lookup", sa.String(length=16), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("scopes", sa.String(length=64), nullable=False),
        sa.Column("description", sa.String(length=256), nullable=False),
        sa.Column("created_by", sa.String(length=160), nullable=False),
        sa.Column("created_at", utc_datetime(), nullable=False),
        sa.Column("expires_at", utc_datetime(), nullable=True),
        sa.Column("revoked_at", utc_datetime(), nullable=True),
        foreign_key("api_tokens", "identity", "identities.name", ondelete="CASCADE"),
        sa.UniqueConstraint("digest", name=op.f("uq_api_tokens_digest")),
    )
    op.create_index(op.f("ix_api_tokens_identity"), "api_tokens", ["identity"])
    op.add_column(
        "audit_log", sa.Column("team", sa.String(length=128), server_default="", nullable=False)
    )
    op.add_column("audit_log", sa.Column("before", sa.JSON(), nullable=True))
    op.add_column("audit_log", sa.Column("after", sa.JSON(), nullable=True))
    op.create_index(op.f("ix_audit_log_team"), "audit_log", ["team"])
    op.add_column("clusters", sa.Column("artifact_roots", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("clusters", "artifact_roots")
    op.drop_index(op.f("ix_audit_log_team"), table_name="audit_log")
    op.drop_column("audit_log", "after")
    op.drop_column("audit_log", "before")
    op.drop_column("audit_log", "team")
    # dropping a table drops its indexes (MariaDB refuses to drop one a foreign key needs)
    op.drop_table("api_tokens")
    op.drop_table("role_bindings")
    op.drop_table("identities")
    op.drop_table("teams")
