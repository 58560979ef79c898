"""The drift scheduler's loop inside the control plane: a pass at every whole minute of its
clock (background.py). The clock and the sleep are injectable, so tests run hours of minutes in a moment."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from firstlume.background import BackgroundService
from firstlume.db.types import utcnow
from firstlume.services.context import Context
from firstlume.services.drift.schedule import forget_old_slots, queue_due_runs
from firstlume.services.removal import purge_deleted_stacks

log = logging.getLogger("firstlume.drift")

CLEANUP_EVERY = timedelta(hours=1)


def seconds_to_next_minute(now: datetime) -> float:
    following = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    return max((following - now).total_seconds(), 0.05)


class DriftScheduler(BackgroundService):
    def __init__(
        self,
        ctx: Context,
        *,
        clock: Callable[[], datetime] = utcnow,
        sleep: Callable[[float], Awaitable[None]] | None = None,
    ) -> None:
        super().__init__("drift-scheduler", interval=60.0, log=log)
        self.ctx = ctx
        self.clock = clock
        self.sleep = sleep
        self._cleaned_at: datetime | None = None
        # Every run this scheduler queued, for logs and tests.
        self.queued: list[str] = []

    def next_pass_in(self) -> float:
        return seconds_to_next_minute(self.clock())

    async def pause(self, seconds: float) -> None:
        if self.sleep is None:
            await super().pause(seconds)
        else:
            await self.sleep(seconds)

    async def run_pass(self) -> None:
        await self.tick()

    async def tick(self) -> list[str]:
        now = self.clock()
        queued = await queue_due_runs(self.ctx, now)
        self.queued += queued
        if self._cleaned_at is None or now - self._cleaned_at >= CLEANUP_EVERY:
            await forget_old_slots(self.ctx, now)
            # The hourly cleanup also purges the stacks deleted longer ago than the retention.
            retention = timedelta(days=self.ctx.settings.deleted_stack_retention_days)
            async with self.ctx.db.transaction() as session:
                purged = await purge_deleted_stacks(session, now, retention)
            if purged:
                log.info("purged %d stack(s) deleted more than %s ago", len(purged), retention)
            self._cleaned_at = now
        if queued:
            log.info("queued %d drift run(s) for the slot of %s", len(queued), now.isoformat())
        return queued
