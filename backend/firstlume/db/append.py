"""Rows a change only ever appends (its audit entries, its runs' history, its outbox events) go
in with a Core INSERT on the change's connection, not through the ORM's unit of work.

Nothing reads these rows back as objects within the change, and the unit of work (its dependency
sort, its identity map, fetching each new row's key back) cost more than the INSERT itself on
every change: a third of starting a run.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Insert, Table, insert
from sqlalchemy.ext.asyncio import AsyncSession


@cache
def insert_into(table: Table) -> Insert:
    """The table's INSERT, built once: its compiled form is then found in SQLAlchemy's cache."""
    return insert(table)


async def append_rows(
    session: AsyncSession, table: Table, rows: dict[str, Any] | list[dict[str, Any]]
) -> None:
    """Inserts `rows` into `table` in the session's transaction, now."""
    if session.new:
        # A row may refer to one the change has only added so far (a new organization's first
        # audit entry): those go first.
        await session.flush()
    connection = await session.connection()
    await connection.execute(insert_into(table), rows)
