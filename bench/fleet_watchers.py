"""The fleet's watchers: people's browsers, each a graphql-transport-ws connection to one replica
with one subscription (runLog, resourceStates or activeRuns). A watcher whose replica goes away
reconnects to the next and resumes: runLog from the offset it has, the others from their
snapshot. Each keeps what it received, for the checks (fleet_checks.py) and the line latencies.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.typing import Subprotocol

PROTOCOL = Subprotocol("graphql-transport-ws")
ORG = "bench"

QUERIES = {
    "runLog": "subscription($org: String!, $id: ID!, $from: Int!) "
    "{ runLog(org: $org, runId: $id, fromOffset: $from) { text nextOffset } }",
    "resourceStates": "subscription($org: String!, $id: ID!) "
    "{ resourceStates(org: $org, runId: $id) { address state } }",
    "activeRuns": "subscription($org: String!) { activeRuns(org: $org) { id status } }",
}


def ws_url(http_url: str) -> str:
    return "ws" + http_url.removeprefix("http") + "/graphql"


@dataclass
class Watcher:
    kind: str
    run_id: str | None
    replica: int  # the index of the replica it is connected to now
    offset: int = 0
    text: list[str] = field(default_factory=list)
    # (line's written time in ms, received time in ms, replica index), one per line received
    arrivals: list[tuple[float, float, int]] = field(default_factory=list)
    # each connection's states per address, in the order received
    states: list[dict[str, list[str]]] = field(default_factory=list)
    last_active: list[Any] | None = None
    messages: int = 0
    reconnects: int = 0
    completed: bool = False
    error: str | None = None
    subscribed: asyncio.Event = field(default_factory=asyncio.Event)
    # When the current connection subscribed (ms): lines written before it are its catch-up read,
    # not live delivery, and are not counted in the latencies.
    subscribed_at: float = 0.0

    def variables(self) -> dict[str, Any]:
        if self.kind == "activeRuns":
            return {"org": ORG}
        if self.kind == "runLog":
            return {"org": ORG, "id": self.run_id, "from": self.offset}
        return {"org": ORG, "id": self.run_id}

    def take(self, data: dict[str, Any]) -> None:
        self.messages += 1
        now = time.time() * 1000
        if self.kind == "runLog":
            chunk = data["runLog"]
            self.text.append(chunk["text"])
            self.offset = chunk["nextOffset"]
            for line in chunk["text"].splitlines():
                parts = line.split(" ", 4)
                if len(parts) >= 4 and float(parts[3]) >= self.subscribed_at:
                    self.arrivals.append((float(parts[3]), now, self.replica))
        elif self.kind == "resourceStates":
            current = self.states[-1]
            for change in data["resourceStates"]:
                current.setdefault(change["address"], []).append(str(change["state"]).lower())
        else:
            self.last_active = data["activeRuns"]


async def watch(
    watcher: Watcher, urls: list[str], alive: list[bool], token: str, stop: asyncio.Event
) -> None:
    """Follows until the server completes the subscription (runLog, resourceStates) or `stop`."""
    order = itertools.count(watcher.replica)
    while not stop.is_set():
        try:
            async with connect(
                ws_url(urls[watcher.replica]), subprotocols=[PROTOCOL], open_timeout=60, max_size=None,
                ping_interval=None,
            ) as ws:  # fmt: skip
                await ws.send(
                    json.dumps({"type": "connection_init", "payload": {"authorization": f"Bearer {token}"}})
                )
                ack = json.loads(await asyncio.wait_for(ws.recv(), 60))
                if ack.get("type") != "connection_ack":
                    raise RuntimeError(f"not acknowledged: {ack}")
                if watcher.kind == "resourceStates":
                    watcher.states.append({})
                await ws.send(
                    json.dumps(
                        {
                            "id": "1",
                            "type": "subscribe",
                            "payload": {"query": QUERIES[watcher.kind], "variables": watcher.variables()},
                        }
                    )
                )
                watcher.subscribed.set()
                watcher.subscribed_at = time.time() * 1000
                receiving = asyncio.ensure_future(_receive(ws, watcher))
                stopping = asyncio.ensure_future(stop.wait())
                done, _ = await asyncio.wait({receiving, stopping}, return_when=asyncio.FIRST_COMPLETED)
                stopping.cancel()
                if receiving in done:
                    receiving.result()  # raises what ended the connection
                    return
                receiving.cancel()
                return
        except (ConnectionClosed, OSError, InvalidHandshake, TimeoutError):
            if stop.is_set():
                return
            # The replica went away: the next one that is alive, as a browser behind a Service.
            watcher.reconnects += 1
            while True:
                candidate = next(order) % len(urls)
                if alive[candidate]:
                    watcher.replica = candidate
                    break
            await asyncio.sleep(0.2)


async def _receive(ws: Any, watcher: Watcher) -> None:
    async for raw in ws:
        message = json.loads(raw)
        kind = message.get("type")
        if kind == "ping":
            await ws.send(json.dumps({"type": "pong"}))
        elif kind == "next":
            payload = message["payload"]
            if payload.get("errors"):
                watcher.error = json.dumps(payload["errors"])[:300]
            if payload.get("data"):
                watcher.take(payload["data"])
        elif kind == "error":
            watcher.error = json.dumps(message.get("payload"))[:300]
            return
        elif kind == "complete":
            watcher.completed = True
            return
    raise ConnectionClosed(None, None)
