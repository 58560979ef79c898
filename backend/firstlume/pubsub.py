"""Live events between processes. The only module that imports `broadcaster` (with its Redis
backend, pubsub_redis.py).

Three brokers, chosen by FIRSTLUME_PUBSUB_URL: `memory://` (one process), PostgreSQL LISTEN/NOTIFY
(`postgres://…`, the default with a PostgreSQL database) and Redis (`redis://…`, `rediss://…`).

Messages are the typed events of protocol/events.py: small JSON envelopes (ids, statuses,
offsets), never whole logs, since PostgreSQL NOTIFY payloads must stay under 8000 bytes. A
subscriber that needs data reads it from the database, which stays the source of truth.

On PostgreSQL and on Redis the event connection survives the server ending it (a restart, a failover,
`pg_terminate_backend`): it reconnects (retry.BROKER_RECONNECT), listens again on every channel that has
subscribers, and then gives each of them a `Resync`, since events sent meanwhile were lost.
While it is down, `publish` raises PublishFailed at once; callers decide whether to retry (the
outbox relay) or to drop a best-effort wake-up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any

import asyncpg
from broadcaster import Broadcast
from broadcaster._backends.base import BroadcastBackend
from broadcaster._base import Event as BroadcastEvent
from broadcaster._base import Unsubscribed
from prometheus_client import Counter
from pydantic import ValidationError

from firstlume import retry
from firstlume.protocol.events import Closed, Event, Resync, decode, encode
from firstlume.pubsub_redis import ReconnectingRedisBackend

log = logging.getLogger("firstlume.pubsub")


def run_channel(run_id: str) -> str:
    return f"run_{run_id}"


def org_runs_channel(org_id: str) -> str:
    return f"org_{org_id}"


def org_git_channel(org_id: str) -> str:
    return f"git_{org_id}"


SCHEDULER_CHANNEL = "firstlume_scheduler"


class PublishFailed(Exception):
    """The event could not be handed to the broker (its connection is down)."""


PUBLISH_FAILURES = Counter(
    "firstlume_event_publish_failures",
    "Events that could not be handed to the pub/sub broker, by event type.",
    ["event"],
)


# How the event connection shows in pg_stat_activity.
APPLICATION_NAME = "firstlume-pubsub"

# What ends a PostgreSQL connection from the outside, as asyncpg reports it.
CONNECTION_ERRORS = (OSError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError, TimeoutError)
# What refuses a new connection for a while: every session taken ("too many clients"), a server
# starting up or shutting down. A reconnect tries again after these too; it used to end at the
# first, and the replica then heard no live event until it restarted.
REFUSED_FOR_NOW = (*CONNECTION_ERRORS, asyncpg.TooManyConnectionsError, asyncpg.CannotConnectNowError)


class _ReconnectingPostgresBackend(BroadcastBackend):
    """LISTEN/NOTIFY on one asyncpg connection that comes back after it is lost.

    asyncpg refuses concurrent operations on one connection ("another operation is in
    progress"), so LISTEN, UNLISTEN, NOTIFY and the liveness probe take turns.
    """

    def __init__(
        self,
        url: str,
        *,
        check_interval: float = 0.5,
        probe_interval: float = 10.0,
        probe_timeout: float = 5.0,
    ) -> None:
        self._url = url
        self._check_interval = check_interval
        self._probe_interval = probe_interval
        self._probe_timeout = probe_timeout
        self._conn: asyncpg.Connection | None = None
        self._channels: set[str] = set()
        self._queue: asyncio.Queue[BroadcastEvent] = asyncio.Queue()
        self._turn = asyncio.Lock()
        self._closing = False
        self._reconnecting: asyncio.Task[None] | None = None
        self._probe: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self._closing = False
        self._conn = await self._open()
        self._probe = asyncio.create_task(self._probe_forever(), name="firstlume-pubsub-probe")

    async def disconnect(self) -> None:
        self._closing = True
        for task in (self._reconnecting, self._probe):
            if task is not None:
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
        conn, self._conn = self._conn, None
        if conn is not None and not conn.is_closed():
            with suppress(*CONNECTION_ERRORS):
                await conn.close(timeout=5)

    async def _open(self) -> asyncpg.Connection:
        conn = await asyncpg.connect(self._url, server_settings={"application_name": APPLICATION_NAME})
        try:
            for channel in sorted(self._channels):
                await conn.add_listener(channel, self._on_notification)
        except BaseException:
            conn.terminate()
            raise
        conn.add_termination_listener(self._on_terminated)
        return conn

    def _on_notification(self, _conn: Any, _pid: int, channel: str, payload: str) -> None:
        self._queue.put_nowait(BroadcastEvent(channel=channel, message=payload))

    def _on_terminated(self, conn: Any) -> None:
        self._lost(conn)

    def _lost(self, conn: Any) -> None:
        """The connection is gone (or unusable): drop it and reconnect in the background."""
        if conn is not None and conn is not self._conn:
            return  # an older connection, already replaced
        if self._conn is not None and not self._conn.is_closed():
            self._conn.terminate()
        self._conn = None
        if self._closing or (self._reconnecting is not None and not self._reconnecting.done()):
            return
        log.warning("the pub/sub connection to PostgreSQL was lost; reconnecting")
        self._reconnecting = asyncio.get_running_loop().create_task(
            self._reconnect(), name="firstlume-pubsub-reconnect"
        )

    async def _reconnect(self) -> None:
        async for attempt in retry.BROKER_RECONNECT.retrying(
            REFUSED_FOR_NOW, log=log, what="reconnecting the pub/sub connection"
        ):
            with attempt:
                async with self._turn:
                    self._conn = await self._open()
        log.warning("the pub/sub connection to PostgreSQL is back")
        resync = encode(Resync())
        for channel in list(self._channels):
            self._queue.put_nowait(BroadcastEvent(channel=channel, message=resync))

    async def _probe_forever(self) -> None:
        """asyncpg does not always call its termination listeners (when it reads the server's
        FATAL message before the socket closes, it closes the connection itself), and a
        connection can also die without a word (a dropped network path): both are noticed here."""
        ticks = 0
        while True:
            await asyncio.sleep(self._check_interval)
            ticks += 1
            conn = self._conn
            if conn is None:
                continue
            if conn.is_closed():
                self._lost(conn)
                continue
            if ticks * self._check_interval < self._probe_interval:
                continue
            ticks = 0
            try:
                async with self._turn:
                    await asyncio.wait_for(conn.execute("SELECT 1"), self._probe_timeout)
            except CONNECTION_ERRORS:
                self._lost(conn)

    async def subscribe(self, channel: str) -> None:
        self._channels.add(channel)
        await self._on_connection(lambda conn: conn.add_listener(channel, self._on_notification))

    async def unsubscribe(self, channel: str) -> None:
        self._channels.discard(channel)
        await self._on_connection(lambda conn: conn.remove_listener(channel, self._on_notification))

    async def _on_connection(self, operation: Any) -> None:
        """LISTEN and UNLISTEN never fail a subscriber: while the connection is down, the
        reconnect listens on every channel then subscribed."""
        async with self._turn:
            conn = self._conn
            if conn is None or conn.is_closed():
                self._lost(conn)
                return
            try:
                await operation(conn)
            except CONNECTION_ERRORS:
                self._lost(conn)

    async def publish(self, channel: str, message: Any) -> None:
        await self._notify("SELECT pg_notify($1, $2)", channel, message)

    async def publish_many(self, messages: Sequence[tuple[str, str]]) -> None:
        """Every (channel, message) in one statement, in order: the outbox relay's pass (an event
        goes to a run's, an organization's and the scheduler's channels) in one round trip
        instead of one each. One statement is one transaction: all are sent, or none."""
        await self._notify(
            "SELECT pg_notify(c, m) FROM unnest($1::text[], $2::text[]) AS t(c, m)",
            [channel for channel, _ in messages],
            [message for _, message in messages],
        )

    async def _notify(self, statement: str, *arguments: Any) -> None:
        async with self._turn:
            conn = self._conn
            if conn is None or conn.is_closed():
                self._lost(conn)
                raise PublishFailed("The event connection to PostgreSQL is down; it is reconnecting.")
            try:
                await conn.execute(statement, *arguments)
            except CONNECTION_ERRORS as error:
                self._lost(conn)
                raise PublishFailed(f"The event connection to PostgreSQL failed: {error}") from error

    async def next_published(self) -> BroadcastEvent:
        return await self._queue.get()


REDIS_SCHEMES = ("redis://", "rediss://")


class PubSub:
    def __init__(self, url: str) -> None:
        self.url = url
        # Kept at hand for publish_many, which broadcaster's interface has no word for.
        self._batching: _ReconnectingPostgresBackend | ReconnectingRedisBackend | None = None
        if url.startswith(("postgres://", "postgresql://")):
            self._batching = _ReconnectingPostgresBackend(url)
        elif url.startswith(REDIS_SCHEMES):
            self._batching = ReconnectingRedisBackend(url)
        self._broadcast = Broadcast(backend=self._batching) if self._batching else Broadcast(url)
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

    async def publish(self, channel: str, event: Event) -> None:
        """Hands `event` to the broker for every subscriber of `channel`, in every process.
        Raises PublishFailed when that is not possible now."""
        with self._sending([event]):
            await self._broadcast.publish(channel=channel, message=encode(event))

    async def publish_many(self, events: Sequence[tuple[str, Event]]) -> None:
        """`publish` of each (channel, event), in order; on PostgreSQL and Redis in one round trip,
        and then all or none. Raises PublishFailed when that is not possible now."""
        backend = self._batching
        if backend is None:
            for channel, event in events:
                await self.publish(channel, event)
            return
        with self._sending([event for _, event in events]):
            await backend.publish_many([(channel, encode(event)) for channel, event in events])

    @contextmanager
    def _sending(self, events: Sequence[Event]) -> Iterator[None]:
        """Refuses while not connected; any failure becomes PublishFailed, counted per event."""
        try:
            if not self._connected:
                raise PublishFailed("The pub/sub is not connected.")
            yield
        except Exception as error:
            for event in events:
                PUBLISH_FAILURES.labels(event.type).inc()
            if isinstance(error, PublishFailed):
                raise
            raise PublishFailed(f"Publishing failed: {error}") from error

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
CLOSED = Closed()


class Subscription:
    """Events of one channel, decoded. Waiting with a timeout is safe: `next` only ever cancels
    a queue read, never the iterator itself."""

    def __init__(self, subscriber: Any) -> None:
        self._subscriber = subscriber
        self.closed = False

    def _decode(self, event: Any) -> Event | None:
        if event is None:
            self.closed = True
            return CLOSED
        try:
            return decode(event.message)
        except ValidationError:
            log.warning("ignored a malformed event on %s: %.200s", event.channel, event.message)
            return None

    async def next(self, seconds: float) -> Event | None:
        """The next event; None when `seconds` pass without one, or when events may have been
        missed (the connection came back): either way, read everything again. CLOSED once the
        channel closed."""
        if self.closed:
            return CLOSED
        try:
            event = self._decode(await asyncio.wait_for(self._subscriber.get(), seconds))
        except TimeoutError:
            return None
        except Unsubscribed:
            return self._decode(None)
        return None if isinstance(event, Resync) else event

    def pending(self) -> list[Event]:
        """The events already waiting, without waiting: one read after them answers them all."""
        queue = self._subscriber._queue
        events: list[Event] = []
        while not queue.empty():
            event = self._decode(queue.get_nowait())
            if event is not None and not isinstance(event, Resync):
                events.append(event)
        return events

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Event:
        while not self.closed:
            try:
                event = self._decode(await self._subscriber.get())
            except Unsubscribed:
                event = self._decode(None)
            if event is CLOSED:
                break
            if event is not None:
                return event
        raise StopAsyncIteration
