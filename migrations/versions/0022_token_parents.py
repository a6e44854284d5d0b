"""api tokens: the token that minted each one (``parent_id``), so revoking a token revokes what
it minted
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"


def upgrade() -> None:
    # no foreign key: a parent gone with its identity leaves its children valid until they
    # expire or are revoked themselves (revocation walks the ids, dangling or not)
    op.add_column("api_tokens", sa.Column("parent_id", sa.Integer(), nullable=True))
    op.create_index("ix_api_tokens_parent_id", "api_tokens", ["parent_id"])


def downgrade() -> None:
    op.drop_index("ix_api_tokens_parent_id", table_name="api_tokens")
    op.drop_column("api_tokens", "parent_id")
