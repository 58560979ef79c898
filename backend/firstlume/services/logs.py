"""Reading a run's log: the whole text or one step's, from a character offset of the run's log,
stored or live.

Live readers of one run in one process share one tail (`LogTails`): it listens to the run's
channel, reads each new chunk from the database once, and hands it to every reader in memory.
Each reader keeps its own offset, so a reader that resumes from an offset gets every character
exactly once. A reader that falls behind by more than its buffer is not waited for: its buffer
is dropped and it reads what it missed from the database, then rejoins the tail.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.engine import Database
from firstlume.db.models import LogChunk, Run, RunStep
from firstlume.domain.runs import FINISHED, FINISHED_STEP_STATUSES
from firstlume.protocol.events import Closed, Event, LogAppended, Resync, RunStatusChanged, StepChanged
from firstlume.pubsub import PubSub, run_channel

log = logging.getLogger("firstlume.logs")

# Events are the signal; this re-check only bounds how long a lost one could stall a reader.
SAFETY_POLL_SECONDS = 15.0
# Chunks read per statement: a long log is read in pages of this many.
PAGE_CHUNKS = 5000
# Chunks a live reader may have waiting before it is left to catch up from the database.
READER_BUFFER = 2000
# Slices a tail keeps for its readers (see _RunTail.slice_for): readers at the same place ask
# for theirs within a few loop turns of each other, and readers at many places are rare. Only
# slices up to SHARED_SLICE_CHARS are kept (and shared by subscribers), which bounds the memory.
KEPT_SLICES = 64
SHARED_SLICE_CHARS = 64 * 1024

FINISHED_VALUES = frozenset(s.value for s in FINISHED)
FINISHED_STEP_VALUES = frozenset(s.value for s in FINISHED_STEP_STATUSES)


class LogSources(Protocol):
    """Where logs are read from: the database, and the broker that says when they grow. The
    services' Context is one; it holds this process's tails, so this module does not import it."""

    @property
    def db(self) -> Database: ...

    @property
    def pubsub(self) -> PubSub: ...


class LiveLogSources(LogSources, Protocol):
    @property
    def log_tails(self) -> LogTails: ...


@dataclass(frozen=True)
class LogSlice:
    text: str
    # Where the next read continues: the run-level offset just past what was returned.
    next_offset: int
    # When each piece of `text` arrived: (index in `text` where a chunk's part starts, the
    # chunk's time), in order. A line's time is that of the chunk its first character came in.
    times: tuple[tuple[int, datetime | None], ...] = ()


@dataclass(frozen=True, slots=True)
class Chunk:
    offset: int
    step: str
    text: str
    at: datetime | None = None

    @property
    def end(self) -> int:
        return self.offset + len(self.text)


async def read_chunks(
    session: AsyncSession,
    run_id: str,
    offset: int = 0,
    step: str | None = None,
    *,
    before: int | None = None,
    limit: int = PAGE_CHUNKS,
    at_boundary: bool = False,
) -> list[Chunk]:
    """Stored chunks that end after `offset` (and start before `before`), in order: the first
    may straddle `offset`, unless the caller knows that a chunk ends there (`at_boundary`)."""
    query = select(LogChunk.offset, LogChunk.step, LogChunk.text, LogChunk.created_at).where(
        LogChunk.run_id == run_id
    )
    if at_boundary:
        query = query.where(LogChunk.offset >= offset)
    elif offset > 0:
        # A chunk that starts before `offset` may still end after it: start from the one that
        # straddles it.
        straddling = (
            select(LogChunk.offset)
            .where(LogChunk.run_id == run_id, LogChunk.offset <= offset)
            .order_by(LogChunk.offset.desc())
            .limit(1)
            .scalar_subquery()
        )
        query = query.where(LogChunk.offset >= func.coalesce(straddling, 0))
    if before is not None:
        query = query.where(LogChunk.offset < before)
    if step is not None:
        query = query.where(LogChunk.step == step)
    rows = await session.execute(query.order_by(LogChunk.offset).limit(limit))
    return [Chunk(o, s, t, at) for o, s, t, at in rows if o + len(t) > offset]


def slice_of(chunks: list[Chunk], offset: int) -> LogSlice:
    """The text of the chunks from `offset` on."""
    parts = []
    times: list[tuple[int, datetime | None]] = []
    length = 0
    next_offset = offset
    for chunk in chunks:
        if chunk.end <= offset:
            continue
        part = chunk.text[max(0, offset - chunk.offset) :]
        if not times or times[-1][1] != chunk.at:
            times.append((length, chunk.at))
        parts.append(part)
        length += len(part)
        next_offset = chunk.end
    return LogSlice("".join(parts), next_offset, tuple(times))


async def read_log(
    session: AsyncSession,
    run_id: str,
    offset: int = 0,
    step: str | None = None,
    limit_chunks: int = PAGE_CHUNKS,
) -> LogSlice:
    """One page of the log from `offset`: at most `limit_chunks` chunks; continue from next_offset."""
    return slice_of(await read_chunks(session, run_id, offset, step, limit=limit_chunks), offset)


async def stream_log(
    ctx: LogSources, run_id: str, step: str | None = None, offset: int = 0, before: int | None = None
) -> AsyncIterator[LogSlice]:
    """The stored log from `offset` (up to `before`), page by page, however long it is."""
    while before is None or offset < before:
        async with ctx.db.read() as session:
            chunks = await read_chunks(session, run_id, offset, step, before=before)
        part = slice_of(chunks, offset)
        if part.text:
            yield part
            offset = part.next_offset
        if len(chunks) < PAGE_CHUNKS:
            return


# Live: one tail per run per process -------------------------------------------------------------


class _Reader:
    """One live reader of a tail: its place, what the tail has handed it, and whether its end
    (the run's, or its step's) has come."""

    def __init__(self, step: str | None, offset: int) -> None:
        self.step = step
        self.offset = offset
        self.pending: deque[Chunk] = deque()
        self.behind = False
        self.ended = False
        self.wake = asyncio.Event()

    def take(self, chunk: Chunk) -> None:
        if self.behind or (self.step is not None and chunk.step != self.step) or chunk.end <= self.offset:
            return
        if len(self.pending) >= READER_BUFFER:
            # Too slow to keep up: it will read from the database what it missed.
            self.pending.clear()
            self.behind = True
        else:
            self.pending.append(chunk)
        self.wake.set()

    def end(self) -> None:
        self.ended = True
        self.wake.set()


class _RunTail:
    """Listens to one run's channel and reads each new chunk once for all its readers."""

    def __init__(self, tails: LogTails, run_id: str) -> None:
        self.tails = tails
        self.ctx = tails.ctx
        self.run_id = run_id
        self.readers: set[_Reader] = set()
        # Everything before `position` has been handed to the readers registered at the time.
        self.position = 0
        self.run_ended = False
        self.ended_steps: set[str] = set()
        self.ready = asyncio.Event()
        self.slices: dict[tuple[str | None, int, int, int], LogSlice] = {}
        self.failure: BaseException | None = None
        self.task = asyncio.create_task(self._pump(), name=f"log tail {run_id}")

    def add(self, reader: _Reader) -> None:
        """Registers a reader at once, so the tail lives on while the reader waits for it to be
        ready. The reader starts behind: whatever the tail hands out before the reader has read
        the stored log up to the tail's position is in that read."""
        reader.behind = True
        self.readers.add(reader)

    def slice_for(self, reader: _Reader) -> LogSlice:
        """The text of the reader's pending chunks from its offset: one object for every reader
        at the same place, so that what its subscribers make of it is made once
        (api/graphql/shared_events.py). The log only grows, and the tail hands the same chunks
        to every reader in the same order, so the place names the text."""
        key = (reader.step, reader.offset, reader.pending[-1].end, len(reader.pending))
        part = self.slices.get(key)
        if part is None:
            part = slice_of(list(reader.pending), reader.offset)
            if len(part.text) <= SHARED_SLICE_CHARS:
                if len(self.slices) >= KEPT_SLICES:
                    self.slices.clear()
                self.slices[key] = part
        return part

    def has_ended_for(self, reader: _Reader) -> bool:
        return self.run_ended or (reader.step is not None and reader.step in self.ended_steps)

    def remove(self, reader: _Reader) -> None:
        self.readers.discard(reader)
        if not self.readers:
            self.tails.drop(self)

    async def _state(self) -> tuple[bool, int, set[str]]:
        async with self.ctx.db.read() as session:
            row = (
                await session.execute(select(Run.status, Run.log_length).where(Run.id == self.run_id))
            ).one()
            ended_steps = set(
                await session.scalars(
                    select(RunStep.name).where(
                        RunStep.run_id == self.run_id, RunStep.status.in_(FINISHED_STEP_VALUES)
                    )
                )
            )
        return row.status in FINISHED_VALUES, int(row.log_length), ended_steps

    async def _pump(self) -> None:
        try:
            async with self.ctx.pubsub.subscribe(run_channel(self.run_id)) as events:
                self.run_ended, self.position, self.ended_steps = await self._state()
                self.ready.set()
                while not self.run_ended:
                    event = await events.next(SAFETY_POLL_SECONDS)
                    batch = [event, *events.pending()] if event is not None else []
                    if any(isinstance(e, Closed) for e in batch):
                        break
                    await self._handle(batch)
        except asyncio.CancelledError:
            raise
        except BaseException as error:
            log.exception("the log tail of run %s failed", self.run_id)
            self.failure = error
        finally:
            self.run_ended = True
            self.ready.set()
            for reader in self.readers:
                reader.end()
            self.tails.drop(self)

    async def _handle(self, batch: list[Event]) -> None:
        if not batch or any(isinstance(e, Resync) for e in batch):
            # No event for a while, or events may have been missed: look at the database itself.
            ended, length, steps = await self._state()
            if length > self.position:
                await self._read_new()
            self._end_steps(steps - self.ended_steps)
            self.run_ended = ended
            return
        news = any(isinstance(e, LogAppended) and e.end > self.position for e in batch)
        step_events = [e for e in batch if isinstance(e, StepChanged)]
        step_ends = {e.step for e in step_events if e.status in FINISHED_STEP_STATUSES}
        restarted = {e.step for e in step_events if e.status not in FINISHED_STEP_STATUSES}
        finished = any(isinstance(e, RunStatusChanged) and e.status in FINISHED for e in batch)
        if news or step_ends or finished:
            # A step's (or the run's) last text was stored before its end was announced.
            await self._read_new()
        self.ended_steps -= restarted - step_ends
        self._end_steps(step_ends)
        self.run_ended = finished

    async def _read_new(self) -> None:
        while True:
            async with self.ctx.db.read() as session:
                chunks = await read_chunks(session, self.run_id, self.position, at_boundary=True)
            for chunk in chunks:
                for reader in self.readers:
                    reader.take(chunk)
            if chunks:
                self.position = chunks[-1].end
            if len(chunks) < PAGE_CHUNKS:
                return

    def _end_steps(self, steps: set[str]) -> None:
        self.ended_steps |= steps
        for reader in self.readers:
            if reader.step in steps:
                reader.end()


