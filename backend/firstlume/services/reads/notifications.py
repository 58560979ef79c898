"""Reads of notifications: an organization's destinations with their scope, and a destination's
deliveries, newest first, each with every attempt."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import Folder, Stack
from firstlume.db.models_drift import NotificationAttempt, NotificationDelivery, NotificationDestination
from firstlume.domain.drift import DeliveryStatus


@dataclass(frozen=True)
class DestinationView:
    destination: NotificationDestination
    folder: str | None
    stack: str | None

    @property
    def has_secret(self) -> bool:
        return self.destination.secret_sealed is not None


@dataclass(frozen=True)
class DeliveryView:
    delivery: NotificationDelivery
    attempts: list[NotificationAttempt]

    @property
    def status(self) -> DeliveryStatus:
        d = self.delivery
        if d.delivered_at is not None:
            return DeliveryStatus.DELIVERED
        if d.given_up_at is not None:
            return DeliveryStatus.FAILED
        return DeliveryStatus.PENDING if d.attempts == 0 else DeliveryStatus.RETRYING


async def destinations(
    session: AsyncSession, org_id: str, destination_ids: list[str] | None = None
) -> list[DestinationView]:
    query = select(NotificationDestination).where(NotificationDestination.org_id == org_id)
    if destination_ids is not None:
        query = query.where(NotificationDestination.id.in_(destination_ids))
    rows = list(
        await session.scalars(query.order_by(NotificationDestination.created_at, NotificationDestination.id))
    )
    folder_ids = {r.folder_id for r in rows if r.folder_id}
    stack_ids = {r.stack_id for r in rows if r.stack_id}
    folders: dict[str, str] = {}
    if folder_ids:
        found = await session.execute(select(Folder.id, Folder.path).where(Folder.id.in_(folder_ids)))
        folders = {folder_id: path for folder_id, path in found}
    stacks: dict[str, str] = {}
    if stack_ids:
        found = await session.execute(select(Stack.id, Stack.slug).where(Stack.id.in_(stack_ids)))
        stacks = {stack_id: slug for stack_id, slug in found}
    return [DestinationView(r, folders.get(r.folder_id or ""), stacks.get(r.stack_id or "")) for r in rows]


async def deliveries(session: AsyncSession, destination_id: str, *, limit: int = 50) -> list[DeliveryView]:
    rows = list(
        await session.scalars(
            select(NotificationDelivery)
            .where(NotificationDelivery.destination_id == destination_id)
            .order_by(NotificationDelivery.created_at.desc(), NotificationDelivery.id)
            .limit(limit)
        )
    )
    attempts: dict[str, list[NotificationAttempt]] = defaultdict(list)
    if rows:
        for attempt in await session.scalars(
            select(NotificationAttempt)
            .where(NotificationAttempt.delivery_id.in_([r.id for r in rows]))
            .order_by(NotificationAttempt.delivery_id, NotificationAttempt.number)
        ):
            attempts[attempt.delivery_id].append(attempt)
    return [DeliveryView(r, attempts.get(r.id, [])) for r in rows]


async def delivery(session: AsyncSession, delivery_id: str) -> DeliveryView:
    row = await session.get(NotificationDelivery, delivery_id)
    assert row is not None
    attempts = list(
        await session.scalars(
            select(NotificationAttempt)
            .where(NotificationAttempt.delivery_id == delivery_id)
            .order_by(NotificationAttempt.number)
        )
    )
    return DeliveryView(row, attempts)
