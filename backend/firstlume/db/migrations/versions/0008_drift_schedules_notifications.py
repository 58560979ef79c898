"""Drift schedules and notifications: the slots the drift scheduler took (drift_slots), the
notification destinations, their deliveries (the notifications' outbox) and every attempt

Revision ID: 0007_drift
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_drift"
down_revision = "0007_git"
branch_labels = None
depends_on = None

PENDING = "delivered_at IS NULL AND given_up_at IS NULL"


def _big_id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "drift_slots",
        sa.Column("id", _big_id(), autoincrement=True, nullable=False),
        sa.Column("stack_id", sa.String(32), nullable=False),
        sa.Column("slot_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("schedule", sa.String(200), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["stack_id"], ["stacks.id"], name="fk_drift_slots_stack_id_stacks", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_drift_slots_run_id_runs", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_drift_slots"),
        sa.UniqueConstraint("stack_id", "slot_at", name="uq_drift_slots_stack_id_slot_at"),
    )
    op.create_table(
        "notify_destinations",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("org_id", sa.String(32), nullable=False),
        sa.Column("folder_id", sa.String(32), nullable=True),
        sa.Column("stack_id", sa.String(32), nullable=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("url", sa.String(2000), nullable=False),
        sa.Column("events", sa.JSON(), nullable=False),
        sa.Column("format", sa.String(10), nullable=False),
        sa.Column("secret_sealed", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("format IN ('json', 'slack')", name="ck_notify_destinations_format"),
        sa.ForeignKeyConstraint(
            ["org_id"],
            ["organizations.id"],
            name="fk_notify_destinations_org_id_organizations",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["folder_id"],
            ["folders.id"],
            name="fk_notify_destinations_folder_id_folders",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["stack_id"], ["stacks.id"], name="fk_notify_destinations_stack_id_stacks", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_notify_destinations"),
    )
    op.create_index("ix_notify_destinations_org_id", "notify_destinations", ["org_id"])
    op.create_table(
        "notify_deliveries",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("destination_id", sa.String(32), nullable=False),
        sa.Column("event", sa.String(50), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("test", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("leased_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("given_up_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["destination_id"],
            ["notify_destinations.id"],
            name="fk_notify_deliveries_destination_id_notify_destinations",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name="fk_notify_deliveries_run_id_runs", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_notify_deliveries"),
    )
    op.create_index("ix_notify_deliveries_destination", "notify_deliveries", ["destination_id", "created_at"])
    op.create_index(
        "ix_notify_deliveries_due",
        "notify_deliveries",
        ["next_attempt_at"],
        sqlite_where=sa.text(PENDING),
        postgresql_where=sa.text(PENDING),
    )
    op.create_table(
        "notify_attempts",
        sa.Column("id", _big_id(), autoincrement=True, nullable=False),
        sa.Column("delivery_id", sa.String(32), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["delivery_id"],
            ["notify_deliveries.id"],
            name="fk_notify_attempts_delivery_id_notify_deliveries",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_notify_attempts"),
    )
    op.create_index("ix_notify_attempts_delivery", "notify_attempts", ["delivery_id", "number"])


def downgrade() -> None:
    op.drop_table("notify_attempts")
    op.drop_table("notify_deliveries")
    op.drop_table("notify_destinations")
    op.drop_table("drift_slots")
