"""P2: a live log line reaching many `runLog` subscribers of one control-plane process.

    .venv/bin/python bench/bench_logs.py [SUBSCRIBERS] [LINES]

Serves a control plane on a fresh PostgreSQL database, opens SUBSCRIBERS (default 500)
WebSockets each subscribed to one run's log, then writes LINES (default 40) lines one at a time
through the executor API. For each line: the time from the executor's POST until each subscriber
has it (p50/p99 over every subscriber and line), and how many new PostgreSQL sessions the server
opened per line (pg_stat_database.sessions). The floor, measured in the same run: a raw asyncpg
NOTIFY round trip on the same server. Prints figures; never fails on a slow machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import websockets
from served import PG_SERVER, context, database, describe, environment, seed, served

from firstlume.domain.runs import RunType
from firstlume.services import dispatch
from firstlume.services.access.roles import Role
from firstlume.services.commands import StartRun
from firstlume.services.runs import start_run

SUBSCRIPTION = 'subscription($id: ID!) { runLog(org: "bench", runId: $id) { text nextOffset } }'


def load_note() -> str:
    one_minute = Path("/proc/loadavg").read_text().split()[0]
    return f"{os.cpu_count()} cores, load average {one_minute}"


async def notify_floor(rounds: int = 200) -> list[float]:
    listener = await asyncpg.connect(PG_SERVER)
    sender = await asyncpg.connect(PG_SERVER)
    arrived: asyncio.Queue[float] = asyncio.Queue()
    await listener.add_listener("bench_floor", lambda *_: arrived.put_nowait(time.perf_counter()))
    samples = []
    for i in range(rounds):
        sent = time.perf_counter()
        await sender.execute(f"NOTIFY bench_floor, '{i}'")
        samples.append((await arrived.get() - sent) * 1000)
    await listener.close()
    await sender.close()
    return samples


async def sessions_opened(database_name: str) -> int:
    connection = await asyncpg.connect(PG_SERVER)
    try:
        return int(
            await connection.fetchval(
                "SELECT sessions FROM pg_stat_database WHERE datname = $1", database_name
            )
        )
    finally:
        await connection.close()


class Arrivals:
    """How many subscribers have each line; an event per line once all of them have it."""

    def __init__(self, subscribers: int) -> None:
        self.subscribers = subscribers
        self.counts: dict[int, int] = {}
        self.complete: dict[int, asyncio.Event] = {}

    def event(self, line: int) -> asyncio.Event:
        return self.complete.setdefault(line, asyncio.Event())

    def arrived(self, line: int) -> None:
        self.counts[line] = self.counts.get(line, 0) + 1
        if self.counts[line] == self.subscribers:
            self.event(line).set()


class Subscriber:
    def __init__(self, arrivals: Arrivals) -> None:
        self.arrivals = arrivals
        self.lines: dict[int, float] = {}  # line number → when it arrived
        self.socket: Any = None

    async def open(self, url: str, token: str, run_id: str) -> None:
        self.socket = await websockets.connect(
            url.replace("http://", "ws://") + "/graphql",
            subprotocols=["graphql-transport-ws"],
            max_queue=None,
            compression=None,
        )
        await self.socket.send(
            json.dumps({"type": "connection_init", "payload": {"Authorization": f"Bearer {token}"}})
        )
        assert json.loads(await self.socket.recv())["type"] == "connection_ack"
        await self.socket.send(
            json.dumps(
                {
                    "id": "1",
                    "type": "subscribe",
                    "payload": {"query": SUBSCRIPTION, "variables": {"id": run_id}},
                }
            )
        )

    async def read(self) -> None:
        async for raw in self.socket:
            now = time.perf_counter()
            message = json.loads(raw)
            if message["type"] == "next":
                for line in message["payload"]["data"]["runLog"]["text"].splitlines():
                    if line.startswith("line "):
                        number = int(line.split()[1])
                        self.lines[number] = now
                        self.arrivals.arrived(number)
            elif message["type"] in ("complete", "error"):
                return


async def main(subscribers: int, lines: int) -> None:
    floor = await notify_floor()
    async with database("postgresql") as url:
        database_name = url.rsplit("/", 1)[1]
        with tempfile.TemporaryDirectory() as tmp:
            data = Path(tmp)
            async with context(url, data) as ctx:
                tenant = await seed(ctx)
                async with ctx.unit() as unit:
                    from firstlume.services import accounts, catalog

                    actor, org = await accounts.authenticate_in_org(
                        unit.session, tenant.token, "bench", Role.OPERATOR
                    )
                    stack = await catalog.stack_by_slug(unit.session, org, "net")
                    run = await start_run(unit, actor, stack, StartRun(type=RunType.PLAN))
                [launch] = await dispatch.claim_plans(ctx)
            with served(environment(url, data)) as server:
                base = server.url
                executor = httpx.AsyncClient(
                    base_url=base, headers={"Authorization": f"Bearer {launch.token}"}, timeout=60
                )
                offset = 0

                async def write(text: str) -> None:
                    nonlocal offset
                    response = await executor.post(
                        "/api/v1/executor/logs", json={"offset": offset, "step": "plan", "text": text}
                    )
                    offset = response.json()["next_offset"]

                await write("started\n")
                arrivals = Arrivals(subscribers)
                clients = [Subscriber(arrivals) for _ in range(subscribers)]
                for i in range(0, subscribers, 50):
                    await asyncio.gather(*(c.open(base, tenant.token, run.id) for c in clients[i : i + 50]))
                readers = [asyncio.create_task(c.read()) for c in clients]
                await asyncio.sleep(1)  # every subscription has read the stored log and joined the tail
                before = await sessions_opened(database_name)
                cpu_before = server.cpu_seconds()
                sent: dict[int, float] = {}
                for number in range(lines):
                    sent[number] = time.perf_counter()
                    await write(f"line {number} {'x' * 60}\n")
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(arrivals.event(number).wait(), 10)
                    await asyncio.sleep(0.05)
                opened = await sessions_opened(database_name) - before
                cpu_per_line = (server.cpu_seconds() - cpu_before) / lines * 1000
                await executor.post("/api/v1/executor/steps", json={"name": "plan", "status": "failed"})
                await executor.post("/api/v1/executor/finish", json={"status": "failed", "error": "bench"})
                await asyncio.wait(readers, timeout=30)
                await asyncio.gather(*(c.socket.close() for c in clients))
                await executor.aclose()
    latencies = [(c.lines[n] - sent[n]) * 1000 for c in clients for n in sent if n in c.lines]
    missing = subscribers * lines - len(latencies)
    print(f"P2 live log line → {subscribers} runLog subscribers on one process, PostgreSQL, {lines} lines")
    print(f"  floor: asyncpg NOTIFY round trip        {describe(floor)}")
    print(f"  line reaches every subscriber          {describe(latencies)}")
    print(f"  new PostgreSQL sessions per line       {opened / lines:7.2f}   (lines missed: {missing})")
    print(f"  server CPU per line                    {cpu_per_line:7.1f} ms  ({load_note()})")


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    asyncio.run(main(args[0] if args else 500, args[1] if len(args) > 1 else 40))
