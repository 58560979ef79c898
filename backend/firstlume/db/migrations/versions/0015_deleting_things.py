"""Deleting stacks: stacks.deleted_at, deleted_by and deleted_slug. A deleted stack is kept, with
its runs and state versions, for the retention period (readable by admins), under the slug
"~<id>", so that its own slug is free at once; columns are only added (on SQLite a table rebuild
of `stacks` would cascade into its runs while foreign keys are on).

Revision ID: 0015_deleting_things
Revises: 0014_runs_correctness
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_deleting_things"
down_revision = "0014_runs_correctness"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("stacks") as batch:
        batch.add_column(sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("deleted_by", sa.String(length=320), nullable=True))
        batch.add_column(sa.Column("deleted_slug", sa.String(length=63), nullable=True))


def downgrade() -> None:
    # The schema before this one cannot tell a deleted stack from a live one.
    op.execute("DELETE FROM stacks WHERE deleted_at IS NOT NULL")
    with op.batch_alter_table("stacks") as batch:
        batch.drop_column("deleted_slug")
        batch.drop_column("deleted_by")
        batch.drop_column("deleted_at")
