"""Clients that go away mid-subscription (closing politely, or dropping the connection) leave no
traceback in the server's log, and the subscription gauge returns to zero."""

from __future__ import annotations

import asyncio
import json

import httpx
from websockets.asyncio.client import connect

from conftest import LiveServer, Tenant, make_stack
from firstlume.services.context import Context
from support.graphql_ws import PROTOCOL, ws_url
from support.runs import start
from support.waiting import wait_until

SUBSCRIPTIONS = [
    ("subscription($org: String!, $id: ID!) { runUpdated(org: $org, runId: $id) { id } }", True),
    ("subscription($org: String!, $id: ID!) { runLog(org: $org, runId: $id) { text } }", True),
    ("subscription($org: String!, $id: ID!) { resourceStates(org: $org, runId: $id) { address } }", True),
    ("subscription($org: String!) { activeRuns(org: $org) { id } }", False),
]


def open_subscriptions(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=10).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("firstlume_active_subscriptions{")
    )


async def test_disconnecting_clients_leave_no_traceback(
    server: LiveServer, tenant: Tenant, ctx: Context
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///nowhere"})
    run_id = await start(ctx, tenant.token, tenant.org, "net", "plan")
    for rude in (False, True, True, True):
        for query, takes_run in SUBSCRIPTIONS:
            ws = await connect(ws_url(server.url), subprotocols=[PROTOCOL])
            await ws.send(
                json.dumps(
                    {"type": "connection_init", "payload": {"authorization": f"Bearer {tenant.token}"}}
                )
            )
            assert json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] == "connection_ack"
            variables = {"org": tenant.org, "id": run_id} if takes_run else {"org": tenant.org}
            await ws.send(
                json.dumps(
                    {"id": "1", "type": "subscribe", "payload": {"query": query, "variables": variables}}
                )
            )
            message = json.loads(await asyncio.wait_for(ws.recv(), 10))
            assert message["type"] == "next", message
            if rude:
                ws.transport.abort()  # the connection drops: no close frame
            else:
                await ws.close()
    await asyncio.to_thread(
        wait_until, lambda: open_subscriptions(server.url) == 0, 20, "every subscription to end"
    )
    await asyncio.sleep(1)  # a traceback logged as the last one ends would come now
    log = server.log()
    assert "Traceback" not in log and "ERROR" not in log.upper().replace("ERRORS", ""), log[-4000:]
