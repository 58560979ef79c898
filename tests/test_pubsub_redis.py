"""The Redis pub/sub backend (FIRSTLUME_PUBSUB_URL=redis://…) against the real Redis server: two
control planes on one database hear each other's events; a reader whose connection was lost
while an event went by catches up from the database (the Resync, as on PostgreSQL); a Redis that
cannot be reached at start is a clear error; a connection Redis ends comes back by itself."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from redis import asyncio as aioredis
from starlette.applications import Starlette

from conftest import REDIS_SERVER, Tenant, free_port, make_stack, make_tenant, settings_env
from firstlume.app import create_app
from firstlume.protocol.events import LogAppended
from firstlume.pubsub import PubSub
from firstlume.pubsub_redis import BrokerUnreachable, ReconnectingRedisBackend
from firstlume.services import dispatch, logs
from firstlume.services.context import Context
from firstlume.services.logs import follow_log
from firstlume.settings import Settings
from support.executor_api import ExecutorReports
from support.pubsub_waits import publish_until_delivered
from support.runs import start
from support.waiting import until


def named_url(name: str) -> str:
    """The test server's URL, its connections named `name` (to end only these)."""
    return f"{REDIS_SERVER}{'&' if '?' in REDIS_SERVER else '?'}client_name={name}"


async def end_connections(name: str) -> int:
    """Ends every Redis connection named `name`, as a Redis restart or failover would."""
    admin = aioredis.Redis.from_url(REDIS_SERVER)
    try:
        ended = 0
        for client in await admin.client_list():
            if client.get("name") == name:
                ended += await admin.client_kill_filter(_id=client["id"])
        return ended
    finally:
        await admin.aclose()


async def subscribed(name: str) -> bool:
    """A connection named `name` is subscribed to channels (its pub/sub connection is back)."""
    admin = aioredis.Redis.from_url(REDIS_SERVER)
    try:
        return any(c.get("name") == name and int(c.get("sub", 0)) > 0 for c in await admin.client_list())
    finally:
        await admin.aclose()


def redis_settings(database_url: str, data_dir: Path, pubsub_url: str) -> Settings:
    return Settings.from_env(
        settings_env(database_url, data_dir, FIRSTLUME_SCHEDULER="off", FIRSTLUME_PUBSUB_URL=pubsub_url)
    )


@pytest.fixture
async def two_apps(database_url: str, tmp_path: Path) -> AsyncIterator[tuple[Starlette, Starlette, str]]:
    """Two control planes on one database, their events through Redis: (reader, writer, the
    reader's connection name)."""
    name = f"fl-test-{uuid.uuid4().hex[:8]}"
    reader = create_app(redis_settings(database_url, tmp_path / "a", named_url(name)))
    writer = create_app(redis_settings(database_url, tmp_path / "b", named_url(name + "-w")))
    async with reader.router.lifespan_context(reader), writer.router.lifespan_context(writer):
        yield reader, writer, name


async def a_run_in_its_plan(
    ctx: Context, tenant: Tenant, writer: Starlette
) -> AsyncIterator[tuple[str, ExecutorReports]]:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, "acme", "net", "plan")
    [launch] = await dispatch.claim_plans(ctx)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=writer), base_url="http://writer") as http:
        yield run_id, ExecutorReports(http, launch.token)


async def test_a_log_written_through_one_control_plane_reaches_a_reader_of_the_other(
    two_apps: tuple[Starlette, Starlette, str],
) -> None:
    reader_app, writer_app, _ = two_apps
    reader: Context = reader_app.state.ctx
    tenant = await make_tenant(reader, "acme", "ada@example.com")
    async for run_id, reports in a_run_in_its_plan(reader, tenant, writer_app):
        follower = follow_log(reader, run_id)
        await reports.step("init", "running")
        await reports.log("init", "first line\n")
        first = await asyncio.wait_for(anext(follower), 10)
        assert first.text == "first line\n"
        await reports.log("init", "second line\n")
        # Nothing polls meanwhile (SAFETY_POLL_SECONDS is 15 s): the event brought it.
        second = await asyncio.wait_for(anext(follower), 5)
        assert second.text == "second line\n"
        await follower.aclose()


async def test_a_reader_whose_connection_was_down_while_a_line_went_by_catches_up_from_the_database(
    two_apps: tuple[Starlette, Starlette, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logs, "SAFETY_POLL_SECONDS", 600.0)  # only the Resync can bring it
    reader_app, writer_app, name = two_apps
    reader: Context = reader_app.state.ctx
    backend = reader.pubsub._batching
    assert isinstance(backend, ReconnectingRedisBackend)
    # The reader's pub/sub connection comes back only once the line has gone by.
    gate = asyncio.Event()
    reopen = backend._open

    async def gated_open() -> object:
        await gate.wait()
        return await reopen()

    monkeypatch.setattr(backend, "_open", gated_open)
    tenant = await make_tenant(reader, "acme", "ada@example.com")
    async for run_id, reports in a_run_in_its_plan(reader, tenant, writer_app):
        follower = follow_log(reader, run_id)
        await reports.step("init", "running")
        await reports.log("init", "before\n")
        assert (await asyncio.wait_for(anext(follower), 10)).text == "before\n"

        assert await end_connections(name) >= 1
        # Redis frees a killed client at its next turn: wait until the connection is gone.

        async def gone() -> bool:
            return not await subscribed(name)

        await until(gone, 10, "the reader's pub/sub connection to be gone")
        await reports.log("init", "while down\n")  # published to no one of the reader's process
        gate.set()
        missed = await asyncio.wait_for(anext(follower), 10)
        assert missed.text == "while down\n"
        await reports.log("init", "after\n")
        assert (await asyncio.wait_for(anext(follower), 10)).text == "after\n"
        await follower.aclose()


async def test_a_redis_that_cannot_be_reached_at_start_is_a_clear_error(
    database_url: str, tmp_path: Path
) -> None:
    port = free_port()  # nothing listens there
    app = create_app(redis_settings(database_url, tmp_path, f"redis://:s3cret-pw@127.0.0.1:{port}/0"))
    with pytest.raises(BrokerUnreachable) as raised:
        async with app.router.lifespan_context(app):
            pass
    message = str(raised.value)
    assert f"Redis at 127.0.0.1:{port} (FIRSTLUME_PUBSUB_URL), cannot be reached" in message
    assert "s3cret-pw" not in message


async def test_live_events_flow_again_after_redis_ends_the_connections() -> None:
    name = f"fl-test-{uuid.uuid4().hex[:8]}"
    listener, publisher = PubSub(named_url(name)), PubSub(named_url(name))
    await listener.connect()
    await publisher.connect()
    try:
        async with listener.subscribe("run_redis_lost") as events:
            before = LogAppended(run_id="r1", step="plan", offset=0, end=1)
            await publisher.publish("run_redis_lost", before)
            assert await events.next(seconds=10) == before

            assert await end_connections(name) >= 2  # both processes' connections

            after = LogAppended(run_id="r1", step="plan", offset=1, end=2)

            # The publisher's pooled connection was ended too: a publish fails, the next goes
            # through a new connection.
            await publish_until_delivered(publisher, events, "run_redis_lost", after)
            await until(lambda: subscribed(name), 10, "the listener subscribed again")
    finally:
        await listener.disconnect()
        await publisher.disconnect()
