"""output_changes (a plan's changes to root module outputs) with runs.summary_outputs, and
runs.drift_base_run_id (the apply a drift run compared against)

Revision ID: 0014_runs_correctness
Revises: 0013_fillfactor
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_runs_correctness"
down_revision = "0013_fillfactor"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "output_changes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("unit", sa.String(1000), nullable=False),
        sa.Column("name", sa.String(1000), nullable=False),
        sa.Column("action", sa.String(20), nullable=False),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("after", sa.JSON(), nullable=True),
        sa.Column("sensitive", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_output_changes_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_output_changes")),
        sa.UniqueConstraint("run_id", "unit", "name", name=op.f("uq_output_changes_run_id_unit_name")),
    )
    with op.batch_alter_table("runs") as batch:
        batch.add_column(
            sa.Column("summary_outputs", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )
        batch.add_column(sa.Column("drift_base_run_id", sa.String(32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("drift_base_run_id")
        batch.drop_column("summary_outputs")
    op.drop_table("output_changes")
