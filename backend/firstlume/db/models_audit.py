"""The audit trail: one row per change made through an API or the CLI, written in the change's own
transaction (services/audit.py). Names only: never a variable's value or a secret."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from firstlume.db.models import Base
from firstlume.db.types import UTCDateTime, utcnow


class AuditEntry(Base):
    __tablename__ = "audit_entries"
    __table_args__ = (
        # Every read is one organization's entries, newest first, maybe of one stack or actor.
        Index("ix_audit_entries_org", "org_id", "id"),
        Index("ix_audit_entries_org_stack", "org_id", "stack", "id"),
        Index("ix_audit_entries_org_actor", "org_id", "actor", "id"),
    )
    # Increasing: the order of the trail and its page cursor.
    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # The person's email, or "system"; kept as text so that the trail outlives the user.
    actor: Mapped[str] = mapped_column(String(400))
    actor_user_id: Mapped[str | None] = mapped_column(
        ForeignKey("users.id", ondelete="SET NULL"), nullable=True
    )
    actor_token_id: Mapped[str | None] = mapped_column(
        ForeignKey("api_tokens.id", ondelete="SET NULL"), nullable=True
    )
    # A domain.audit.AuditAction value, kept as text: old rows stay readable whatever the enum becomes.
    action: Mapped[str] = mapped_column(String(100))
    # "<kind>:<name>": "stack:net", "run:<id>", "folder:prod/eu", "organization:acme", ...
    target: Mapped[str] = mapped_column(String(1200))
    # The slug of the stack the change concerns, if any (a run's, a stack variable's, ...).
    stack: Mapped[str | None] = mapped_column(String(63), nullable=True)
    details: Mapped[dict[str, Any]] = mapped_column(JSON)
    # rest | graphql | cli | system (domain.audit.AuditVia), and the request's id.
    via: Mapped[str] = mapped_column(String(20))
    request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
