"""resource_changes: an index for counting and paging a run's changes group by group

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("resource_changes", schema=None) as batch_op:
        batch_op.create_index(
            "ix_resource_changes_run_action_pos", ["run_id", "action", "position"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("resource_changes", schema=None) as batch_op:
        batch_op.drop_index("ix_resource_changes_run_action_pos")
