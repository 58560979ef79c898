"""The bootstrap commands of docs/rest-api.md, run as a user would."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import httpx

from conftest import start_live_server, stop_live_server


def firstlume(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "firstlume", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_bootstrap_an_organization_and_a_token_then_use_it(database_url: str, tmp_path: Path) -> None:
    env = {"FIRSTLUME_DATABASE_URL": database_url, "FIRSTLUME_DATA_DIR": str(tmp_path / "data")}
    key = firstlume(env, "keygen")
    assert key.returncode == 0 and len(base64.b64decode(key.stdout.strip())) == 32
    env["FIRSTLUME_ENCRYPTION_KEYS"] = key.stdout.strip()
    assert firstlume(env, "migrate").returncode == 0
    created = firstlume(env, "org", "create", "acme")
    assert created.returncode == 0 and created.stdout == ""
    token = firstlume(env, "token", "create", "--org", "acme", "--user", "ada@example.com")
    assert token.returncode == 0
    assert token.stdout.count("\n") == 1 and token.stdout.startswith("fl_")  # only the token

    duplicate = firstlume(env, "org", "create", "acme")
    assert (
        duplicate.returncode == 1
        and "already exists" in duplicate.stderr
        and "Traceback" not in duplicate.stderr
    )
    unknown = firstlume(env, "token", "create", "--org", "nope", "--user", "ada@example.com")
    assert unknown.returncode == 1 and "No organization 'nope'" in unknown.stderr
    bad = firstlume(env, "org", "create", "Not A Slug")
    assert bad.returncode == 1 and "lowercase" in bad.stderr
    not_email = firstlume(env, "token", "create", "--org", "acme", "--user", "ada")
    assert not_email.returncode == 1 and "not an email address" in not_email.stderr

    server = start_live_server({**env, "FIRSTLUME_SCHEDULER": "off"}, tmp_path / "server.log")
    try:
        headers = {"Authorization": f"Bearer {token.stdout.strip()}"}
        response = httpx.get(f"{server.url}/api/v1/orgs/acme/stacks", headers=headers)
        assert response.status_code == 200 and response.json() == {"stacks": []}
    finally:
        stop_live_server(server)


def test_bad_configuration_is_explained_without_a_traceback(tmp_path: Path) -> None:
    result = firstlume(
        {"FIRSTLUME_DATABASE_URL": "mysql://nope", "FIRSTLUME_DATA_DIR": str(tmp_path)}, "migrate"
    )
    assert result.returncode == 2
    assert "FIRSTLUME_DATABASE_URL must start with" in result.stderr and "Traceback" not in result.stderr
