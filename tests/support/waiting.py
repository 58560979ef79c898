"""The one way a test waits: for a condition, with a deadline, failing with what it waited for.

    run = wait_until(lambda: api.run(run_id)["status"] == "applied" and api.run(run_id), 30, "the apply")
    rows = await until(lambda: count_rows(ctx), 5, "the relay to publish")   # sync or async condition

Never a fixed sleep where something can be awaited: a sleep is either too short on a loaded
machine (a flaky test) or too long everywhere else (a slow one)."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

T = TypeVar("T")

# How often a condition is asked again: often enough that a test waits little past the moment,
# rarely enough that the asking is not the load.
INTERVAL = 0.05


def wait_until(condition: Callable[[], T], timeout: float, what: str, interval: float = INTERVAL) -> T:
    """Asks `condition` until it returns a truthy value and returns that value; fails the test
    after `timeout` seconds, naming `what` it waited for."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


async def until(
    condition: Callable[[], T | Awaitable[T]], seconds: float, what: str, interval: float = INTERVAL
) -> T:
    """`wait_until` inside the event loop: the condition may be a coroutine function, and the
    loop runs on (the app, its relay, its scheduler) between two askings."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {seconds}s waiting for {what}")
        await asyncio.sleep(interval)
