"""jobs record the first directory of their checkpoint's path under its storage root (its
*area*: the job's own name unless a platform admin placed it elsewhere), indexed, so a new
checkpoint location is checked against the jobs that may overlap it with one lookup
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.columns import name_type

revision = "0019"
down_revision = "0018"


def _area(location: str, roots: list[str]) -> str:
    """The first directory of a stored (normalised) location under the root it lies in."""
    for root in roots:
        prefix = root.rstrip("/") + "/"
        if location.startswith(prefix) and len(location) > len(prefix):
            return location[len(prefix) :].split("/", 1)[0][:255]
    return ""


def upgrade() -> None:
    op.add_column(
        "jobs", sa.Column("checkpoint_area", name_type(255), nullable=False, server_default="")
    )
    bind = op.get_bind()
    bind.execute(sa.text("UPDATE jobs SET checkpoint_area = name WHERE checkpoint_location = ''"))
    roots = list(bind.execute(sa.text("SELECT storage_root FROM clusters")).scalars())
    explicit = bind.execute(
        sa.text("SELECT id, checkpoint_location FROM jobs WHERE checkpoint_location <> ''")
    ).all()
    for job_id, location in explicit:
        bind.execute(
            sa.text("UPDATE jobs SET checkpoint_area = :area WHERE id = :id"),
            {"area": _area(location, roots), "id": job_id},
        )
    op.create_index("ix_jobs_checkpoint_area", "jobs", ["checkpoint_area"])


def downgrade() -> None:
    op.drop_index("ix_jobs_checkpoint_area", table_name="jobs")
    op.drop_column("jobs", "checkpoint_area")
