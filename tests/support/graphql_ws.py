"""A tiny graphql-transport-ws client for tests, over the `websockets` package.

    async with GraphQLWebSocket.connect(url, token) as ws:
        sub = await ws.subscribe("subscription($id: ID!) { ... }", {"id": run_id})
        first = await sub.next()            # the `data` of the next `next` message
        rest = await sub.until_complete()   # every `data` until the server completes it

Every raw text frame received is kept in `ws.transcript` (for scans such as "no secret in any
message"). Waits take timeouts and fail loudly; nothing sleeps and hopes.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from ssl import SSLContext
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Subprotocol

PROTOCOL = Subprotocol("graphql-transport-ws")
DEFAULT_TIMEOUT = 20.0


class Rejected(Exception):
    """The server closed the connection instead of acknowledging it."""

    def __init__(self, code: int | None, reason: str) -> None:
        super().__init__(f"connection closed with {code}: {reason}")
        self.code = code
        self.reason = reason


class SubscriptionError(Exception):
    """An `error` message: the operation was refused before it produced anything."""

    def __init__(self, payload: Any) -> None:
        super().__init__(json.dumps(payload))
        self.payload = payload


class Completed(Exception):
    pass


_DONE = object()


def ws_url(http_url: str) -> str:
    return "ws" + http_url.removeprefix("http") + "/graphql"


class Subscription:
    def __init__(self, client: GraphQLWebSocket, op_id: str) -> None:
        self.client = client
        self.id = op_id
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.completed = False

    async def next_payload(self, within: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The next `next` payload (data and errors); Completed when the server completed it."""
        if self.completed:
            raise Completed(self.id)
        try:
            message = await asyncio.wait_for(self.queue.get(), within)
        except TimeoutError:
            raise AssertionError(f"no message on subscription {self.id} within {within}s") from None
        if message is _DONE:
            self.completed = True
            raise Completed(self.id)
        if message["type"] == "error":
            self.completed = True
            raise SubscriptionError(message.get("payload"))
        return message["payload"]  # type: ignore[no-any-return]

    async def next(self, within: float = DEFAULT_TIMEOUT) -> Any:
        """The next result's `data`; an AssertionError if it carries errors."""
        payload = await self.next_payload(within)
        if payload.get("errors"):
            raise AssertionError(f"subscription {self.id} answered errors: {payload['errors']}")
        return payload["data"]

    async def until(self, condition: Callable[[Any], bool], within: float = DEFAULT_TIMEOUT) -> list[Any]:
        """Every `data` received until one meets `condition` (included)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        seen = []
        while True:
            data = await self.next(max(0.01, deadline - loop.time()))
            seen.append(data)
            if condition(data):
                return seen

    async def until_complete(self, within: float = DEFAULT_TIMEOUT) -> list[Any]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        seen = []
        while True:
            try:
                seen.append(await self.next(max(0.01, deadline - loop.time())))
            except Completed:
                return seen

    async def stop(self) -> None:
        await self.client.send({"id": self.id, "type": "complete"})
        self.client.subscriptions.pop(self.id, None)


class GraphQLWebSocket:
    def __init__(self, connection: ClientConnection) -> None:
        self.connection = connection
        self.subscriptions: dict[str, Subscription] = {}
        self.transcript: list[str] = []
        self._ids = itertools.count(1)
        self._reader: asyncio.Task[None] | None = None
        self.closed: asyncio.Future[tuple[int | None, str]] = asyncio.get_running_loop().create_future()

    @classmethod
    @asynccontextmanager
    async def connect(
        cls,
        url: str,
        token: str | None = None,
        *,
        payload: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        within: float = DEFAULT_TIMEOUT,
        ssl: SSLContext | None = None,
    ) -> AsyncIterator[GraphQLWebSocket]:
        """Opens, sends connection_init (with `{"authorization": "Bearer <token>"}` unless a
        payload is given) and waits for connection_ack; Rejected if the server closes instead."""
        if payload is None:
            payload = {"authorization": f"Bearer {token}"} if token is not None else {}
        async with ws_connect(
            url,
            subprotocols=[PROTOCOL],
            additional_headers=headers,
            open_timeout=within,
            **({"ssl": ssl} if ssl is not None else {}),
        ) as conn:
            client = cls(conn)
            await client.send({"type": "connection_init", "payload": payload})
            try:
                first = json.loads(await asyncio.wait_for(conn.recv(), within))
            except ConnectionClosed as closed:
                raise Rejected(
                    closed.rcvd.code if closed.rcvd else None, closed.rcvd.reason if closed.rcvd else ""
                ) from None
            client.transcript.append(json.dumps(first))
            if first.get("type") != "connection_ack":
                raise AssertionError(f"expected connection_ack, got {first}")
            client._reader = asyncio.create_task(client._read())
            try:
                yield client
            finally:
                client._reader.cancel()
                with suppress(asyncio.CancelledError):
                    await client._reader

    async def send(self, message: dict[str, Any]) -> None:
        await self.connection.send(json.dumps(message))

    async def subscribe(self, query: str, variables: dict[str, Any] | None = None) -> Subscription:
        op_id = str(next(self._ids))
        subscription = Subscription(self, op_id)
        self.subscriptions[op_id] = subscription
        await self.send(
            {"id": op_id, "type": "subscribe", "payload": {"query": query, "variables": variables or {}}}
        )
        return subscription

    async def execute(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """A query or mutation over the socket: its single result payload."""
        subscription = await self.subscribe(query, variables)
        payload = await subscription.next_payload()
        with suppress(Completed):
            await subscription.next_payload()
        return payload

    async def _read(self) -> None:
        try:
            async for raw in self.connection:
                text = raw if isinstance(raw, str) else raw.decode()
                self.transcript.append(text)
                message = json.loads(text)
                kind = message.get("type")
                if kind == "ping":
                    await self.send({"type": "pong"})
                    continue
                subscription = self.subscriptions.get(message.get("id", ""))
                if subscription is None:
                    continue
                if kind == "complete":
                    subscription.queue.put_nowait(_DONE)
                else:
                    subscription.queue.put_nowait(message)
        except ConnectionClosed:
            pass
        finally:
            if not self.closed.done():
                self.closed.set_result((self.connection.close_code, self.connection.close_reason or ""))
            for subscription in self.subscriptions.values():
                subscription.queue.put_nowait(_DONE)
