"""Rows a change only ever appends (its audit entries, its runs' history, its outbox events) go
in with a Core INSERT in the change's transaction, as they are recorded: nothing reads them back
as objects within the change, so the ORM's unit of work has nothing to do for them."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Table, insert
from sqlalchemy.ext.asyncio import AsyncSession


async def append_rows(
    session: AsyncSession, table: Table, rows: dict[str, Any] | list[dict[str, Any]]
) -> None:
    """Inserts `rows` into `table` in the session's transaction, now (a list in one executemany)."""
    if session.new:
        # A row may refer to one the change has only added so far (a new organization's first
        # audit entry): those go first.
        await session.flush()
    await session.execute(insert(table), rows)
