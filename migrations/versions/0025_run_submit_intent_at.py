"""runs: when the latest submission of a run was decided (its intent, or its latest reissue): a
run without a submission id is in doubt for a grace after it and is not submitted again before;
and the digests of the tokens its reissues superseded (a late duplicate carrying one is killed)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.columns import utc_datetime

revision = "0025"
down_revision = "0024"


def upgrade() -> None:
    op.add_column("runs", sa.Column("submit_intent_at", utc_datetime(), nullable=True))
    # the runs recorded so far: their intent is their creation (a reissue was not kept)
    op.execute("UPDATE runs SET submit_intent_at = created_at WHERE submit_intent_at IS NULL")
    # the digests of a run's superseded tokens (a late duplicate carrying one is this
    # deployment's): none kept for the runs recorded so far
    op.add_column("runs", sa.Column("superseded_tokens", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "superseded_tokens")
    op.drop_column("runs", "submit_intent_at")
