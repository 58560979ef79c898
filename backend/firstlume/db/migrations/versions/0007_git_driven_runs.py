"""Git-driven runs: a stack's trigger and last seen head, the organization's sealed webhook
secret, the delivery log, and the poll lease

Revision ID: 0007_git
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_git"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("stacks") as batch:
        batch.add_column(
            sa.Column("trigger", sa.String(10), server_default=sa.text("'manual'"), nullable=False)
        )
        batch.add_column(sa.Column("git_seen_commit", sa.String(64), nullable=True))
    op.create_table(
        "git_webhook_secrets",
        sa.Column("org_id", sa.String(32), nullable=False),
        sa.Column("secret_sealed", sa.LargeBinary(), nullable=False),
        sa.Column("rotated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name="fk_git_webhook_secrets_org_id_organizations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("org_id", name="pk_git_webhook_secrets"),
    )
    op.create_table(
        "git_deliveries",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("org_id", sa.String(32), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(30), nullable=False),
        sa.Column("delivery", sa.String(100), nullable=True),
        sa.Column("accepted_delivery", sa.String(100), nullable=True),
        sa.Column("event", sa.String(100), nullable=True),
        sa.Column("repository", sa.String(2000), nullable=True),
        sa.Column("ref", sa.String(300), nullable=True),
        sa.Column("head", sa.String(64), nullable=True),
        sa.Column("http_status", sa.Integer(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name="fk_git_deliveries_org_id_organizations",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_git_deliveries"),
        sa.UniqueConstraint("org_id", "accepted_delivery", name="uq_git_deliveries_org_id_accepted_delivery"),
    )
    op.create_index("ix_git_deliveries_org_id", "git_deliveries", ["org_id", "id"])
    op.create_table(
        "git_poll_lease",
        sa.Column("name", sa.String(50), nullable=False),
        sa.Column("next_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("holder", sa.String(100), nullable=True),
        sa.PrimaryKeyConstraint("name", name="pk_git_poll_lease"),
    )


def downgrade() -> None:
    op.drop_table("git_poll_lease")
    op.drop_index("ix_git_deliveries_org_id", table_name="git_deliveries")
    op.drop_table("git_deliveries")
    op.drop_table("git_webhook_secrets")
    with op.batch_alter_table("stacks") as batch:
        batch.drop_column("git_seen_commit")
        batch.drop_column("trigger")
