"""A served control plane closes a WebSocket whose message nests too deep, with a close frame."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from conftest import LiveServer
from test_malformed_input import DEEP, DEEP_OBJECT


async def test_a_deep_websocket_message_closes_the_socket_with_a_close_frame(
    server: LiveServer, tenant: Any
) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed

    from support.graphql_ws import PROTOCOL

    url = server.url.replace("http://", "ws://") + "/graphql"
    for message in (DEEP, DEEP_OBJECT, "42", '"ping"', "[]", '{"type": "ping", "n": ' + "7" * 5000 + "}"):
        async with connect(url, subprotocols=[PROTOCOL]) as ws:
            await ws.send(
                json.dumps(
                    {"type": "connection_init", "payload": {"authorization": f"Bearer {tenant.token}"}}
                )
            )
            assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "connection_ack"
            await ws.send(message)
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 10)
            # A close frame from the server, with the protocol's code for an invalid message.
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 4400, message[:40]
    # The server is still answering.
    async with httpx.AsyncClient() as http:
        assert (await http.get(server.url + "/healthz")).status_code == 200