class LogTails:
    """The tails of one process, one per run with live readers."""

    def __init__(self, ctx: LogSources) -> None:
        self.ctx = ctx
        self._tails: dict[str, _RunTail] = {}

    def drop(self, tail: _RunTail) -> None:
        if self._tails.get(tail.run_id) is tail:
            del self._tails[tail.run_id]
            if not tail.task.done() and asyncio.current_task() is not tail.task:
                tail.task.cancel()

    async def follow(self, run_id: str, step: str | None, offset: int) -> AsyncIterator[LogSlice]:
        """The log from `offset`, live, until the run (or the step) ends."""
        tail = self._tails.get(run_id)
        if tail is None or tail.run_ended:
            tail = self._tails[run_id] = _RunTail(self, run_id)
        reader = _Reader(step, offset)
        tail.add(reader)
        try:
            await tail.ready.wait()
            if tail.failure is not None:
                raise tail.failure
            if tail.has_ended_for(reader):
                reader.end()
            while True:
                if reader.behind:
                    # Everything before tail.position is stored; what comes after it is handed
                    # to this reader from now on.
                    reader.behind = False
                    reader.pending.clear()
                    async for part in stream_log(self.ctx, run_id, step, reader.offset, before=tail.position):
                        reader.offset = part.next_offset
                        yield part
                    continue
                if reader.pending:
                    part = tail.slice_for(reader)
                    reader.pending.clear()
                    if part.text:
                        reader.offset = part.next_offset
                        yield part
                    continue
                if reader.ended:
                    if tail.failure is not None:
                        raise tail.failure
                    return
                reader.wake.clear()
                await reader.wake.wait()
        finally:
            tail.remove(reader)


async def follow_log(
    ctx: LiveLogSources, run_id: str, step: str | None = None, offset: int = 0
) -> AsyncIterator[LogSlice]:
    """The log (or one step's) from `offset`, live, until the run (or step) ends."""
    async for part in ctx.log_tails.follow(run_id, step, offset):
        yield part
