"""Rows of statements that select columns, not ORM entities.

`session.execute` sends such a statement through the ORM, which builds a loader for every column
on every execution and hands back the same rows Core would: for a GET of a run, a sixth of the
request's CPU. The hot reads whose statements name only columns run them on the session's
connection instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVarTuple

from sqlalchemy import Row, Select
from sqlalchemy.ext.asyncio import AsyncSession

Columns = TypeVarTuple("Columns")


async def column_rows(
    session: AsyncSession, statement: Select[*Columns], params: Mapping[str, Any] | None = None
) -> Sequence[Row[*Columns]]:
    """All rows of `statement`, read on the session's connection. Changes the session holds are
    flushed first, as `session.execute` would, so a read inside a unit of work sees them."""
    if session.new or session.dirty or session.deleted:
        await session.flush()
    connection = await session.connection()
    return (await connection.execute(statement, dict(params or {}))).all()
