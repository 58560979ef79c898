"""stack_dependencies (which outputs of which stack a stack reads), dependency_triggers (the
applies whose dependents are still to be started), and runs.trigger_upstream_run_id with the
unique index that starts one run of a dependent per upstream run, and runs.dependency_serials
(the upstream serials a plan read).

Revision ID: 0020_dependencies
Revises: 0019_policies
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020_dependencies"
down_revision = "0019_policies"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "stack_dependencies",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("org_id", sa.String(length=32), nullable=False),
        sa.Column("stack_id", sa.String(length=32), nullable=False),
        sa.Column("upstream_stack_id", sa.String(length=32), nullable=False),
        sa.Column("outputs", sa.JSON(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name=op.f("fk_stack_dependencies_org_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["stack_id"],
            ["stacks.id"],
            name=op.f("fk_stack_dependencies_stack_id_stacks"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["upstream_stack_id"],
            ["stacks.id"],
            name=op.f("fk_stack_dependencies_upstream_stack_id_stacks"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stack_dependencies")),
        sa.UniqueConstraint(
            "stack_id", "upstream_stack_id", name=op.f("uq_stack_dependencies_stack_id_upstream_stack_id")
        ),
    )
    op.create_index("ix_stack_dependencies_upstream", "stack_dependencies", ["upstream_stack_id"])
    op.create_index(op.f("ix_stack_dependencies_org_id"), "stack_dependencies", ["org_id"])
    op.create_table(
        "dependency_triggers",
        sa.Column("upstream_run_id", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["upstream_run_id"],
            ["runs.id"],
            name=op.f("fk_dependency_triggers_upstream_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("upstream_run_id", name=op.f("pk_dependency_triggers")),
    )
    op.create_index("ix_dependency_triggers_pending", "dependency_triggers", ["done_at", "created_at"])
    op.add_column("runs", sa.Column("trigger_upstream_run_id", sa.String(length=32), nullable=True))
    op.add_column("runs", sa.Column("dependency_serials", sa.JSON(), nullable=True))
    op.create_index(
        "uq_runs_upstream_run_stack", "runs", ["trigger_upstream_run_id", "stack_id"], unique=True
    )


def downgrade() -> None:
    op.drop_index("uq_runs_upstream_run_stack", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("trigger_upstream_run_id")
        batch.drop_column("dependency_serials")
    op.drop_index("ix_dependency_triggers_pending", table_name="dependency_triggers")
    op.drop_table("dependency_triggers")
    op.drop_index(op.f("ix_stack_dependencies_org_id"), table_name="stack_dependencies")
    op.drop_index("ix_stack_dependencies_upstream", table_name="stack_dependencies")
    op.drop_table("stack_dependencies")
