"""Long lists share the event loop: a list field that may hold thousands of objects is an async
iterable (graphql-core completes those item by item, awaiting each), and between two items it
gives the loop back once the current slice of work has lasted SLICE seconds.

Without it, the most expensive query the cost limit allows (100 runs, each with its stack's 100
runs) completes its 10,000 objects in a few long stretches of one event loop, and every other
request of the process (/healthz among them) waits seconds behind them.

The slice is the loop's, not the list's: the pages of one query complete side by side (100 of
them in that query), and a slice per list would let each of them run its slice before the loop
polls its sockets again. The first list to go past the slice pauses them all until the loop has
been round once, so one turn of the loop holds about SLICE of this work, however many lists are
open. A query with short lists (a stack page of 20 runs) never pauses.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable
from typing import TypeVar

T = TypeVar("T")

# Seconds of list completion in one turn of the event loop: short beside /healthz's 200 ms, long
# beside one object's completion (a run with a few dozen fields: well under a millisecond).
SLICE = 0.01


class Pacer:
    """The current slice of one event loop's list work."""

    def __init__(self, slice_seconds: float = SLICE) -> None:
        self.slice_seconds = slice_seconds
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = 0.0
        self._paused = False

    async def pace(self) -> None:
        """Returns at once while the slice lasts; past it, returns after the loop has run what
        else was ready and polled its sockets."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a new loop (a test's): nothing of the old one holds
            self._loop, self._paused, self._started = loop, False, time.perf_counter()
        while self._paused or time.perf_counter() - self._started > self.slice_seconds:
            if not self._paused:
                self._paused = True
                # Ready before the paused lists' own wake-ups: the next turn starts a new slice.
                loop.call_soon(self._resume)
            await asyncio.sleep(0)

    def _resume(self) -> None:
        self._paused = False
        self._started = time.perf_counter()


PACER = Pacer()


async def paced(items: Iterable[T]) -> AsyncIterator[T]:
    """`items`, one at a time, pausing between them when the loop's slice is spent."""
    for item in items:
        await PACER.pace()
        yield item
