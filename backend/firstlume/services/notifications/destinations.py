"""Notification destinations: created, changed and deleted by people; their secret is
write-only (sealed, bound to the destination, never returned)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import KeyRing
from firstlume.db.models_drift import NotificationDelivery, NotificationDestination
from firstlume.db.types import utcnow
from firstlume.domain.audit import AuditAction
from firstlume.domain.errors import InvalidRequest, NotFound
from firstlume.services import audit
from firstlume.services.catalog import folder_by_path, stack_by_slug
from firstlume.services.commands import CreateNotification, PatchNotification
from firstlume.services.notifications.addresses import PrivateAddress, check_webhook_url
from firstlume.services.notifications.payloads import TEST_EVENT, test_payload
from firstlume.services.reads.catalog import OrganizationRecord


def _secret_context(destination_id: str) -> str:
    return f"notification-secret:{destination_id}"


def reveal_secret(keyring: KeyRing, destination: NotificationDestination) -> str | None:
    if destination.secret_sealed is None:
        return None
    return keyring.decrypt_text(destination.secret_sealed, _secret_context(destination.id))


async def _allowed(url: str, allow_private: bool) -> None:
    try:
        await check_webhook_url(url, allow_private=allow_private)
    except PrivateAddress as error:
        raise InvalidRequest(f"'url' is not allowed: {error}.", field="url") from None


async def _destination_in_org(
    session: AsyncSession, org: OrganizationRecord, destination_id: str
) -> NotificationDestination:
    found = (
        await session.scalar(
            select(NotificationDestination).where(
                NotificationDestination.id == destination_id, NotificationDestination.org_id == org.id
            )
        )
        if len(destination_id) <= 64
        else None
    )
    if found is None:
        raise NotFound(f"No notification destination '{destination_id}' in this organization.")
    return found


async def require_destination(session: AsyncSession, org: OrganizationRecord, destination_id: str) -> None:
    """Refuses (NotFound) a destination that is not the organization's."""
    await _destination_in_org(session, org, destination_id)


async def create_destination(
    session: AsyncSession,
    keyring: KeyRing,
    org: OrganizationRecord,
    command: CreateNotification,
    *,
    allow_private: bool,
) -> str:
    """Adds the destination; returns its id."""
    await _allowed(command.url, allow_private)
    folder_id = stack_id = None
    if command.folder is not None:
        folder_id = (await folder_by_path(session, org, command.folder)).id
    if command.stack is not None:
        stack_id = (await stack_by_slug(session, org, command.stack)).id
    now = utcnow()
    destination = NotificationDestination(
        org_id=org.id,
        folder_id=folder_id,
        stack_id=stack_id,
        name=command.name,
        url=command.url,
        events=[e.value for e in command.events],
        format=command.format.value,
        created_at=now,
        updated_at=now,
    )
    session.add(destination)
    await session.flush()
    if command.secret is not None:
        destination.secret_sealed = keyring.encrypt_text(command.secret, _secret_context(destination.id))
    await session.flush()
    await audit.record(
        session,
        org,
        AuditAction.NOTIFICATION_CREATE,
        _target(destination),
        {**_described(destination), "folder": command.folder},
        stack=command.stack,
    )
    return destination.id


def _target(destination: NotificationDestination) -> str:
    return f"notification:{destination.id}"


def _described(destination: NotificationDestination) -> dict[str, object]:
    """A destination as its audit rows show it: whether it signs, never its secret."""
    return {
        "name": destination.name,
        "url": audit.without_credentials(destination.url),
        "events": list(destination.events),
        "format": destination.format,
        "signed": destination.secret_sealed is not None,
    }


async def patch_destination(
    session: AsyncSession,
    keyring: KeyRing,
    org: OrganizationRecord,
    destination_id: str,
    command: PatchNotification,
    *,
    allow_private: bool,
) -> None:
    destination = await _destination_in_org(session, org, destination_id)
    given = command.model_fields_set
    if command.url is not None:
        await _allowed(command.url, allow_private)
        destination.url = command.url
    if command.name is not None:
        destination.name = command.name
    if command.events is not None:
        destination.events = [e.value for e in command.events]
    if command.format is not None:
        destination.format = command.format.value
    if "secret" in given:
        destination.secret_sealed = (
            keyring.encrypt_text(command.secret, _secret_context(destination.id)) if command.secret else None
        )
    destination.updated_at = utcnow()
    await session.flush()
    described = _described(destination)
    changed: dict[str, object] = {
        name: described[name] for name in ("name", "url", "events", "format") if name in given
    }
    if "secret" in given:
        changed["signed"] = described["signed"]
    await audit.record(session, org, AuditAction.NOTIFICATION_UPDATE, _target(destination), changed)


async def delete_destination(session: AsyncSession, org: OrganizationRecord, destination_id: str) -> None:
    destination = await _destination_in_org(session, org, destination_id)
    await audit.record(
        session, org, AuditAction.NOTIFICATION_DELETE, _target(destination), {"name": destination.name}
    )
    await session.delete(destination)
    await session.flush()


async def add_test_delivery(session: AsyncSession, org: OrganizationRecord, destination_id: str) -> str:
    """A test message, posted once at once (never retried); returns its delivery's id."""
    destination = await _destination_in_org(session, org, destination_id)
    now = utcnow()
    delivery = NotificationDelivery(
        destination_id=destination.id,
        event=TEST_EVENT,
        run_id=None,
        payload=test_payload(org.slug, destination.name),
        test=True,
        created_at=now,
        next_attempt_at=now,
        # Held by the request that posts it: no sender takes it meanwhile.
        leased_until=now + timedelta(minutes=1),
        attempts=0,
    )
    session.add(delivery)
    await session.flush()
    return delivery.id
