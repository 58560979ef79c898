"""Roles and groups of members, expiring tokens with their last use, and the approval rules a run
read (approvers, forbid_self_approval) with their origins. Existing members become admins: before
roles, every member could do everything.

Revision ID: 0007_access
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_access"
down_revision = "0007_drift"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("memberships") as batch:
        batch.add_column(sa.Column("groups", sa.JSON(), server_default=sa.text("'[]'"), nullable=False))
    op.execute("UPDATE memberships SET role = 'admin'")
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("approvers", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("approvers_origin", sa.String(1100), nullable=True))
        batch.add_column(sa.Column("forbid_self_approval", sa.Boolean(), nullable=True))
        batch.add_column(sa.Column("forbid_self_approval_origin", sa.String(1100), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        for column in (
            "forbid_self_approval_origin",
            "forbid_self_approval",
            "approvers_origin",
            "approvers",
        ):
            batch.drop_column(column)
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("last_used_at")
        batch.drop_column("expires_at")
    with op.batch_alter_table("memberships") as batch:
        batch.drop_column("groups")
    op.execute("UPDATE memberships SET role = 'member'")
