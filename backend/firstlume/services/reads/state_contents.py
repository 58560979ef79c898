"""Reads of what a stored state holds, by name only: the resource instances of a version and the
difference between two versions (domain/state_resources.py). The version is decrypted by the
managed state store; no attribute value leaves this module."""

from __future__ import annotations

import json

from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import KeyRing
from firstlume.domain.state_resources import StateDiff, StateResource, diff, resources_of
from firstlume.services.reads.catalog import StackRecord
from firstlume.services.state.store import version_state


async def version_resources(
    session: AsyncSession, keyring: KeyRing, stack: StackRecord, unit: str, serial: int
) -> list[StateResource]:
    """The managed resource instances of one version, by address (NotFound for no such serial)."""
    return resources_of(json.loads(await version_state(session, keyring, stack, unit, serial)))


async def version_diff(
    session: AsyncSession, keyring: KeyRing, stack: StackRecord, unit: str, old: int, new: int
) -> StateDiff:
    """What version `new` added, removed and changed against version `old`."""
    before = await version_resources(session, keyring, stack, unit, old)
    return diff(before, await version_resources(session, keyring, stack, unit, new))
