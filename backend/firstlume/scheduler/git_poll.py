"""The poll loop: every FIRSTLUME_GIT_POLL_INTERVAL seconds one replica asks the triggered
stacks' repositories for their branch heads (services/git/polling.py)."""

from __future__ import annotations

import logging
import uuid

from firstlume.background import BackgroundService
from firstlume.services.context import Context
from firstlume.services.git.polling import claim_poll, poll_once
from firstlume.services.git.remote import GitCache

log = logging.getLogger("firstlume.git")

# How often a replica checks whether the lease is free: often enough to poll on time.
MAX_CHECK_SECONDS = 5.0


class GitPoller(BackgroundService):
    def __init__(self, ctx: Context, cache: GitCache, interval: float) -> None:
        super().__init__("git-poll", interval=min(interval / 4, MAX_CHECK_SECONDS), log=log)
        self.ctx = ctx
        self.cache = cache
        self.poll_interval = interval
        self.holder = uuid.uuid4().hex[:12]

    async def run_pass(self) -> None:
        if await claim_poll(self.ctx, self.poll_interval, self.holder):
            await poll_once(self.ctx, self.cache)
