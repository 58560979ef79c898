"""One statement for a whole batch of resource states, on both dialects.

The batch travels as a single JSON parameter, so the statement is the same for 1 update or
5,000 (no bind-parameter limit, one plan to cache), and the database joins it with the run's
changes by address. A replacement's stages are replaced only when the update carries some.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

_POSTGRESQL = text(
    """
    UPDATE resource_changes AS rc
    SET state = u.state,
        error = u.error,
        stages = CASE WHEN json_array_length(u.stages) > 0 THEN u.stages ELSE rc.stages END
    FROM json_to_recordset(CAST(:updates AS json))
        AS u(address text, state text, error text, stages json)
    WHERE rc.run_id = :run_id AND rc.address = u.address
    RETURNING rc.address
    """
)

_SQLITE = text(
    """
    UPDATE resource_changes
    SET state = u.state,
        error = u.error,
        stages = CASE WHEN json_array_length(u.stages) > 0 THEN u.stages ELSE resource_changes.stages END
    FROM (
        SELECT json_extract(value, '$.address') AS address,
               json_extract(value, '$.state') AS state,
               json_extract(value, '$.error') AS error,
               json_extract(value, '$.stages') AS stages
        FROM json_each(:updates)
    ) AS u
    WHERE resource_changes.run_id = :run_id AND resource_changes.address = u.address
    RETURNING resource_changes.address
    """
)


@dataclass(frozen=True)
class ResourceState:
    address: str
    state: str
    error: str | None
    stages: list[dict[str, Any]]


async def update_resource_states(
    session: AsyncSession, run_id: str, updates: Iterable[ResourceState]
) -> list[str]:
    """Applies `updates` in order (the last one per address wins); returns the addresses of the
    run's changes that were updated."""
    latest = {u.address: u for u in updates}
    if not latest:
        return []
    payload = json.dumps(
        [
            {"address": u.address, "state": u.state, "error": u.error, "stages": u.stages}
            for u in latest.values()
        ]
    )
    statement = _SQLITE if session.get_bind().dialect.name == "sqlite" else _POSTGRESQL
    result = await session.execute(statement, {"updates": payload, "run_id": run_id})
    return list(dict.fromkeys(result.scalars()))
