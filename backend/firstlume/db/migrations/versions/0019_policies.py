"""Policies as code: the `policies` table (Rego modules of an organization), the inherited
`policies` setting at every level, and what a run recorded of them when its plan finished (the
policies with their origin, each one's result, and the approvals the approval policies ask for,
with those given so far). Columns are only added.

Revision ID: 0019_policies
Revises: 0018_cli_runs
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_policies"
down_revision = "0018_cli_runs"
branch_labels = None
depends_on = None

_RUN_COLUMNS = (
    ("policies", sa.JSON()),
    ("policies_origin", sa.String(1100)),
    ("policy_checks", sa.JSON()),
    ("approvals_required", sa.Integer()),
    ("policy_approvers", sa.JSON()),
    ("approvals", sa.JSON()),
)


def upgrade() -> None:
    op.create_table(
        "policies",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("org_id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("rego", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('plan', 'approval')", name=op.f("ck_policies_kind")),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name="fk_policies_org_id_organizations", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_policies"),
        sa.UniqueConstraint("org_id", "name", name="uq_policies_org_id_name"),
    )
    for table in ("organizations", "folders", "stacks"):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("policies", sa.JSON(), nullable=True))
    with op.batch_alter_table("runs") as batch:
        for name, kind in _RUN_COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        for name, _ in reversed(_RUN_COLUMNS):
            batch.drop_column(name)
    for table in ("stacks", "folders", "organizations"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("policies")
    op.drop_table("policies")
