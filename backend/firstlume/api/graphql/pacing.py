"""Long lists share the event loop: a list field that may hold thousands of objects is an async
iterable (graphql-core completes those item by item, awaiting each), and between two items it
gives the loop back once the list work of the current turn of the loop has lasted SLICE seconds.

Without it, the most expensive query the cost limit allows (100 runs, each with its stack's 100
runs) completes its 10,000 objects in a few long turns of the one event loop, and every other
request of the process (/healthz among them) waits seconds behind them.

The slice belongs to the turn of the loop, not to a list: the pages of one query complete side
by side (100 of them in that query), and a slice per list would let each of them run its slice
before the loop polls its sockets again. Once a turn's list work has lasted SLICE, every list
waits for the next turn, so one turn holds about SLICE of it, however many lists are open. A
turn whose list work is shorter (a stack page of 20 runs) never waits.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import AsyncIterator, Iterable
from typing import TypeVar

T = TypeVar("T")

# Seconds of list completion in one turn of the event loop: short beside /healthz's 200 ms, long
# beside one item's completion (a run with a few dozen fields: well under a millisecond).
SLICE = 0.01


class _Turn:
    """When the list work of the loop's current turn started; None before any."""

    def __init__(self) -> None:
        self.started: float | None = None

    def over(self) -> None:
        self.started = None


_turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turn] = weakref.WeakKeyDictionary()


async def pace(slice_seconds: float = SLICE) -> None:
    """Returns at once while the list work of this turn of the loop is within `slice_seconds`;
    past it, returns in a later turn, after the loop has polled its sockets and run what else
    was ready."""
    loop = asyncio.get_running_loop()
    turn = _turns.get(loop)
    if turn is None:
        turn = _turns[loop] = _Turn()
    while True:
        if turn.started is None:  # the first list work of this turn
            turn.started = time.perf_counter()
            # Runs first in the next turn, before the lists that wait for it.
            loop.call_soon(turn.over)
            return
        if time.perf_counter() - turn.started <= slice_seconds:
            return
        await asyncio.sleep(0)


async def paced(items: Iterable[T], slice_seconds: float = SLICE) -> AsyncIterator[T]:
    """`items`, one at a time, each after `pace`."""
    for item in items:
        await pace(slice_seconds)
        yield item
