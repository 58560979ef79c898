"""Live events between processes: every subscriber hears every event, on every backend."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from conftest import PG_SERVER, REDIS_SERVER
from firstlume.domain.runs import RunStatus
from firstlume.protocol.events import LogAppended, RunStatusChanged
from firstlume.pubsub import CLOSED, PubSub

PLANNING = RunStatusChanged(run_id="r1", org_id="o1", status=RunStatus.PLANNING, from_status=RunStatus.QUEUED)


def log_event(n: int) -> LogAppended:
    return LogAppended(run_id="r1", step="plan", offset=n, end=n + 1)


@pytest.fixture(params=["memory", "postgres", "redis"])
async def pubsubs(request: pytest.FixtureRequest) -> AsyncIterator[tuple[PubSub, PubSub]]:
    """Two connections, as two control-plane processes would have."""
    url = {
        "memory": "memory://",
        "postgres": PG_SERVER.replace("postgresql://", "postgres://"),
        "redis": REDIS_SERVER,
    }[request.param]
    first = PubSub(url)
    second = first if request.param == "memory" else PubSub(url)
    await first.connect()
    if second is not first:
        await second.connect()
    yield first, second
    await first.disconnect()
    if second is not first:
        await second.disconnect()


async def test_many_subscribers_joining_at_once_all_hear_the_event(pubsubs: tuple[PubSub, PubSub]) -> None:
    listener, publisher = pubsubs
    ready = asyncio.Event()
    joined = 0

    async def subscriber() -> object:
        nonlocal joined
        async with listener.subscribe("run_race") as events:
            joined += 1
            if joined == 40:
                ready.set()
            return await events.next(seconds=10)

    tasks = [asyncio.create_task(subscriber()) for _ in range(40)]
    await asyncio.wait_for(ready.wait(), 10)
    await publisher.publish("run_race", PLANNING)
    received = await asyncio.gather(*tasks)
    assert received == [PLANNING] * 40


async def test_a_timed_wait_does_not_end_the_subscription(pubsubs: tuple[PubSub, PubSub]) -> None:
    listener, publisher = pubsubs
    async with listener.subscribe("run_timeout") as events:
        assert await events.next(seconds=0.05) is None
        await publisher.publish("run_timeout", log_event(1))
        await publisher.publish("run_timeout", log_event(2))
        assert await events.next(seconds=10) == log_event(1)
        if events.pending() != [log_event(2)]:  # over PostgreSQL the second may still be in flight
            assert await events.next(seconds=10) == log_event(2)
        assert not events.closed and CLOSED.type == "closed"
