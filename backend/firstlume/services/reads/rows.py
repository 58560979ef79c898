"""Rows of statements that select columns, not ORM entities, and the read models they fill.

`session.execute` sends such a statement through the ORM, which builds a loader for every column
on every execution and hands back the same rows Core would: for a GET of a run, a sixth of the
request's CPU. The hot reads whose statements name only columns run them on the session's
connection instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any, TypeVar, TypeVarTuple

from sqlalchemy import ColumnElement, Row, Select, Table
from sqlalchemy.ext.asyncio import AsyncSession

Columns = TypeVarTuple("Columns")
R = TypeVar("R")


async def column_rows(
    session: AsyncSession, statement: Select[*Columns], params: Mapping[str, Any] | None = None
) -> Sequence[Row[*Columns]]:
    """All rows of `statement`, read on the session's connection. Changes the session holds are
    flushed first, as `session.execute` would, so a read inside a unit of work sees them."""
    if session.new or session.dirty or session.deleted:
        await session.flush()
    connection = await session.connection()
    return (await connection.execute(statement, dict(params or {}))).all()


def columns_of(
    record: type[Any], table: Table, **computed: ColumnElement[Any]
) -> tuple[ColumnElement[Any], ...]:
    """What to select to fill `record` (a read model): for each of its fields in order, `table`'s
    column of that name, or the expression `computed` gives for it. A row of them builds the
    record positionally: `record(*row)`."""
    return tuple(
        computed[name].label(name) if name in computed else table.c[name] for name in field_names(record)
    )


def record_of(record: type[R], row: object, **computed: Any) -> R:
    """`record` of an ORM row in hand (one a change just wrote): each field from the attribute of
    the same name, or from `computed`."""
    return record(
        *(computed[name] if name in computed else getattr(row, name) for name in field_names(record))
    )


def field_names(record: type[Any]) -> tuple[str, ...]:
    return tuple(f.name for f in fields(record))
