"""The comment a person gives with the approval or discard that decides a run (runs.comment):
shown on the run, carried in its notifications, and recorded in the audit trail.

Revision ID: 0023_run_comments
Revises: 0021_sso
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023_run_comments"
down_revision = "0022_cli_login"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("comment", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("comment")
