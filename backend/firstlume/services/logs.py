"""Reading a run's log: the whole text or one step's, from a character offset of the run's log."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import LogChunk


@dataclass(frozen=True)
class LogSlice:
    text: str
    # Where the next read continues: the run-level offset just past what was returned.
    next_offset: int


async def read_log(
    session: AsyncSession, run_id: str, offset: int = 0, step: str | None = None, limit_chunks: int = 5000
) -> LogSlice:
    query = select(LogChunk.offset, LogChunk.text).where(LogChunk.run_id == run_id)
    # A chunk that starts before `offset` may still end after it: take the one that straddles it.
    straddling = (
        select(LogChunk.offset)
        .where(LogChunk.run_id == run_id, LogChunk.offset <= offset)
        .order_by(LogChunk.offset.desc())
        .limit(1)
    )
    start = (await session.scalar(straddling)) or 0
    query = query.where(LogChunk.offset >= start)
    if step is not None:
        query = query.where(LogChunk.step == step)
    rows = (await session.execute(query.order_by(LogChunk.offset).limit(limit_chunks))).all()
    parts = []
    next_offset = offset
    for chunk_offset, text in rows:
        end = chunk_offset + len(text)
        if end <= offset:
            continue
        parts.append(text[max(0, offset - chunk_offset) :])
        next_offset = end
    return LogSlice("".join(parts), next_offset)
