"""Tables of drift schedules and notifications (platform-api.md, sections 3 and 4).

Imported at the end of db/models.py, so that `Base.metadata` holds them wherever the models are
loaded (migrations, tests comparing the schema)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from firstlume.db.models import Base, new_id
from firstlume.db.types import UTCDateTime, utcnow


class DriftSlot(Base):
    """One due slot of a stack's drift schedule, taken by the replica that queued its run. The
    unique (stack, slot) is what makes the slot's run queued exactly once across replicas: a
    second scheduler's INSERT of the same slot does nothing."""

    __tablename__ = "drift_slots"
    __table_args__ = (UniqueConstraint("stack_id", "slot_at"),)
    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    stack_id: Mapped[str] = mapped_column(ForeignKey("stacks.id", ondelete="CASCADE"))
    slot_at: Mapped[datetime] = mapped_column(UTCDateTime())
    schedule: Mapped[str] = mapped_column(String(200))
    # The run queued for the slot; null when the slot was skipped (a drift run already waiting).
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class NotificationDestination(Base):
    """Where run events are sent: on the organization, a folder (its stacks, nested folders'
    too) or one stack. The signing secret is write-only: stored sealed, never returned."""

    __tablename__ = "notify_destinations"
    __table_args__ = (
        CheckConstraint("format IN ('json', 'slack')", name="format"),
        Index("ix_notify_destinations_org_id", "org_id"),
    )
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    org_id: Mapped[str] = mapped_column(ForeignKey("organizations.id", ondelete="CASCADE"))
    folder_id: Mapped[str | None] = mapped_column(ForeignKey("folders.id", ondelete="CASCADE"), nullable=True)
    stack_id: Mapped[str | None] = mapped_column(ForeignKey("stacks.id", ondelete="CASCADE"), nullable=True)
    name: Mapped[str] = mapped_column(String(200))
    url: Mapped[str] = mapped_column(String(2000))
    events: Mapped[list[str]] = mapped_column(JSON)
    format: Mapped[str] = mapped_column(String(10))
    secret_sealed: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


PENDING_DELIVERY_SQL = "delivered_at IS NULL AND given_up_at IS NULL"


class NotificationDelivery(Base):
    """One event for one destination: written in the transaction of the status change it
    announces (the notifications' outbox), sent after commit by any replica, retried until it
    is answered with a 2xx or its 24 hours are over. Its id is the X-Firstlume-Delivery header,
    the same on every attempt."""

    __tablename__ = "notify_deliveries"
    __table_args__ = (
        Index("ix_notify_deliveries_destination", "destination_id", "created_at"),
        Index(
            "ix_notify_deliveries_due",
            "next_attempt_at",
            sqlite_where=text(PENDING_DELIVERY_SQL),
            postgresql_where=text(PENDING_DELIVERY_SQL),
        ),
    )
    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    destination_id: Mapped[str] = mapped_column(ForeignKey("notify_destinations.id", ondelete="CASCADE"))
    event: Mapped[str] = mapped_column(String(50))
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"), nullable=True)
    # The JSON body as of the change (the run's status, summary and error then), without the
    # delivery id and time, which are added when sent. Never a variable value or a secret.
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    test: Mapped[bool] = mapped_column(default=False)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    # A sender holds the delivery until then: another replica takes it over only after a crash.
    leased_until: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    given_up_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)


class NotificationAttempt(Base):
    """One POST of a delivery: when, how it was answered (or why not), and how long it took."""

    __tablename__ = "notify_attempts"
    __table_args__ = (Index("ix_notify_attempts_delivery", "delivery_id", "number"),)
    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True
    )
    delivery_id: Mapped[str] = mapped_column(ForeignKey("notify_deliveries.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    status_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    duration_ms: Mapped[int] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
