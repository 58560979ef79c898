"""The poll loop: every FIRSTLUME_GIT_POLL_INTERVAL seconds one replica asks the triggered
stacks' repositories for their branch heads (services/git/polling.py)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from contextlib import suppress

from firstlume.services.context import Context
from firstlume.services.git.polling import claim_poll, poll_once
from firstlume.services.git.remote import GitCache

log = logging.getLogger("firstlume.git")

# How often a replica checks whether the lease is free: often enough to poll on time.
MAX_CHECK_SECONDS = 5.0


class GitPoller:
    def __init__(self, ctx: Context, cache: GitCache, interval: float) -> None:
        self.ctx = ctx
        self.cache = cache
        self.interval = interval
        self.holder = uuid.uuid4().hex[:12]
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="firstlume-git-poll")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _loop(self) -> None:
        while True:
            try:
                if await claim_poll(self.ctx, self.interval, self.holder):
                    await poll_once(self.ctx, self.cache)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("polling Git repositories failed")
            await asyncio.sleep(min(self.interval / 4, MAX_CHECK_SECONDS))
