"""job revisions, graceful stops and upgrades: every spec change kept as a revision; the grace a
stop waits and a pending upgrade's rollback deadline on jobs; a run's drain deadline and the
batch its pipeline stopped at
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.columns import create_table_with_id, foreign_key, utc_datetime

revision = "0017"
down_revision = "0016"

_SPEC = (
    "entrypoint",
    "args",
    "conf",
    "checkpoint_location",
    "team",
    "business",
    "priority",
    "replicate",
    "labels",
    "stall_after",
    "on_stall",
)
_TYPES: dict[str, sa.types.TypeEngine[object]] = {
    "args": sa.JSON(),
    "conf": sa.JSON(),
    "labels": sa.JSON(),
    "replicate": sa.Boolean(),
    "stall_after": sa.Float(),
}


def upgrade() -> None:
    op.add_column("jobs", sa.Column("grace_seconds", sa.Float(), nullable=True))
    op.add_column("jobs", sa.Column("upgrade_deadline", utc_datetime(), nullable=True))
    op.add_column("jobs", sa.Column("upgrade_from", sa.Integer(), nullable=True))
    op.add_column("runs", sa.Column("drain_deadline", utc_datetime(), nullable=True))
    op.add_column("runs", sa.Column("stop_batch", sa.BigInteger(), nullable=True))
    create_table_with_id(
        "job_revisions",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("cause", sa.String(300), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("rollback_of", sa.Integer(), nullable=True),
        sa.Column("created_at", utc_datetime(), nullable=False),
        foreign_key("job_revisions", "job_id", "jobs.id", ondelete="CASCADE"),
        sa.UniqueConstraint("job_id", "revision", name="uq_job_revisions_job_id_revision"),
    )
    # every existing job starts its history with its current spec, at its current spec version
    jobs = sa.table(
        "jobs",
        sa.column("id", sa.Integer()),
        sa.column("spec_version", sa.Integer()),
        sa.column("updated_at", utc_datetime()),
        *(sa.column(name, _TYPES.get(name, sa.String())) for name in _SPEC),
    )
    revisions = sa.table(
        "job_revisions",
        sa.column("job_id", sa.Integer()),
        sa.column("revision", sa.Integer()),
        sa.column("spec", sa.JSON()),
        sa.column("cause", sa.String()),
        sa.column("message", sa.Text()),
        sa.column("created_at", utc_datetime()),
    )
    bind = op.get_bind()
    rows = [
        {
            "job_id": row.id,
            "revision": row.spec_version,
            "spec": {name: getattr(row, name) for name in _SPEC},
            "cause": "migration",
            "message": "the spec when revisions began to be kept",
            "created_at": row.updated_at,
        }
        for row in bind.execute(sa.select(jobs))
    ]
    if rows:
        op.bulk_insert(revisions, rows)


def downgrade() -> None:
    op.drop_table("job_revisions")
    op.drop_column("runs", "stop_batch")
    op.drop_column("runs", "drain_deadline")
    op.drop_column("jobs", "upgrade_from")
    op.drop_column("jobs", "upgrade_deadline")
    op.drop_column("jobs", "grace_seconds")
