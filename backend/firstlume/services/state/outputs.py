"""A unit's outputs, from its current state, with sensitive values hidden."""

from __future__ import annotations

import json

from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.crypto import KeyRing
from firstlume.domain.state import Output, outputs_of
from firstlume.services.reads.catalog import StackRecord
from firstlume.services.state.store import current_state


async def current_outputs(
    session: AsyncSession, keyring: KeyRing, stack: StackRecord, unit: str
) -> list[Output]:
    raw = await current_state(session, keyring, stack, unit)
    if raw is None:
        return []
    return outputs_of(json.loads(raw))
