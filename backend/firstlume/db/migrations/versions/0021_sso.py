"""Single sign-on and roles per folder: api_tokens.kind ("api" or "session": a browser's
session is a row beside the tokens, so one check authenticates both and one watch ends both),
the sign-ins waiting for the identity provider, each organization's mapping of the IdP's
groups, and folder grants.

Revision ID: 0021_sso
Revises: 0020_dependencies
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021_sso"
down_revision = "0020_dependencies"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_tokens") as batch:
        batch.add_column(sa.Column("kind", sa.String(length=10), server_default="api", nullable=False))
    op.create_table(
        "sso_logins",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("state_hash", sa.String(length=64), nullable=False),
        sa.Column("nonce", sa.String(length=128), nullable=False),
        sa.Column("code_verifier", sa.String(length=128), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sso_logins")),
        sa.UniqueConstraint("state_hash", name=op.f("uq_sso_logins_state_hash")),
    )
    op.create_index(op.f("ix_sso_logins_expires_at"), "sso_logins", ["expires_at"])
    op.create_table(
        "sso_mappings",
        sa.Column("org_id", sa.String(length=32), nullable=False),
        sa.Column("groups", sa.JSON(), nullable=False),
        sa.Column("default_role", sa.String(length=20), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_sso_mappings_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("org_id", name=op.f("pk_sso_mappings")),
    )
    op.create_table(
        "folder_grants",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("org_id", sa.String(length=32), nullable=False),
        sa.Column("folder_id", sa.String(length=32), nullable=False),
        sa.Column("principal", sa.String(length=400), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.ForeignKeyConstraint(
            ["folder_id"], ["folders.id"], name=op.f("fk_folder_grants_folder_id_folders"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_folder_grants_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_folder_grants")),
        sa.UniqueConstraint("folder_id", "principal", name=op.f("uq_folder_grants_folder_id_principal")),
    )
    op.create_index(op.f("ix_folder_grants_org_id"), "folder_grants", ["org_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_folder_grants_org_id"), table_name="folder_grants")
    op.drop_table("folder_grants")
    op.drop_table("sso_mappings")
    op.drop_index(op.f("ix_sso_logins_expires_at"), table_name="sso_logins")
    op.drop_table("sso_logins")
    with op.batch_alter_table("api_tokens") as batch:
        batch.drop_column("kind")
