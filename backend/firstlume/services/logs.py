"""Reading a run's log: the whole text or one step's, from a character offset of the run's log."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.models import LogChunk, Run, RunStep
from firstlume.domain.runs import FINISHED, FINISHED_STEP_STATUSES
from firstlume.protocol.events import Event, LogAppended, RunStatusChanged, StepChanged
from firstlume.pubsub import CLOSED, run_channel
from firstlume.services.context import Context


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


# Events are the signal; this re-check only bounds how long a lost one could stall a reader.
SAFETY_POLL_SECONDS = 15.0


def _run_finished(status: Any) -> bool:
    return isinstance(status, str) and status in {s.value for s in FINISHED}


class LogTail:
    """A reader's place in a run's log (or one step's), and what ends it."""

    def __init__(self, ctx: Context, run_id: str, step: str | None, offset: int) -> None:
        self.ctx, self.run_id, self.step, self.offset = ctx, run_id, step, offset

    async def state(self) -> tuple[bool, int]:
        """Whether the run (or the step) has ended, and the log's length."""
        async with self.ctx.db.transaction() as session:
            row = (
                await session.execute(select(Run.status, Run.log_length).where(Run.id == self.run_id))
            ).one()
            ended = _run_finished(row.status)
            if not ended and self.step is not None:
                step_status = await session.scalar(
                    select(RunStep.status).where(RunStep.run_id == self.run_id, RunStep.name == self.step)
                )
                ended = step_status in FINISHED_STEP_STATUSES
        return ended, int(row.log_length)

    async def read(self, up_to: int | None = None) -> AsyncIterator[LogSlice]:
        """What is stored after the offset, in as many reads as it takes."""
        while up_to is None or self.offset < up_to:
            async with self.ctx.db.transaction() as session:
                part = await read_log(session, self.run_id, self.offset, self.step)
            if not part.text:
                return
            self.offset = part.next_offset
            yield part

    def ends_with(self, event: Event) -> bool:
        if isinstance(event, RunStatusChanged):
            return event.status in FINISHED
        return (
            self.step is not None
            and isinstance(event, StepChanged)
            and event.step == self.step
            and event.status in FINISHED_STEP_STATUSES
        )

    def news_in(self, event: Event) -> int | None:
        """For a log event with text past the offset (of our step), where that text ends."""
        if not isinstance(event, LogAppended) or (self.step is not None and event.step != self.step):
            return None
        return event.end if event.end > self.offset else None


async def follow_log(ctx: Context, tail: LogTail) -> AsyncIterator[LogSlice]:
    """The log from the tail's offset, live, until the run (or step) ends. Subscribes first, then
    reads what is stored, then reads only what each event announces: nothing is missed, and the
    offsets make sure nothing repeats."""
    async with ctx.pubsub.subscribe(run_channel(tail.run_id)) as events:
        ended, length = await tail.state()
        async for part in tail.read(length):
            yield part
        while not ended:
            event = await events.next(SAFETY_POLL_SECONDS)
            if event is None:
                ended, length = await tail.state()
                async for part in tail.read(length):
                    yield part
            elif event is CLOSED:
                return
            elif tail.ends_with(event):
                ended = True
                async for part in tail.read():
                    yield part
            elif (end := tail.news_in(event)) is not None:
                async for part in tail.read(end):
                    yield part
