"""The audit trail: one row per change made through an API or the CLI (audit_entries)

Revision ID: 0007_audit
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_audit"
down_revision = "0007_access"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_entries",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("org_id", sa.String(32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(400), nullable=False),
        sa.Column("actor_user_id", sa.String(32), nullable=True),
        sa.Column("actor_token_id", sa.String(32), nullable=True),
        sa.Column("action", sa.String(100), nullable=False),
        sa.Column("target", sa.String(1200), nullable=False),
        sa.Column("stack", sa.String(63), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("via", sa.String(20), nullable=False),
        sa.Column("request_id", sa.String(64), nullable=True),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name="fk_audit_entries_org_id_organizations", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["actor_user_id"], ["users.id"], name="fk_audit_entries_actor_user_id_users", ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["actor_token_id"],
            ["api_tokens.id"],
            name="fk_audit_entries_actor_token_id_api_tokens",
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_audit_entries"),
    )
    op.create_index("ix_audit_entries_org", "audit_entries", ["org_id", "id"])
    op.create_index("ix_audit_entries_org_stack", "audit_entries", ["org_id", "stack", "id"])
    op.create_index("ix_audit_entries_org_actor", "audit_entries", ["org_id", "actor", "id"])


def downgrade() -> None:
    op.drop_index("ix_audit_entries_org_actor", table_name="audit_entries")
    op.drop_index("ix_audit_entries_org_stack", table_name="audit_entries")
    op.drop_index("ix_audit_entries_org", table_name="audit_entries")
    op.drop_table("audit_entries")
