"""The probes the Helm chart points at: /healthz (process up) and /readyz (database migrated),
which also reports this process's background services."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from conftest import TEST_KEY
from firstlume.app import create_app
from firstlume.settings import Settings


async def test_ready_when_the_database_is_at_the_current_migration(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ok"


async def test_ready_reports_each_background_service_and_its_last_pass(client: httpx.AsyncClient) -> None:
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        services = (await client.get("/readyz")).json()["services"]
        # This app runs no scheduler: its relay, its senders and its token watch.
        assert set(services) == {"outbox-relay", "notification-sender", "git-feedback-sender", "token-watch"}
        if all(s["last_pass_age_s"] is not None for s in services.values()):
            break
        assert asyncio.get_running_loop().time() < deadline, services  # each passes as it starts
        await asyncio.sleep(0.02)
    for service in services.values():
        assert service["up"] is True and service["failed_passes_in_a_row"] == 0
        assert 0 <= service["last_pass_age_s"] < 10


async def test_not_ready_before_migrations_but_alive(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "FIRSTLUME_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}",
            "FIRSTLUME_DATA_DIR": str(tmp_path),
            "FIRSTLUME_ENCRYPTION_KEYS": TEST_KEY,
            "FIRSTLUME_SCHEDULER": "off",
        }
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://probe") as http:
            assert (await http.get("/healthz")).status_code == 200
            ready = await http.get("/readyz")
    assert ready.status_code == 503
    assert "firstlume migrate" in ready.json()["reason"]


async def test_not_ready_when_the_database_does_not_answer(tmp_path: Path) -> None:
    settings = Settings.from_env(
        {
            "FIRSTLUME_DATABASE_URL": "postgresql+asyncpg://nobody@127.0.0.1:1/none",
            "FIRSTLUME_DATA_DIR": str(tmp_path),
            "FIRSTLUME_ENCRYPTION_KEYS": TEST_KEY,
            "FIRSTLUME_SCHEDULER": "off",
            "FIRSTLUME_PUBSUB_URL": "memory://",
        }
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://probe") as http:
            ready = await http.get("/readyz")
    assert ready.status_code == 503 and ready.json()["reason"] == "The database does not answer."
