"""Stack dependencies (adoption-api.md, section 9): which outputs of which stack a stack reads,
and the applies whose dependents are still to be started (the triggers' outbox)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, ForeignKey, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from firstlume.db.models import Base, new_id
from firstlume.db.types import UTCDateTime, utcnow


class StackDependency(Base):
    """`stack` reads `outputs` (upstream output name → its Terraform variable) of `upstream`."""

    __tablename__ = "stack_dependencies"
    __table_args__ = (
        UniqueConstraint("stack_id", "upstream_stack_id"),
        Index("ix_stack_dependencies_upstream", "upstream_stack_id"),
    )
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"), index=True)
    stack_id: Mapped[str] = mapped_column(ForeignKey("stacks.id", ondelete="CASCADE"))
    upstream_stack_id: Mapped[str] = mapped_column(ForeignKey("stacks.id", ondelete="CASCADE"))
    outputs: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    position: Mapped[int] = mapped_column(default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class DependencyTrigger(Base):
    """Written in the transaction that moves an apply to `applied` when its stack has
    dependents: if that commits, the dependents' runs are started (by any replica, once:
    services/dependencies/triggers.py); if it rolls back, there is nothing to start."""

    __tablename__ = "dependency_triggers"
    __table_args__ = (Index("ix_dependency_triggers_pending", "done_at", "created_at"),)
    upstream_run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    done_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # {"started": [{"stack", "run"}], "changed": [output names]}: what the trigger did.
    result: Mapped[dict[str, object] | None] = mapped_column(JSON, nullable=True)
