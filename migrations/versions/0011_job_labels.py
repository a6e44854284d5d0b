"""jobs: labels (a JSON map on the job, and job_labels for selectors); keyset-page indexes

Labels are key/value pairs (``scheduler.decisions.labels``). The job's ``labels`` column is what
reads return; ``job_labels`` holds the same pairs, one row each, so that a selector (``env=prod``,
``!canary``) is an indexed EXISTS in SQL. The two indexes on ``jobs`` serve the API's keyset pages
sorted by state and by last change (``scheduler.core.paging``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.columns import foreign_key, name_type

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    op.add_column("jobs", sa.Column("labels", sa.JSON(), nullable=True))
    op.create_table(
        "job_labels",
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("key", name_type(317), nullable=False),
        sa.Column("value", name_type(63), nullable=False),
        foreign_key("job_labels", "job_id", "jobs.id", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "key", name=op.f("pk_job_labels")),
    )
    op.create_index("ix_job_labels_key_value", "job_labels", ["key", "value"])
    op.create_index("ix_jobs_state_name", "jobs", ["state", "name"])
    op.create_index("ix_jobs_updated_at_name", "jobs", ["updated_at", "name"])


def downgrade() -> None:
    op.drop_index("ix_jobs_updated_at_name", table_name="jobs")
    op.drop_index("ix_jobs_state_name", table_name="jobs")
    op.drop_index("ix_job_labels_key_value", table_name="job_labels")
    op.drop_table("job_labels")
    op.drop_column("jobs", "labels")
