"""runs: the latest end of a fence lease granted to the run's driver (a run is never counted as
ended while a lease it holds may still be valid)
"""

from __future__ import annotations

import sqlalchemy as sa

from migrations.columns import added_columns, utc_datetime

revision = "0023"
down_revision = "0022"

upgrade, downgrade = added_columns("runs", sa.Column("lease_until", utc_datetime(), nullable=True))
