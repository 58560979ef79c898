"""A whole-database snapshot, to prove a refused request changed nothing."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from firstlume.db.models import Base
from firstlume.services.context import Context


async def snapshot(ctx: Context) -> dict[str, list[Any]]:
    result: dict[str, list[Any]] = {}
    async with ctx.db.transaction() as session:
        for table in Base.metadata.sorted_tables:
            rows = (await session.execute(select(table))).all()
            result[table.name] = sorted(tuple(map(repr, row)) for row in rows)
    return result
