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


SETTING_TABLES = ("organizations", "folders", "stacks")


def upgrade() -> None:
    for table in SETTING_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("pull_requests_from_forks", sa.String(30), nullable=True))
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
        sa.Column("comment_id", sa.String(100), nullable=True),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name="fk_pull_requests_org_id_organizations", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_pull_requests"),
        sa.UniqueConstraint(
            "org_id", "repository", "number", name="uq_pull_requests_org_id_repository_number"
        ),
    )
    op.create_index("ix_pull_requests_org_state", "pull_requests", ["org_id", "state", "updated_at"])
    op.create_table(
        "git_hosts",
        sa.Column("org_id", sa.String(32), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("api_url", sa.String(2000), nullable=False),
        sa.Column("token_sealed", sa.LargeBinary(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name="fk_git_hosts_org_id_organizations", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("org_id", "host", name="pk_git_hosts"),
    )
    op.create_table(
        "git_feedback",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("org_id", sa.String(32), nullable=False),
        sa.Column("pull_request_id", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(10), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("leased_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("given_up_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts_log", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name="fk_git_feedback_org_id_organizations", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["pull_request_id"],
            ["pull_requests.id"],
            name="fk_git_feedback_pull_request_id_pull_requests",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_git_feedback"),
    )
    op.create_index("ix_git_feedback_due", "git_feedback", ["delivered_at", "given_up_at", "next_attempt_at"])


def downgrade() -> None:
    op.drop_index("ix_git_feedback_due", table_name="git_feedback")
    op.drop_table("git_feedback")
    op.drop_table("git_hosts")
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
    for table in SETTING_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("pull_requests_from_forks")
