"""Which of this process's open subscriptions lost their token: one query for all of them.

A subscription may stay open for hours; its token may be revoked or expire meanwhile. Each one
checking the database on its own would cost a query per subscriber every few seconds (500 live
log readers: hundreds of queries a second). Instead the process keeps one watcher: every
`CHECK_SECONDS` it asks once which of the watched tokens can no longer be used, and wakes the
subscriptions holding those.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Protocol

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.background import BackgroundService
from firstlume.db.engine import Database
from firstlume.db.models import ApiToken
from firstlume.db.types import utcnow

log = logging.getLogger(__name__)

# A revoked token's subscriptions end within this (plus one query): well inside the 5 s promised.
CHECK_SECONDS = 1.5


async def unusable_tokens(session: AsyncSession, token_ids: Iterable[str]) -> set[str]:
    """Of `token_ids`, those revoked, expired or gone."""
    wanted = set(token_ids)
    usable = await session.scalars(
        select(ApiToken.id).where(
            ApiToken.id.in_(wanted),
            ApiToken.revoked_at.is_(None),
            or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > utcnow()),
        )
    )
    return wanted - set(usable)


class HasDatabase(Protocol):
    """The services' Context, which holds this process's watch (and is not imported here)."""

    @property
    def db(self) -> Database: ...


class TokenWatch(BackgroundService):
    """A pass every CHECK_SECONDS (background.py); one without watchers asks nothing. Started
    with the app, or by the first subscription where there is none (the CLI, tests)."""

    def __init__(self, ctx: HasDatabase) -> None:
        super().__init__("token-watch", interval=CHECK_SECONDS, log=log)
        self._ctx = ctx
        self._watchers: dict[str, set[asyncio.Event]] = {}
        self._callbacks: dict[asyncio.Event, Callable[[], None]] = {}

    @asynccontextmanager
    async def watching(
        self, token_id: str, on_revoked: Callable[[], None] | None = None
    ) -> AsyncIterator[asyncio.Event]:
        """An event set once `token_id` can no longer be used, while the block runs; `on_revoked`
        is called then too, for a waiter that cannot race each of its awaits against the event."""
        revoked = asyncio.Event()
        self._watchers.setdefault(token_id, set()).add(revoked)
        if on_revoked is not None:
            self._callbacks[revoked] = on_revoked
        if not self.stopping:  # a watch the app stopped stays stopped
            await self.start()
        try:
            yield revoked
        finally:
            self._callbacks.pop(revoked, None)
            waiting = self._watchers.get(token_id)
            if waiting is not None:
                waiting.discard(revoked)
                if not waiting:
                    del self._watchers[token_id]

    async def run_pass(self) -> None:
        if not self._watchers:
            return
        async with self._ctx.db.read() as session:
            gone = await unusable_tokens(session, list(self._watchers))
        for token_id in gone:
            for revoked in list(self._watchers.get(token_id, ())):
                revoked.set()
                callback = self._callbacks.get(revoked)
                if callback is not None:
                    callback()
