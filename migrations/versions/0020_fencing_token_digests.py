"""runs keep the SHA-256 of their fencing tokens, never the tokens (``runs.fencing_token`` holds
64 hex digits now; a token was 32)

A driver already running keeps working: it presents its token and the fence check hashes it.
There is no way back: a downgrade leaves the digests in place, and the drivers of those runs are
then told they are superseded at their next check (their jobs are restarted by their owners).
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"

#: runs hashed per statement batch
BATCH = 1000


def upgrade() -> None:
    bind = op.get_bind()
    runs = bind.execute(
        sa.text("SELECT id, fencing_token FROM runs WHERE LENGTH(fencing_token) <> 64")
    ).all()
    for start in range(0, len(runs), BATCH):
        bind.execute(
            sa.text("UPDATE runs SET fencing_token = :digest WHERE id = :id"),
            [
                {"id": run_id, "digest": hashlib.sha256(token.encode("utf-8")).hexdigest()}
                for run_id, token in runs[start : start + BATCH]
            ],
        )


def downgrade() -> None:
    pass  # a digest cannot be turned back into its token
