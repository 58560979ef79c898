"""Reads of notifications: an organization's destinations with their scope, and a destination's
deliveries, newest first, each with every attempt."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Folder, Stack
from firstlume.db.models_drift import NotificationAttempt, NotificationDelivery, NotificationDestination
from firstlume.domain.drift import DeliveryStatus
from firstlume.services.reads.rows import column_rows


@dataclass(frozen=True, slots=True)
class DestinationRecord:
    """Where run events are sent. The signing secret is write-only: only whether there is one."""

    id: str
    name: str
    url: str
    events: list[str]
    format: str
    folder: str | None  # the folder's path, for a folder's destination
    stack: str | None  # the stack's slug, for a stack's destination
    has_secret: bool
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    number: int
    at: datetime
    status_code: int | None
    duration_ms: int
    error: str | None


@dataclass(frozen=True, slots=True)
class DeliveryRecord:
    """One event for one destination, with every attempt to post it."""

    id: str
    event: str
    run_id: str | None
    test: bool
    status: DeliveryStatus
    created_at: datetime
    delivered_at: datetime | None
    next_attempt_at: datetime
    attempts: list[AttemptRecord]


def delivery_status(
    delivered_at: datetime | None, given_up_at: datetime | None, attempts: int
) -> DeliveryStatus:
    if delivered_at is not None:
        return DeliveryStatus.DELIVERED
    if given_up_at is not None:
        return DeliveryStatus.FAILED
    return DeliveryStatus.PENDING if attempts == 0 else DeliveryStatus.RETRYING


D = NotificationDestination
# In DestinationRecord's order, the scope's folder path and stack slug joined in.
_DESTINATION_COLUMNS: tuple[Any, ...] = (
    D.id,
    D.name,
    D.url,
    D.events,
    D.format,
    Folder.path,
    Stack.slug,
    D.secret_sealed.is_not(None),
    D.created_at,
    D.updated_at,
)
_DESTINATIONS = (
    select(*_DESTINATION_COLUMNS)
    .outerjoin(Folder, Folder.id == D.folder_id)
    .outerjoin(Stack, Stack.id == D.stack_id)
)


async def destinations(
    session: AsyncSession, org_id: str, destination_ids: Sequence[str] | None = None
) -> list[DestinationRecord]:
    query = _DESTINATIONS.where(D.org_id == org_id)
    if destination_ids is not None:
        query = query.where(D.id.in_(destination_ids))
    return [DestinationRecord(*row) for row in await column_rows(session, query.order_by(D.created_at, D.id))]


N = NotificationDelivery
_DELIVERIES = select(
    N.id,
    N.event,
    N.run_id,
    N.test,
    N.delivered_at,
    N.given_up_at,
    N.attempts,
    N.created_at,
    N.next_attempt_at,
)
A = NotificationAttempt
_ATTEMPTS = select(A.delivery_id, A.number, A.at, A.status_code, A.duration_ms, A.error)


async def _deliveries(session: AsyncSession, query: Any) -> list[DeliveryRecord]:
    rows = await column_rows(session, query)
    attempts: dict[str, list[AttemptRecord]] = defaultdict(list)
    if rows:
        wanted = _ATTEMPTS.where(A.delivery_id.in_([row.id for row in rows])).order_by(
            A.delivery_id, A.number
        )
        for row in await column_rows(session, wanted):
            attempts[row.delivery_id].append(AttemptRecord(*row[1:]))
    return [
        DeliveryRecord(
            id=row.id,
            event=row.event,
            run_id=row.run_id,
            test=row.test,
            status=delivery_status(row.delivered_at, row.given_up_at, row.attempts),
            created_at=row.created_at,
            delivered_at=row.delivered_at,
            next_attempt_at=row.next_attempt_at,
            attempts=attempts.get(row.id, []),
        )
        for row in rows
    ]


async def deliveries(session: AsyncSession, destination_id: str, *, limit: int = 50) -> list[DeliveryRecord]:
    return await _deliveries(
        session,
        _DELIVERIES.where(N.destination_id == destination_id)
        .order_by(N.created_at.desc(), N.id)
        .limit(limit),
    )


async def delivery(session: AsyncSession, delivery_id: str) -> DeliveryRecord:
    [found] = await _deliveries(session, _DELIVERIES.where(N.id == delivery_id))
    return found
