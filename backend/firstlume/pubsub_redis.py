"""The Redis backend of pubsub.py (FIRSTLUME_PUBSUB_URL=redis://… or rediss://…).

broadcaster's own Redis backend is not used: its listener task dies with the first lost
connection, and redis-py's pub/sub, left to itself, reconnects and subscribes again without a
word, so a subscriber would never learn that events went by meanwhile. Here, as on PostgreSQL
(pubsub.py `_ReconnectingPostgresBackend`), a lost connection is reconnected
(retry.BROKER_RECONNECT), every channel then subscribed is subscribed again, and each of its
subscribers gets a `Resync`: the same event that makes every live view read what is stored
again, through the same code (pubsub.Subscription.next answers None).

Redis PUBLISH is fire-and-forget, like NOTIFY: an event published while a subscriber's
connection is down is lost for it, which the Resync repairs from the database.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from contextlib import suppress
from typing import Any
from urllib.parse import urlsplit

from broadcaster._backends.base import BroadcastBackend
from broadcaster._base import Event as BroadcastEvent
from redis import asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from firstlume import retry
from firstlume.protocol.events import Resync, encode

log = logging.getLogger("firstlume.pubsub")

# What ends a Redis connection from the outside, as redis-py reports it.
CONNECTION_ERRORS = (OSError, RedisConnectionError, RedisTimeoutError, TimeoutError)

# Subscribed for as long as the backend is connected: a connection subscribed to nothing cannot
# be read from, and this keeps the one reader loop simple (and notices a dead connection).
ALIVE_CHANNEL = "firstlume_pubsub_alive"
# How long one read waits before the loop looks again (seconds).
READ_TIMEOUT = 1.0
# redis-py PINGs the subscribed connection when it was silent this long (seconds), so that a
# connection that died without a word (a dropped network path) is noticed.
HEALTH_CHECK_SECONDS = 10


CLIENT_NAME = "firstlume-pubsub"
# How long a SUBSCRIBE waits for Redis to have processed it (seconds). Past it, the connection is
# in trouble: its reader reconnects, and every subscriber then gets a Resync.
SUBSCRIBED_WITHIN = 10.0


class BrokerUnreachable(Exception):
    """The broker could not be reached when the control plane started."""


def where(url: str) -> str:
    """host:port of a Redis URL, never its password."""
    parts = urlsplit(url)
    return f"{parts.hostname or '127.0.0.1'}:{parts.port or 6379}"


class PublishRefused(Exception):
    """A publish that could not be handed to Redis; pubsub.PubSub turns it into PublishFailed."""


class ReconnectingRedisBackend(BroadcastBackend):
    """PUBLISH on a pooled client; SUBSCRIBE on one pub/sub connection that comes back after it
    is lost, followed by a Resync on every channel."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._channels: set[str] = set()
        self._queue: asyncio.Queue[BroadcastEvent] = asyncio.Queue()
        self._turn = asyncio.Lock()  # subscribing, and reopening the pub/sub connection, take turns
        self._client: aioredis.Redis | None = None
        self._pubsub: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._closing = False
        # PINGs sent on the pub/sub connection, by token, until their answer is read.
        self._pings: dict[str, asyncio.Future[None]] = {}

    def _new_client(self) -> aioredis.Redis:
        # No silent retries: a lost connection must be seen here, to send the Resync.
        return aioredis.Redis.from_url(
            self._url,
            retry=Retry(NoBackoff(), 0),
            health_check_interval=HEALTH_CHECK_SECONDS,
            socket_connect_timeout=5,
            # How the connections show in CLIENT LIST (a `client_name` in the URL wins).
            client_name=CLIENT_NAME,
        )

    async def connect(self) -> None:
        self._closing = False
        self._client = self._new_client()
        try:
            await self._client.ping()
            self._pubsub = await self._open()
        except CONNECTION_ERRORS as error:
            await self._client.aclose()
            self._client = None
            raise BrokerUnreachable(
                f"The pub/sub broker, Redis at {where(self._url)} (FIRSTLUME_PUBSUB_URL), cannot be "
                f"reached: {error}"
            ) from None
        self._reader = asyncio.create_task(self._read_forever(), name="firstlume-pubsub-redis")

    async def disconnect(self) -> None:
        self._closing = True
        if self._reader is not None:
            self._reader.cancel()
            with suppress(asyncio.CancelledError):
                await self._reader
            self._reader = None
        if self._pubsub is not None:
            with suppress(*CONNECTION_ERRORS):
                await self._pubsub.aclose()
            self._pubsub = None
        if self._client is not None:
            with suppress(*CONNECTION_ERRORS):
                await self._client.aclose()
            self._client = None

    async def _open(self) -> Any:
        """A pub/sub connection subscribed to every channel that has subscribers."""
        assert self._client is not None
        pubsub: Any = self._client.pubsub(ignore_subscribe_messages=True)  # redis-py's PubSub is untyped
        try:
            await pubsub.subscribe(ALIVE_CHANNEL, *sorted(self._channels))
        except BaseException:
            with suppress(*CONNECTION_ERRORS):
                await pubsub.aclose()
            raise
        return pubsub

    async def _read_forever(self) -> None:
        while True:
            pubsub = self._pubsub
            try:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=READ_TIMEOUT)
            except CONNECTION_ERRORS:
                if self._closing:
                    return
                await self._reconnect(pubsub)
                continue
            if message is not None and message.get("type") == "pong":
                self._answered(_text(message["data"]))
                continue
            if message is None or message.get("type") != "message":
                continue
            channel = _text(message["channel"])
            if channel != ALIVE_CHANNEL:
                self._queue.put_nowait(BroadcastEvent(channel=channel, message=_text(message["data"])))

    async def _reconnect(self, lost: Any) -> None:
        log.warning("the pub/sub connection to Redis at %s was lost; reconnecting", where(self._url))
        with suppress(*CONNECTION_ERRORS):
            await lost.aclose()
        async for attempt in retry.BROKER_RECONNECT.retrying(
            CONNECTION_ERRORS, log=log, what="reconnecting the pub/sub connection to Redis"
        ):
            with attempt:
                async with self._turn:
                    self._pubsub = await self._open()
        log.warning("the pub/sub connection to Redis at %s is back", where(self._url))
        # Events published meanwhile were lost for this process: every subscriber reads again.
        resync = encode(Resync())
        for channel in list(self._channels):
            self._queue.put_nowait(BroadcastEvent(channel=channel, message=resync))

    async def subscribe(self, channel: str) -> None:
        """Returns once Redis has processed the SUBSCRIBE, as LISTEN does on PostgreSQL: a live
        view subscribes, then reads what is stored, and an event published in between must reach
        it. redis-py only sends the command; a PING sent after it on the same connection is
        answered after it, so its answer says that the subscription is in place. (Without it, a
        busy Redis could read a PUBLISH from another connection first, and the view waited for
        its safety re-read: tests/test_pubsub_redis.py, in CI.)"""
        self._channels.add(channel)
        await self._on_connection("subscribe", channel)
        if self._pubsub is None:  # not connected: nothing to wait for
            return
        token = uuid.uuid4().hex
        answered = self._pings[token] = asyncio.get_running_loop().create_future()
        try:
            async with self._turn:
                await self._pubsub.ping(token)
            await asyncio.wait_for(answered, SUBSCRIBED_WITHIN)
        except (*CONNECTION_ERRORS, TimeoutError):
            pass  # the reader reconnects, subscribes again and sends a Resync
        finally:
            self._pings.pop(token, None)

    def _answered(self, token: str) -> None:
        answered = self._pings.get(token)
        if answered is not None and not answered.done():
            answered.set_result(None)

    async def unsubscribe(self, channel: str) -> None:
        self._channels.discard(channel)
        await self._on_connection("unsubscribe", channel)

    async def _on_connection(self, command: str, channel: str) -> None:
        """SUBSCRIBE and UNSUBSCRIBE never fail a subscriber: while the connection is down, the
        reconnect subscribes to every channel then subscribed (the reader notices the loss)."""
        async with self._turn:
            with suppress(*CONNECTION_ERRORS):
                await getattr(self._pubsub, command)(channel)

    async def publish(self, channel: str, message: Any) -> None:
        await self.publish_many([(channel, message)])

    async def publish_many(self, messages: Sequence[tuple[str, str]]) -> None:
        """Every (channel, message) in one MULTI/EXEC, in order: all are sent, or none."""
        if self._client is None:
            raise PublishRefused("The pub/sub is not connected to Redis.")
        try:
            async with self._client.pipeline(transaction=True) as pipe:
                for channel, message in messages:
                    pipe.publish(channel, message)
                await pipe.execute()
        except CONNECTION_ERRORS as error:
            raise PublishRefused(
                f"The event connection to Redis at {where(self._url)} failed: {error}"
            ) from None

    async def next_published(self) -> BroadcastEvent:
        return await self._queue.get()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
