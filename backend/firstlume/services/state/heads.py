"""A unit's head row: its current serial and lineage, and its lock."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import StateHead, new_id
from firstlume.services.reads.catalog import StackRecord


async def head_for_update(session: AsyncSession, stack: StackRecord, unit: str) -> StateHead:
    """The unit's head row, created if missing, locked for this transaction: writers, lockers
    and unlockers of one unit take turns on it (SQLite's BEGIN IMMEDIATE already serializes)."""
    head = await _locked_head(session, stack, unit)
    if head is None:
        dialect = (await session.connection()).dialect.name
        insert = pg_insert if dialect == "postgresql" else sqlite_insert
        # Two first writers may race to create it: the loser's insert does nothing, and its
        # SELECT … FOR UPDATE then waits for the winner's transaction.
        await session.execute(
            insert(StateHead)
            .values(id=new_id(), org_id=stack.org_id, stack_id=stack.id, unit=unit)
            .on_conflict_do_nothing(index_elements=["stack_id", "unit"])
        )
        head = await _locked_head(session, stack, unit)
    assert head is not None
    return head


async def _locked_head(session: AsyncSession, stack: StackRecord, unit: str) -> StateHead | None:
    return await session.scalar(
        select(StateHead)
        .where(StateHead.stack_id == stack.id, StateHead.unit == unit)
        .with_for_update()
        .execution_options(populate_existing=True)
    )


async def find_head(session: AsyncSession, stack: StackRecord, unit: str) -> StateHead | None:
    return await session.scalar(
        select(StateHead).where(StateHead.stack_id == stack.id, StateHead.unit == unit)
    )
