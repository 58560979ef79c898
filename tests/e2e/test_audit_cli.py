"""What the CLI changes is audited as the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

from conftest import TEST_KEY


async def test_cli_changes_are_audited_as_the_cli(database_url: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "FIRSTLUME_DATABASE_URL": database_url,
        "FIRSTLUME_DATA_DIR": str(tmp_path / "data"),
        "FIRSTLUME_ENCRYPTION_KEYS": TEST_KEY,
    }

    def firstlume(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "firstlume", *args], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    firstlume("org", "create", "initech")
    token = firstlume(
        "token", "create", "--org", "initech", "--user", "peter@example.com", "--name", "laptop"
    )
    lost = firstlume("token", "create", "--org", "initech", "--user", "peter@example.com", "--name", "old")
    firstlume("token", "revoke", "--token", lost)
    from firstlume.app import create_app
    from firstlume.settings import Settings

    app = create_app(Settings.from_env({**env, "FIRSTLUME_SCHEDULER": "off"}))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            response = await http.get(
                "/api/v1/orgs/initech/audit", headers={"Authorization": f"Bearer {token}"}
            )
    assert response.status_code == 200, response.text
    rows = response.json()["entries"]
    assert [(r["action"], r["actor"], r["via"]) for r in rows] == [
        ("token.revoke", "system", "cli"),
        ("token.create", "system", "cli"),
        ("token.create", "system", "cli"),
        ("organization.create", "system", "cli"),
    ]
    assert rows[2]["details"] == {"user": "peter@example.com", "name": "laptop"}
    assert rows[0]["details"] == {"user": "peter@example.com", "name": "old"}
    assert rows[0]["target"] == rows[1]["target"]
    assert token not in json.dumps(rows) and lost not in json.dumps(rows)
