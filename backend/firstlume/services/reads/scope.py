"""One read session for everything one request reads.

A GraphQL operation resolves its fields concurrently and its DataLoaders dispatch batches in
separate tasks, but an AsyncSession must not be used by two tasks at once: the reads take turns
on the one session (they would queue for the one connection anyway). A scope opened for a
request is closed by whoever opened it; a scope without an owner (a WebSocket connection, which
may live for hours) opens a short read transaction per use instead of holding a connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncSession

from firstlume.db.engine import Database


class ReadScope:
    def __init__(self, db: Database, *, shared: bool = True) -> None:
        self.db = db
        self.shared = shared
        self._turn = asyncio.Lock()
        self._session: AsyncSession | None = None
        self._opened: AbstractAsyncContextManager[AsyncSession] | None = None

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        if not self.shared:
            async with self.db.read() as session:
                yield session
            return
        async with self._turn:
            if self._session is None:
                self._opened = self.db.read()
                self._session = await self._opened.__aenter__()
            yield self._session

    async def close(self) -> None:
        """Ends the read transaction and returns its connection; a later read opens a new one."""
        async with self._turn:
            opened, self._opened, self._session = self._opened, None, None
            if opened is not None:
                await opened.__aexit__(None, None, None)
