"""runs.failed_resource_count and failed_resource_addresses: an apply's failed resources, apart
from the run's error

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(
            sa.Column("failed_resource_count", sa.Integer(), server_default=sa.text("0"), nullable=False)
        )
        batch.add_column(
            sa.Column("failed_resource_addresses", sa.JSON(), server_default=sa.text("'[]'"), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("failed_resource_addresses")
        batch.drop_column("failed_resource_count")
