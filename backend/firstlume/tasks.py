"""Stopping background tasks: the executor's shippers (logs, resource states, reports,
heartbeats). The control plane's loops are background services (background.py)."""

from __future__ import annotations

import asyncio
from typing import Any


async def cancel_and_wait(task: asyncio.Task[Any] | None) -> None:
    """Cancels `task` and waits until it is over, so that nothing it does outlives its owner's
    stop. Its cancellation is expected; an error it ended with before the cancel took effect is
    raised here, where the owner can deal with it."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
