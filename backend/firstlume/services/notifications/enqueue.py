"""Deliveries are written in the transaction of the status change they announce: this table is
the notifications' outbox. If the change commits, its deliveries exist and any replica's sender
posts them; if it rolls back, there is nothing to send."""

from __future__ import annotations

from sqlalchemy import select

from firstlume.db.models import Organization, Run, Stack
from firstlume.db.models_drift import NotificationDelivery, NotificationDestination
from firstlume.db.types import utcnow
from firstlume.domain.effects import Notification
from firstlume.services.catalog import folder_chain
from firstlume.services.context import Unit
from firstlume.services.notifications.payloads import run_payload


async def enqueue(unit: Unit, run: Run, notification: Notification) -> int:
    """Adds a delivery of `notification` for each destination of the run's scope that listens
    for it; returns how many. One statement when the organization has no destination."""
    session = unit.session
    # The organization's slug rides along (the payload names it): no statement of its own.
    rows = (
        await session.execute(
            select(NotificationDestination, Organization.slug)
            .join(Organization, Organization.id == NotificationDestination.org_id)
            .where(NotificationDestination.org_id == run.org_id)
        )
    ).all()
    listening = [d for d, _ in rows if notification.value in d.events]
    if not listening:
        return 0
    org_slug = rows[0][1]
    stack = await session.get(Stack, run.stack_id)
    assert stack is not None
    folder_ids: set[str] = set()
    if any(d.folder_id for d in listening):
        folder_ids = {f.id for f in await folder_chain(session, stack.folder_id)}
    reached = [
        d
        for d in listening
        if (d.stack_id is None and d.folder_id is None) or d.stack_id == stack.id or d.folder_id in folder_ids
    ]
    now = utcnow()
    payload = run_payload(notification.value, org_slug, stack.slug, run)
    for destination in reached:
        session.add(
            NotificationDelivery(
                destination_id=destination.id,
                event=notification.value,
                run_id=run.id,
                payload=payload,
                test=False,
                created_at=now,
                next_attempt_at=now,
                attempts=0,
            )
        )
    if reached:
        unit.wrote_notifications = True
    return len(reached)
