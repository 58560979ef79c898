"""A variable's value keeps its JSON type: `value_json` is true when the sealed text is JSON (a
number, boolean, list or object), so executors hand it to Terraform with its type and mask each
of its leaves. Existing rows stay strings, as they were handed over until now.

Revision ID: 0007_security
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_security"
down_revision = "0007_ui2"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("variables") as batch:
        batch.add_column(sa.Column("value_json", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("variables") as batch:
        batch.drop_column("value_json")
