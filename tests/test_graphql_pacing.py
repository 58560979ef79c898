"""Long GraphQL lists share the event loop (api/graphql/pacing.py): many lists completing side by
side hold one turn of the loop for about a slice, however many there are; a turn whose list
work is short gives nothing up."""

from __future__ import annotations

import asyncio
import time

from firstlume.api.graphql.pacing import SLICE, paced

LISTS = 40
ITEMS = 50
ITEM_SECONDS = 0.0005


def work(seconds: float) -> None:
    """An item's completion: the interpreter busy for `seconds`."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


async def test_lists_side_by_side_hold_a_turn_of_the_loop_for_about_one_slice() -> None:
    # 40 lists of 50 items of 0.5 ms: 1 s of work. Completed in one go, one turn would last the
    # whole second; with a slice per list, 40 slices (0.4 s).
    done: list[list[int]] = []
    turns: list[float] = []
    finished = False

    async def complete() -> None:
        items = []
        async for item in paced(range(ITEMS)):
            work(ITEM_SECONDS)
            items.append(item)
        done.append(items)

    async def ticker() -> None:
        last = time.perf_counter()
        while not finished:
            await asyncio.sleep(0)
            now = time.perf_counter()
            turns.append(now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    await asyncio.gather(*(complete() for _ in range(LISTS)))
    finished = True
    await ticking

    assert done == [list(range(ITEMS))] * LISTS
    # A turn holds one slice of list work, its one item past the slice, and the other lists'
    # look at the clock; the rest of the bound is room for a loaded machine's scheduler.
    assert max(turns) < 0.15, sorted(turns)[-5:]
    # Whole slices, not a turn per item (2,000 turns).
    work_seconds = LISTS * ITEMS * ITEM_SECONDS
    assert len(turns) < 4 * work_seconds / SLICE, len(turns)


async def test_a_short_list_completes_without_giving_the_loop_up() -> None:
    other_ran = asyncio.Event()

    async def other() -> None:
        other_ran.set()

    waiting = asyncio.create_task(other())  # ready: it runs at the loop's next turn
    items = [item async for item in paced(range(100))]
    assert items == list(range(100))
    assert not other_ran.is_set()
    await waiting
    assert other_ran.is_set()
