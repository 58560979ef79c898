"""storage_probe: the row /readyz writes to find out whether the database can store anything now
(a full disk, a database that only reads), so that Kubernetes stops routing to a replica that
cannot write.

Revision ID: 0016_storage
Revises: 0015_deleting_things
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0016_storage"
down_revision = "0015_deleting_things"
branch_labels = None
depends_on = None


def upgrade() -> None:
    table = op.create_table(
        "storage_probe",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("probed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_storage_probe")),
    )
    op.bulk_insert(table, [{"id": 1, "probed_at": datetime.now(UTC)}])


def downgrade() -> None:
    op.drop_table("storage_probe")
