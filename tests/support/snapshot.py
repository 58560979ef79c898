"""A whole-database snapshot, to prove a refused request changed nothing."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from firstlume.db.models import Base
from firstlume.services.context import Context

# The outbox relay's own bookkeeping moves in the background, whatever a request did; the events
# themselves are part of the snapshot.
DELIVERY_COLUMNS = {"outbox": {"attempts", "available_at", "published_at", "last_error"}}


async def snapshot(ctx: Context) -> dict[str, list[Any]]:
    result: dict[str, list[Any]] = {}
    async with ctx.db.transaction() as session:
        for table in Base.metadata.sorted_tables:
            skipped = DELIVERY_COLUMNS.get(table.name, set())
            rows = (await session.execute(select(*(c for c in table.columns if c.name not in skipped)))).all()
            result[table.name] = sorted(tuple(map(repr, row)) for row in rows)
    return result
