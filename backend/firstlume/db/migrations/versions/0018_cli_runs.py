"""configuration_versions, cli_runs and stack_tags: the Terraform CLI as a client (a `cloud` block). The code
`terraform plan` uploads is kept sealed, bound to its id, as long as its run.

Revision ID: 0018_cli_runs
Revises: 0017_pull_requests
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_cli_runs"
down_revision = "0017_pull_requests"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "configuration_versions",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("org_id", sa.String(32), nullable=False),
        sa.Column("stack_id", sa.String(32), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("speculative", sa.Boolean(), nullable=False),
        sa.Column("upload_secret_hash", sa.String(64), nullable=False),
        sa.Column("archive_sealed", sa.LargeBinary(), nullable=True),
        sa.Column("archive_bytes", sa.BigInteger(), nullable=False),
        sa.Column("files", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by_id", sa.String(32), nullable=True),
        sa.Column("uploaded_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_configuration_versions_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["stack_id"],
            ["stacks.id"],
            name=op.f("fk_configuration_versions_stack_id_stacks"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["created_by_id"],
            ["users.id"],
            name=op.f("fk_configuration_versions_created_by_id_users"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_configuration_versions")),
        sa.UniqueConstraint("upload_secret_hash", name=op.f("uq_configuration_versions_upload_secret_hash")),
    )
    op.create_index(op.f("ix_configuration_versions_org_id"), "configuration_versions", ["org_id"])
    op.create_index(op.f("ix_configuration_versions_stack_id"), "configuration_versions", ["stack_id"])
    op.create_table(
        "cli_runs",
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("configuration_version_id", sa.String(32), nullable=False),
        sa.Column("auto_apply", sa.Boolean(), nullable=False),
        sa.Column("message", sa.String(2000), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_cli_runs_run_id_runs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["configuration_version_id"],
            ["configuration_versions.id"],
            name=op.f("fk_cli_runs_configuration_version_id_configuration_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_cli_runs")),
    )
    op.create_index(op.f("ix_cli_runs_configuration_version_id"), "cli_runs", ["configuration_version_id"])
    op.create_table(
        "stack_tags",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("stack_id", sa.String(32), nullable=False),
        sa.Column("tag", sa.String(255), nullable=False),
        sa.ForeignKeyConstraint(
            ["stack_id"], ["stacks.id"], name=op.f("fk_stack_tags_stack_id_stacks"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stack_tags")),
        sa.UniqueConstraint("stack_id", "tag", name=op.f("uq_stack_tags_stack_id_tag")),
    )


def downgrade() -> None:
    op.drop_table("stack_tags")
    op.drop_table("cli_runs")
    op.drop_table("configuration_versions")
