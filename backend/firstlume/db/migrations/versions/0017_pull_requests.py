"""Pull requests: a stack's `pull_requests` field, proposed runs (outside the stack's lock) with
their pull request, and the pull requests seen

Revision ID: 0017_pull_requests
Revises: 0016_storage
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_pull_requests"
down_revision = "0016_storage"
branch_labels = None
depends_on = None

OLD_LOCK = "status IN ('apply_queued', 'applying', 'awaiting_approval', 'planning')"
NEW_LOCK = OLD_LOCK + " AND NOT proposed"


def upgrade() -> None:
    with op.batch_alter_table("stacks") as batch:
        batch.add_column(
            sa.Column("pull_requests", sa.String(10), server_default=sa.text("'off'"), nullable=False)
        )
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("proposed", sa.Boolean(), server_default=sa.false(), nullable=False))
        batch.add_column(sa.Column("trigger_pull_request", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("pull_request_id", sa.String(32), nullable=True))
        batch.drop_index(
            "uq_runs_stack_lock", sqlite_where=sa.text(OLD_LOCK), postgresql_where=sa.text(OLD_LOCK)
        )
        batch.create_index(
            "uq_runs_stack_lock",
            ["stack_id"],
            unique=True,
            sqlite_where=sa.text(NEW_LOCK),
            postgresql_where=sa.text(NEW_LOCK),
        )
    op.create_table(
        "pull_requests",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("org_id", sa.String(32), nullable=False),
        sa.Column("repository", sa.String(2000), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("url", sa.String(2000), nullable=False),
        sa.Column("title", sa.String(1000), nullable=False),
        sa.Column("author", sa.String(400), nullable=False),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("base_branch", sa.String(255), nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("from_fork", sa.Boolean(), nullable=False),
        sa.Column("dialect", sa.String(10), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name="fk_pull_requests_org_id_organizations", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_pull_requests"),
        sa.UniqueConstraint(
            "org_id", "repository", "number", name="uq_pull_requests_org_id_repository_number"
        ),
    )
    op.create_index("ix_pull_requests_org_state", "pull_requests", ["org_id", "state", "updated_at"])


def downgrade() -> None:
    op.drop_index("ix_pull_requests_org_state", table_name="pull_requests")
    op.drop_table("pull_requests")
    with op.batch_alter_table("runs") as batch:
        batch.drop_index(
            "uq_runs_stack_lock", sqlite_where=sa.text(NEW_LOCK), postgresql_where=sa.text(NEW_LOCK)
        )
        batch.create_index(
            "uq_runs_stack_lock",
            ["stack_id"],
            unique=True,
            sqlite_where=sa.text(OLD_LOCK),
            postgresql_where=sa.text(OLD_LOCK),
        )
        batch.drop_column("pull_request_id")
        batch.drop_column("trigger_pull_request")
        batch.drop_column("proposed")
    with op.batch_alter_table("stacks") as batch:
        batch.drop_column("pull_requests")
