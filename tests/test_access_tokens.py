"""Tokens a person manages: named, expiring, last use recorded, revocable, stored only as hashes
and shown once; expired and revoked tokens are refused at once, and an open runLog subscription
of a revoked token ends within 5 seconds. The CLI's token create and revoke."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import httpx
from sqlalchemy import update

from conftest import Tenant
from firstlume.crypto import hash_token
from firstlume.db.models import ApiToken
from firstlume.db.types import utcnow
from firstlume.services.context import Context
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


def _is_watch_round(statement: str) -> bool:
    """The watch's one query: which of the watched token ids are still usable."""
    flat = " ".join(statement.split()).lower()
    return flat.startswith("select api_tokens.id from api_tokens where api_tokens.id in")


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
            # Counted from before the revocation: the round that notices it may run while the
            # DELETE's answer is still on its way back.
            with counter.counting() as statements:
                started = time.monotonic()
                assert (
                    await client.delete(f"{O}/tokens/{lost['id']}", headers=tenant.headers)
                ).status_code == 200
                await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events[100:])), timeout=5)
                elapsed = time.monotonic() - started
            assert not any(e.is_set() for e in events[:100])  # the kept token's subscriptions go on
            rounds = [s for s in statements if _is_watch_round(s)]
            # One query a round for all 200, not one each: at most one per CHECK_SECONDS waited.
            assert 1 <= len(rounds) <= elapsed / token_watch.CHECK_SECONDS + 2, statements
    finally:
        counter.close()
        await watch.stop()
