"""Managed state: each unit's current state and lock (state_heads), every version sealed
(state_versions), and the serials a run's plan planned against

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def _big_id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "state_heads",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("org_id", sa.String(32), nullable=False),
        sa.Column("stack_id", sa.String(32), nullable=False),
        sa.Column("unit", sa.String(1000), nullable=False),
        sa.Column("serial", sa.BigInteger(), nullable=True),
        sa.Column("lineage", sa.String(200), nullable=True),
        sa.Column("lock_id", sa.String(200), nullable=True),
        sa.Column("lock_info", sa.JSON(), nullable=True),
        sa.Column("lock_user_id", sa.String(32), nullable=True),
        sa.Column("lock_run_id", sa.String(32), nullable=True),
        sa.Column("lock_phase", sa.String(10), nullable=True),
        sa.Column("lock_holder", sa.String(400), nullable=True),
        sa.Column("locked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["org_id"], ["organizations.id"], name="fk_state_heads_org_id_organizations", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["stack_id"], ["stacks.id"], name="fk_state_heads_stack_id_stacks", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["lock_user_id"], ["users.id"], name="fk_state_heads_lock_user_id_users", ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["lock_run_id"], ["runs.id"], name="fk_state_heads_lock_run_id_runs", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_state_heads"),
        sa.UniqueConstraint("stack_id", "unit", name="uq_state_heads_stack_id_unit"),
    )
    op.create_table(
        "state_versions",
        sa.Column("id", _big_id(), autoincrement=True, nullable=False),
        sa.Column("head_id", sa.String(32), nullable=False),
        sa.Column("serial", sa.BigInteger(), nullable=False),
        sa.Column("lineage", sa.String(200), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("resources", sa.Integer(), nullable=False),
        sa.Column("state_sealed", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by_id", sa.String(32), nullable=True),
        sa.Column("run_id", sa.String(32), nullable=True),
        sa.Column("run_phase", sa.String(10), nullable=True),
        sa.ForeignKeyConstraint(
            ["head_id"], ["state_heads.id"], name="fk_state_versions_head_id_state_heads", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["created_by_id"], ["users.id"], name="fk_state_versions_created_by_id_users", ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_state_versions_run_id_runs", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_state_versions"),
        sa.UniqueConstraint("head_id", "serial", name="uq_state_versions_head_id_serial"),
    )
    op.create_index("ix_state_versions_run_id", "state_versions", ["run_id"])
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("planned_state_serials", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("planned_state_serials")
    op.drop_index("ix_state_versions_run_id", table_name="state_versions")
    op.drop_table("state_versions")
    op.drop_table("state_heads")
