"""Inherited settings drift_schedule, approvers and forbid_self_approval at every level; what
triggered each run (a person, a push, the drift schedule)

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

LEVELS = ("organizations", "folders", "stacks")


def upgrade() -> None:
    for table in LEVELS:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("drift_schedule", sa.String(200), nullable=True))
            batch.add_column(sa.Column("approvers", sa.JSON(), nullable=True))
            batch.add_column(sa.Column("forbid_self_approval", sa.Boolean(), nullable=True))
    with op.batch_alter_table("runs") as batch:
        batch.add_column(
            sa.Column("trigger_kind", sa.String(20), server_default=sa.text("'manual'"), nullable=False)
        )
        batch.add_column(sa.Column("trigger_commit", sa.String(64), nullable=True))
        batch.add_column(sa.Column("trigger_delivery", sa.String(100), nullable=True))
        batch.add_column(sa.Column("trigger_actor", sa.String(400), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        for column in ("trigger_actor", "trigger_delivery", "trigger_commit", "trigger_kind"):
            batch.drop_column(column)
    for table in LEVELS:
        with op.batch_alter_table(table) as batch:
            for column in ("forbid_self_approval", "approvers", "drift_schedule"):
                batch.drop_column(column)
