"""Tokens from the CLI, and a revoked token's open subscription on a served control plane."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from conftest import TEST_KEY, Tenant, make_stack, settings_env, start_live_server, stop_live_server
from firstlume.services.context import Context
from support.graphql_ws import GraphQLWebSocket, ws_url
from support.runs import start
from test_access_tokens import O


async def test_an_open_run_log_subscription_of_a_revoked_token_ends_within_5_seconds(
    ctx: Context, tenant: Tenant, database_url: str, tmp_path: Path
) -> None:
    # No scheduler: the run stays queued, so only the revocation can end the subscription.
    served = start_live_server(
        settings_env(database_url, tmp_path / "data", FIRSTLUME_SCHEDULER="off"), tmp_path / "server.log"
    )
    try:
        await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
        run_id = await start(ctx, tenant.token, "acme", "net", "plan")
        async with httpx.AsyncClient(base_url=served.url) as http:
            made = (await http.post(f"{O}/tokens", headers=tenant.headers, json={"name": "watcher"})).json()
            async with GraphQLWebSocket.connect(ws_url(served.url), made["token"]) as ws:
                query = 'subscription($id: ID!) { runLog(org: "acme", runId: $id) { text nextOffset } }'
                log = await ws.subscribe(query, {"id": run_id})
                # Still open a while after it started: nothing ends it but the revocation.
                with pytest.raises(AssertionError, match="no message"):
                    await log.next_payload(within=2.5)
                revoked_at = time.monotonic()
                gone = await http.delete(f"{O}/tokens/{made['id']}", headers=tenant.headers)
                assert gone.status_code == 200
                payload = await log.next_payload(within=5)
                ended = time.monotonic() - revoked_at
                assert payload["errors"][0]["extensions"]["code"] == "unauthenticated", payload
                assert ended < 5, ended
                # The connection's next operation is refused too.
                answer = await ws.execute("{ viewer { email } }")
                assert answer["errors"][0]["extensions"]["code"] == "unauthenticated"
    finally:
        stop_live_server(served)


def firstlume(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "firstlume", *args],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_creates_tokens_with_role_name_and_expiry_and_revokes_them(
    database_url: str, tmp_path: Path
) -> None:
    env = {
        "FIRSTLUME_DATABASE_URL": database_url,
        "FIRSTLUME_DATA_DIR": str(tmp_path / "data"),
        "FIRSTLUME_ENCRYPTION_KEYS": TEST_KEY,
    }
    assert firstlume(env, "org", "create", "acme").returncode == 0
    first = firstlume(
        env, "token", "create", "--org", "acme", "--user", "ada@example.com", "--name", "laptop"
    )
    reader = firstlume(
        env,
        "token",
        "create",
        "--org",
        "acme",
        "--user",
        "rob@example.com",
        "--role",
        "reader",
        "--expires-in",
        "30d",
    )
    assert first.returncode == 0 and reader.returncode == 0, reader.stderr
    bad = firstlume(env, "token", "create", "--org", "acme", "--user", "x@example.com", "--role", "boss")
    assert bad.returncode == 1 and "reader, operator, admin" in bad.stderr
    never = firstlume(
        env, "token", "create", "--org", "acme", "--user", "x@example.com", "--expires-in", "soon"
    )
    assert never.returncode == 1 and "--expires-in" in never.stderr
    served = start_live_server(
        settings_env(database_url, tmp_path / "data", FIRSTLUME_SCHEDULER="off"), tmp_path / "s.log"
    )
    try:
        ada = {"Authorization": f"Bearer {first.stdout.strip()}"}
        rob = {"Authorization": f"Bearer {reader.stdout.strip()}"}
        members = httpx.get(f"{served.url}{O}/members", headers=ada).json()["members"]
        assert members == [
            {"email": "ada@example.com", "role": "admin", "groups": []},
            {"email": "rob@example.com", "role": "reader", "groups": []},
        ]
        refused = httpx.post(
            f"{served.url}{O}/stacks", headers=rob, json={"slug": "x", "repository": "file:///x"}
        )
        assert refused.status_code == 403 and refused.json()["error"] == {
            "code": "forbidden",
            "message": "This needs the admin role; you are a reader in this organization.",
            "needed": "admin",
            "role": "reader",
        }
        tokens = httpx.get(f"{served.url}{O}/tokens", headers=rob).json()["tokens"]
        assert tokens[0]["expires_at"] is not None
        revoked = firstlume(env, "token", "revoke", "--token", reader.stdout.strip())
        assert revoked.returncode == 0, revoked.stderr
        assert httpx.get(f"{served.url}{O}/stacks", headers=rob).status_code == 401
        by_id = firstlume(
            env,
            "token",
            "revoke",
            httpx.get(f"{served.url}{O}/tokens", headers=ada).json()["tokens"][0]["id"],
        )
        assert by_id.returncode == 0
        assert httpx.get(f"{served.url}{O}/stacks", headers=ada).status_code == 401
    finally:
        stop_live_server(served)
