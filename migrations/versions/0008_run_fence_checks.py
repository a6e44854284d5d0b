"""runs: when the run's pipeline first asked the fence endpoint (whether it fences itself)"""

from __future__ import annotations

import sqlalchemy as sa

from migrations.columns import added_columns, utc_datetime

revision = "0008"
down_revision = "0007"

upgrade, downgrade = added_columns(
    "runs", sa.Column("fence_checked_at", utc_datetime(), nullable=True)
)
