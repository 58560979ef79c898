"""Counts for /metrics: runs by status, in one statement."""

from __future__ import annotations

from sqlalchemy import func, select

from firstlume.db.engine import Database
from firstlume.db.models import Run


async def runs_by_status(db: Database) -> dict[str, int]:
    async with db.read() as session:
        rows = await session.execute(select(Run.status, func.count()).group_by(Run.status))
        return {str(status): int(count) for status, count in rows.all()}
