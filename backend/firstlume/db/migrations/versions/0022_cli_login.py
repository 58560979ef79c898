"""`terraform login`: the authorization codes between the browser's "Allow" and the CLI's
exchange of them for a token (stored hashed, single use, short lived; shared by the replicas).

Revision ID: 0022_cli_login
Revises: 0021_sso
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022_cli_login"
down_revision = "0021_sso"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cli_login_codes",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("code_hash", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.Column("org_id", sa.String(length=32), nullable=False),
        sa.Column("client_id", sa.String(length=100), nullable=False),
        sa.Column("redirect_uri", sa.String(length=200), nullable=False),
        sa.Column("code_challenge", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("token_id", sa.String(length=32), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_cli_login_codes_user_id_users"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_cli_login_codes_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["token_id"],
            ["api_tokens.id"],
            name=op.f("fk_cli_login_codes_token_id_api_tokens"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_cli_login_codes")),
        sa.UniqueConstraint("code_hash", name=op.f("uq_cli_login_codes_code_hash")),
    )
    op.create_index(op.f("ix_cli_login_codes_expires_at"), "cli_login_codes", ["expires_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_cli_login_codes_expires_at"), table_name="cli_login_codes")
    op.drop_table("cli_login_codes")
