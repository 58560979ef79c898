"""runs.ended_by (who discarded or canceled a run) and log_chunks.created_at (when each chunk of a
log arrived: the log viewer's per-line time)

Revision ID: 0007_ui2
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_ui2"
down_revision = "0007_audit"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("ended_by", sa.String(length=320), nullable=True))
    with op.batch_alter_table("log_chunks") as batch:
        batch.add_column(sa.Column("created_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("log_chunks") as batch:
        batch.drop_column("created_at")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("ended_by")
