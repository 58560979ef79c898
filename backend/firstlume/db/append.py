"""Rows a change only ever appends (its audit entries, its runs' history, its outbox events) go
in with a Core INSERT on the change's connection, not through the ORM's unit of work.

Nothing reads these rows back as objects within the change, and the unit of work (its dependency
sort, its identity map, fetching each new row's key back) cost more than the INSERT itself on
every change: a third of starting a run.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Insert, Table, insert, inspect
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import make_transient_to_detached
from sqlalchemy.orm.attributes import set_committed_value

from firstlume.db.models import Base


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


async def insert_object(session: AsyncSession, obj: Base) -> None:
    """Inserts a new object's row with a Core INSERT and puts the object in the session as if
    the ORM had flushed it: persistent, every column loaded (its defaults included). Later
    changes to it are flushed as UPDATEs as usual. For an object a change creates and then goes
    on using (a new run): in a profile of starting runs, the unit of work's flush of the new run
    cost about three times the execution of its INSERT."""
    if session.new:  # what the row may refer to goes first, as in append_rows
        await session.flush()
    mapper = inspect(type(obj))
    state = inspect(obj)
    values = {
        column.key: state.dict[attribute.key]
        for attribute in mapper.column_attrs
        for column in attribute.columns
        if attribute.key in state.dict
    }
    table = mapper.local_table
    assert isinstance(table, Table)
    connection = await session.connection()
    result = await connection.execute(insert_into(table), values)
    # What was inserted, the columns' Python defaults included (SQLAlchemy applied them).
    inserted = result.last_inserted_params()
    assert not isinstance(inserted, list)  # one row
    for attribute in mapper.column_attrs:
        column = attribute.columns[0]
        set_committed_value(obj, attribute.key, inserted.get(column.key))
    make_transient_to_detached(obj)
    session.add(obj)
