"""The probes the Helm chart points at: /healthz (process up) and /readyz (database migrated)."""

from __future__ import annotations

from pathlib import Path

import httpx

from conftest import TEST_KEY
from firstlume.app import create_app
from firstlume.settings import Settings


async def test_ready_when_the_database_is_at_the_current_migration(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ok"


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
