"""The drift scheduler's loop inside the control plane: a pass at every whole minute of its
clock. The clock and the sleep are injectable, so tests run hours of minutes in a moment."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from datetime import datetime, timedelta

from firstlume.db.types import utcnow
from firstlume.services.context import Context
from firstlume.services.drift.schedule import forget_old_slots, queue_due_runs

log = logging.getLogger("firstlume.drift")

CLEANUP_EVERY = timedelta(hours=1)


def seconds_to_next_minute(now: datetime) -> float:
    following = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    return max((following - now).total_seconds(), 0.05)


class DriftScheduler:
    def __init__(
        self,
        ctx: Context,
        *,
        clock: Callable[[], datetime] = utcnow,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self.ctx = ctx
        self.clock = clock
        self.sleep = sleep
        self._task: asyncio.Task[None] | None = None
        self._cleaned_at: datetime | None = None
        # Every run this scheduler queued, for logs and tests.
        self.queued: list[str] = []

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="firstlume-drift-scheduler")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await task

    async def tick(self) -> list[str]:
        now = self.clock()
        queued = await queue_due_runs(self.ctx, now)
        self.queued += queued
        if self._cleaned_at is None or now - self._cleaned_at >= CLEANUP_EVERY:
            await forget_old_slots(self.ctx, now)
            self._cleaned_at = now
        if queued:
            log.info("queued %d drift run(s) for the slot of %s", len(queued), now.isoformat())
        return queued

    async def _loop(self) -> None:
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # the database is unreachable: the next minute tries again
                log.exception("the drift scheduler's pass failed")
            await self.sleep(seconds_to_next_minute(self.clock()))
