"""job events name the membership epoch of the claim a node wrote them under (a fenced write's
proof, for audits and the chaos checker); null for events written without a claim (the API's)
"""

from __future__ import annotations

import sqlalchemy as sa

from migrations.columns import added_columns

revision = "0016"
down_revision = "0015"

upgrade, downgrade = added_columns(
    "job_events", sa.Column("owner_epoch", sa.BigInteger(), nullable=True)
)
