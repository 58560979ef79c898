"""outbox: events of committed changes, published after commit by a relay; room for in-place
updates of planned changes on PostgreSQL

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import firstlume.db.types

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "outbox",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("created_at", firstlume.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=30), nullable=False),
        sa.Column("notification", sa.String(length=50), nullable=True),
        sa.Column("channels", sa.JSON(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("available_at", firstlume.db.types.UTCDateTime(timezone=True), nullable=False),
        sa.Column("published_at", firstlume.db.types.UTCDateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox")),
    )
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.create_index("ix_outbox_published_at", ["published_at"], unique=False)
        batch_op.create_index(
            "ix_outbox_unpublished",
            ["id"],
            unique=False,
            sqlite_where=sa.text("published_at IS NULL"),
            postgresql_where=sa.text("published_at IS NULL"),
        )

    if op.get_bind().dialect.name == "postgresql":
        # Approval rewrites every change of a run: with room in each page, in place (HOT).
        op.execute("ALTER TABLE resource_changes SET (fillfactor = 70)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE resource_changes RESET (fillfactor)")
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.drop_index("ix_outbox_unpublished")
        batch_op.drop_index("ix_outbox_published_at")
    op.drop_table("outbox")
