"""A served control plane keeps answering and publishing when PostgreSQL ends its connections."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import asyncpg
import httpx

from conftest import (
    _asyncpg_url,
    _sqlalchemy_pg_url,
    make_stack,
    settings_env,
    start_live_server,
    stop_live_server,
)
from firstlume.pubsub import PubSub, org_runs_channel
from firstlume.services import accounts
from firstlume.services.context import Context
from firstlume.settings import Settings
from test_event_delivery import O, pg_database, terminate  # noqa: F401 (pg_database: the fixture, shared with the in-process tests)


async def test_a_served_control_plane_keeps_answering_and_publishing_when_postgresql_ends_its_connections(
    pg_database: str, tmp_path: Path
) -> None:
    database_url = _sqlalchemy_pg_url(pg_database)
    ctx_settings = Settings.from_env(settings_env(database_url, tmp_path / "data", FIRSTLUME_SCHEDULER="off"))
    from conftest import make_tenant
    from firstlume.db.engine import Database
    from firstlume.keys import load_keyring

    db = Database(database_url)
    ctx = Context(
        settings=ctx_settings, db=db, keyring=load_keyring(ctx_settings), pubsub=PubSub("memory://")
    )
    tenant = await make_tenant(ctx, "acme", "ada@example.com")
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    async with db.transaction() as session:
        org_id = (
            await accounts.org_for(session, await accounts.authenticate(session, tenant.token), "acme")
        ).id
    await db.dispose()

    server = await asyncio.to_thread(
        start_live_server,
        settings_env(database_url, tmp_path / "data", FIRSTLUME_SCHEDULER="off"),
        tmp_path / "server.log",
    )
    heard: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    listening = await asyncpg.connect(
        _asyncpg_url(pg_database), server_settings={"application_name": "firstlume-test-listener"}
    )
    await listening.add_listener(
        org_runs_channel(org_id), lambda *args: heard.put_nowait(json.loads(args[3]))
    )
    try:
        async with httpx.AsyncClient(base_url=server.url, headers=tenant.headers, timeout=30) as client:
            first = await client.post(f"{O}/stacks/net/runs", content='{"type": "plan"}')
            assert first.status_code == 201, first.text
            assert (await asyncio.wait_for(heard.get(), 30))["run_id"] == first.json()["id"]

            # Every connection of the server ends at once: its pool's and its event connection.
            assert await terminate(pg_database) >= 2

            second = await client.post(f"{O}/stacks/net/runs", content='{"type": "apply"}')
            assert second.status_code == 201, second.text
            event = await asyncio.wait_for(heard.get(), 30)
            assert (event["run_id"], event["status"]) == (second.json()["id"], "queued")
            canceled = await client.post(f"{O}/runs/{second.json()['id']}/cancel")
            assert canceled.status_code == 200, canceled.text
            event = await asyncio.wait_for(heard.get(), 30)
            assert (event["run_id"], event["status"]) == (second.json()["id"], "canceled")
        assert " 500 " not in server.log() and "Traceback" not in server.log()
    finally:
        await listening.close()
        await asyncio.to_thread(stop_live_server, server)
