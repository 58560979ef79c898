"""Tokens a person manages: named, expiring, last use recorded, revocable, stored only as hashes
and shown once; expired and revoked tokens are refused at once, and an open runLog subscription
of a revoked token ends within 5 seconds. The CLI's token create and revoke."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from conftest import TEST_KEY, Tenant, make_stack, settings_env, start_live_server, stop_live_server
from firstlume.crypto import hash_token
from firstlume.db.models import ApiToken
from firstlume.db.types import utcnow
from firstlume.services.context import Context
from support.graphql_ws import GraphQLWebSocket, ws_url
from support.runs import start
from support.snapshot import snapshot

O = "/api/v1/orgs/acme"


async def new_token(client: httpx.AsyncClient, tenant: Tenant, **body: Any) -> dict[str, Any]:
    response = await client.post(f"{O}/tokens", headers=tenant.headers, json=body)
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


async def test_tokens_are_shown_once_stored_as_hashes_and_listed_without_the_secret(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    created = await new_token(client, tenant, name="ci", expires_in="30d")
    token = created["token"]
    assert token.startswith("fl_") and created["name"] == "ci" and created["last_used_at"] is None
    assert created["expires_at"] > utcnow().isoformat()[:10]
    # The database holds the hash only: no row of any table contains the token.
    dump = repr(await snapshot(ctx))
    assert token not in dump and tenant.token not in dump
    assert hash_token(token) in dump

    listed = (await client.get(f"{O}/tokens", headers=tenant.headers)).json()["tokens"]
    assert {t["name"] for t in listed} == {"", "ci"}
    assert token not in repr(listed) and all("token" not in t for t in listed)

    mine = {"Authorization": f"Bearer {token}"}
    assert (await client.get(f"{O}/stacks", headers=mine)).status_code == 200
    used = {t["id"]: t for t in (await client.get(f"{O}/tokens", headers=mine)).json()["tokens"]}
    assert used[created["id"]]["last_used_at"] is not None


async def test_revoked_and_expired_tokens_are_refused_at_once(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    revoked = await new_token(client, tenant, name="laptop")
    expired = await new_token(client, tenant, name="short", expires_in="1h")
    for made in (revoked, expired):
        ok = await client.get(f"{O}/stacks", headers={"Authorization": f"Bearer {made['token']}"})
        assert ok.status_code == 200
    gone = await client.delete(f"{O}/tokens/{revoked['id']}", headers=tenant.headers)
    assert gone.status_code == 200 and gone.json()["revoked_at"] is not None
    async with ctx.unit() as unit:
        await unit.session.execute(
            update(ApiToken)
            .where(ApiToken.id == expired["id"])
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
    for made in (revoked, expired):
        headers = {"Authorization": f"Bearer {made['token']}"}
        refused = await client.get(f"{O}/stacks", headers=headers)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthenticated"
        graphql = await client.post("/graphql", headers=headers, json={"query": "{ viewer { email } }"})
        assert graphql.json()["errors"][0]["extensions"]["code"] == "unauthenticated"
    # Revoking twice, or another person's token, is not found.
    assert (await client.delete(f"{O}/tokens/{revoked['id']}", headers=tenant.headers)).status_code == 404
    listed = (await client.get(f"{O}/tokens", headers=tenant.headers)).json()["tokens"]
    assert revoked["id"] not in {t["id"] for t in listed}


async def test_token_input_is_checked(client: httpx.AsyncClient, tenant: Tenant) -> None:
    for body, field in [
        ({}, "name"),
        ({"name": "x", "expires_in": "forever"}, "expires_in"),
        ({"name": " "}, "name"),
    ]:
        refused = await client.post(f"{O}/tokens", headers=tenant.headers, json=body)
        assert refused.status_code == 422, refused.text
        assert refused.json()["error"]["code"] == "invalid_request"
        assert field in refused.json()["error"]["message"] or refused.json()["error"].get("field") == field


async def test_graphql_creates_lists_and_revokes_tokens(client: httpx.AsyncClient, tenant: Tenant) -> None:
    async def gql(query: str, headers: dict[str, str] = tenant.headers) -> Any:
        body = (await client.post("/graphql", headers=headers, json={"query": query})).json()
        assert not body.get("errors"), body
        return body["data"]

    made = (
        await gql(
            'mutation { createToken(org: "acme", name: "bot", expiresIn: "7d") { ... on CreatedToken { token info { id name expiresAt } } } }'
        )
    )["createToken"]
    assert made["token"].startswith("fl_") and made["info"]["name"] == "bot" and made["info"]["expiresAt"]
    listed = (await gql("{ viewer { tokens { id name lastUsedAt } } }"))["viewer"]["tokens"]
    assert made["info"]["id"] in {t["id"] for t in listed}
    revoked = await gql(
        f'mutation {{ revokeToken(org: "acme", id: "{made["info"]["id"]}") {{ __typename }} }}'
    )
    assert revoked == {"revokeToken": {"__typename": "Token"}}
    again = await client.get(f"{O}/stacks", headers={"Authorization": f"Bearer {made['token']}"})
    assert again.status_code == 401


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


async def test_one_query_a_round_tells_every_open_subscription_whether_its_token_still_works(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    import asyncio
    from contextlib import AsyncExitStack

    from firstlume.services.access import token_watch
    from support.statements import StatementCounter

    kept = await new_token(client, tenant, name="kept")
    lost = await new_token(client, tenant, name="lost")
    watch = token_watch.TokenWatch(ctx)
    counter = StatementCounter(ctx.db)
    try:
        async with AsyncExitStack() as stack:
            # 200 subscriptions of two tokens, as 200 live log readers would hold them.
            events = [
                await stack.enter_async_context(watch.watching(made["id"]))
                for made in (kept, lost)
                for _ in range(100)
            ]
            assert (
                await client.delete(f"{O}/tokens/{lost['id']}", headers=tenant.headers)
            ).status_code == 200
            with counter.counting() as statements:
                await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events[100:])), timeout=5)
            assert not any(e.is_set() for e in events[:100])  # the kept token's subscriptions go on
            reads = [s for s in statements if "api_tokens" in s.lower()]
            assert 1 <= len(reads) <= 2, statements  # one query a round for all 200, not one each
    finally:
        counter.close()
        await watch.stop()
