"""Live events between processes. The only module that imports `broadcaster`.

Messages are small JSON envelopes (ids, statuses, offsets), never whole logs: PostgreSQL NOTIFY
payloads must stay under 8000 bytes. A subscriber that needs data reads it from the database,
which stays the source of truth.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from broadcaster import Broadcast
from broadcaster._backends.postgres import PostgresBackend
from broadcaster._base import Unsubscribed


def run_channel(run_id: str) -> str:
    return f"run_{run_id}"


def org_runs_channel(org_id: str) -> str:
    return f"org_{org_id}"


SCHEDULER_CHANNEL = "firstlume_scheduler"


class _SerializedPostgresBackend(PostgresBackend):
    """broadcaster shares one asyncpg connection for LISTEN and NOTIFY, and asyncpg refuses
    concurrent operations on a connection ("another operation is in progress"), so calls from
    concurrent requests and subscribers take turns."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self._turn = asyncio.Lock()

    async def subscribe(self, channel: str) -> None:
        async with self._turn:
            await super().subscribe(channel)

    async def unsubscribe(self, channel: str) -> None:
        async with self._turn:
            await super().unsubscribe(channel)

    async def publish(self, channel: str, message: str) -> None:
        async with self._turn:
            await super().publish(channel, message)


def _broadcast_for(url: str) -> Broadcast:
    if url.startswith(("postgres://", "postgresql://")):
        return Broadcast(backend=_SerializedPostgresBackend(url))
    return Broadcast(url)


class PubSub:
    def __init__(self, url: str) -> None:
        self.url = url
        self._broadcast = _broadcast_for(url)
        self._subscribing = asyncio.Lock()
        self._connected = False

    async def connect(self) -> None:
        if not self._connected:
            await self._broadcast.connect()
            self._connected = True

    async def disconnect(self) -> None:
        if self._connected:
            await self._broadcast.disconnect()
            self._connected = False

    async def publish(self, channel: str, message: dict[str, Any]) -> None:
        if self._connected:
            await self._broadcast.publish(channel=channel, message=json.dumps(message, separators=(",", ":")))

    @asynccontextmanager
    async def subscribe(self, channel: str) -> AsyncIterator[Subscription]:
        # broadcaster's subscribe/unsubscribe bookkeeping awaits the backend (LISTEN, UNLISTEN)
        # in the middle: two first subscribers to one channel racing there lose one of their
        # queues, and a subscribe racing the last unsubscribe can end up not listening. So
        # entering and leaving take turns.
        context = self._broadcast.subscribe(channel=channel)
        async with self._subscribing:
            subscriber = await context.__aenter__()
        try:
            yield Subscription(subscriber)
        finally:
            async with self._subscribing:
                await context.__aexit__(None, None, None)


# What Subscription.next and .pending give once the channel has closed (at shutdown).
CLOSED: dict[str, Any] = {"type": "closed"}


class Subscription:
    """Events of one channel, decoded. Waiting with a timeout is safe: `next` only ever cancels
    a queue read, never the iterator itself."""

    def __init__(self, subscriber: Any) -> None:
        self._subscriber = subscriber
        self.closed = False

    def _decode(self, event: Any) -> dict[str, Any]:
        if event is None:
            self.closed = True
            return CLOSED
        return json.loads(event.message)  # type: ignore[no-any-return]

    async def next(self, seconds: float) -> dict[str, Any] | None:
        """The next event; None when `seconds` pass without one; CLOSED once the channel closed."""
        if self.closed:
            return CLOSED
        try:
            return self._decode(await asyncio.wait_for(self._subscriber.get(), seconds))
        except TimeoutError:
            return None
        except Unsubscribed:
            return self._decode(None)

    def pending(self) -> list[dict[str, Any]]:
        """The events already waiting, without waiting: one read after them answers them all."""
        queue = self._subscriber._queue
        events = []
        while not queue.empty():
            events.append(self._decode(queue.get_nowait()))
        return events

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> dict[str, Any]:
        if not self.closed:
            try:
                event = self._decode(await self._subscriber.get())
            except Unsubscribed:
                event = self._decode(None)
            if event is not CLOSED:
                return event
        raise StopAsyncIteration
