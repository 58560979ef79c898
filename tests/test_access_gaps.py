"""Issue 40, items 5-7: notification destinations are audited; approvers must be members; an admin
revokes another member's token (audited), nobody else can; the demo token is reused, not piled up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from conftest import Tenant, settings_env
from firstlume.db.models import ApiToken
from firstlume.demo import DEMO_TOKEN_FILE, DEMO_USER, seed_demo
from firstlume.services import accounts
from firstlume.services.access.roles import Role
from firstlume.services.context import Context
from firstlume.settings import Settings
from support.snapshot import snapshot

O = "/api/v1/orgs/acme"


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    # Destinations on 127.0.0.1 (nothing is ever posted: the scheduler and sender are off).
    env = {"FIRSTLUME_SCHEDULER": "off", "FIRSTLUME_ALLOW_PRIVATE_WEBHOOKS": "true"}
    return Settings.from_env(settings_env(database_url, tmp_path / "data", **env))


SIGNING_SECRET = "sign-SECRET-9c1e"


async def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


async def trail(client: httpx.AsyncClient, tenant: Tenant, action: str) -> list[dict[str, Any]]:
    body = await ok(await client.get(f"{O}/audit", params={"action": action}, headers=tenant.headers))
    return list(reversed(body["entries"]))


async def member(ctx: Context, email: str, role: Role) -> dict[str, str]:
    async with ctx.unit() as unit:
        token = await accounts.create_token(unit.session, "acme", email, name="laptop", role=role)
    return {"Authorization": f"Bearer {token}"}


async def test_notification_destinations_are_audited_without_their_secret(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    h = tenant.headers
    await ok(await client.post(f"{O}/folders", json={"path": "prod"}, headers=h), 201)
    made = await ok(
        await client.post(
            f"{O}/notifications",
            json={
                "name": "ops",
                "url": "http://127.0.0.1:9/ops",
                "events": ["run.failed"],
                "folder": "prod",
                "secret": SIGNING_SECRET,
            },
            headers=h,
        ),
        201,
    )
    target = f"notification:{made['id']}"
    await ok(
        await client.patch(
            f"{O}/notifications/{made['id']}", json={"events": ["run.applied"], "secret": None}, headers=h
        )
    )
    await ok(await client.delete(f"{O}/notifications/{made['id']}", headers=h), 204)

    created = await trail(client, tenant, "notification.create")
    updated = await trail(client, tenant, "notification.update")
    deleted = await trail(client, tenant, "notification.delete")
    assert [(r["target"], r["actor"], r["via"]) for r in created + updated + deleted] == [
        (target, "ada@example.com", "rest")
    ] * 3
    assert created[0]["details"] == {
        "name": "ops",
        "url": "http://127.0.0.1:9/ops",
        "events": ["run.failed"],
        "format": "json",
        "signed": True,
        "folder": "prod",
    }
    assert updated[0]["details"] == {"events": ["run.applied"], "signed": False}
    assert deleted[0]["details"] == {"name": "ops"}
    assert SIGNING_SECRET not in repr(await snapshot(ctx))


async def test_graphql_notification_changes_are_audited_as_graphql(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    query = """mutation { createNotification(org: "acme", input: {name: "chat",
      url: "http://127.0.0.1:9/chat", events: ["run.applied"]}) { __typename ... on NotificationDestination { id } } }"""
    body = (await client.post("/graphql", json={"query": query}, headers=tenant.headers)).json()
    made = body["data"]["createNotification"]
    assert made["__typename"] == "NotificationDestination", body
    delete = f'mutation {{ deleteNotification(org: "acme", id: "{made["id"]}") {{ __typename }} }}'
    assert (await client.post("/graphql", json={"query": delete}, headers=tenant.headers)).status_code == 200
    rows = await trail(client, tenant, "notification.create") + await trail(
        client, tenant, "notification.delete"
    )
    assert [(r["target"], r["via"]) for r in rows] == [(f"notification:{made['id']}", "graphql")] * 2


async def test_approvers_who_are_not_members_are_refused_naming_them(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    await member(ctx, "bob@example.com", Role.OPERATOR)
    refused = await client.patch(
        f"{O}/settings",
        json={
            "approvers": ["user:Bob@Example.com", "user:zed@example.com", "user:eve@example.com", "group:sre"]
        },
        headers=tenant.headers,
    )
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "invalid_request" and error["field"] == "approvers"
    assert "not members: eve@example.com, zed@example.com" in error["message"]
    assert "bob" not in error["message"].lower().split("not members")[1]
    assert error["not_members"] == ["user:eve@example.com", "user:zed@example.com"]
    settings = await ok(await client.get(f"{O}/settings", headers=tenant.headers))
    assert settings["explicit"]["approvers"] is None  # nothing written

    # Members (in any case) and groups are taken.
    taken = await ok(
        await client.patch(
            f"{O}/settings", json={"approvers": ["user:Bob@Example.com", "group:sre"]}, headers=tenant.headers
        )
    )
    assert taken["explicit"]["approvers"] == ["user:Bob@Example.com", "group:sre"]

    query = """mutation { updateSettings(org: "acme", input: {approvers: ["user:zed@example.com"]}) {
      __typename ... on InvalidInputError { field message } } }"""
    body = (await client.post("/graphql", json={"query": query}, headers=tenant.headers)).json()
    result = body["data"]["updateSettings"]
    assert result["__typename"] == "InvalidInputError" and result["field"] == "approvers"
    assert "zed@example.com" in result["message"]


async def test_an_admin_revokes_another_members_token_and_it_is_audited(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    bob = await member(ctx, "bob@example.com", Role.OPERATOR)
    # The admin finds the member's tokens, then revokes one.
    listed = await client.get(f"{O}/tokens", params={"member": "Bob@example.com"}, headers=tenant.headers)
    [bobs] = (await ok(listed))["tokens"]
    assert bobs["name"] == "laptop"
    revoked = await ok(await client.delete(f"{O}/tokens/{bobs['id']}", headers=tenant.headers))
    assert revoked["id"] == bobs["id"] and revoked["revoked_at"] is not None
    refused = await client.get(f"{O}/stacks", headers=bob)
    assert refused.status_code == 401
    [row] = await trail(client, tenant, "token.revoke")
    assert (row["actor"], row["target"], row["details"]) == (
        "ada@example.com",
        f"token:{bobs['id']}",
        {"name": "laptop", "user": "bob@example.com"},
    )

    query = 'mutation { revokeToken(org: "acme", id: "%s") { __typename ... on Token { id } } }'
    carol = await member(ctx, "carol@example.com", Role.READER)
    [carols] = (await ok(await client.get(f"{O}/tokens", headers=carol)))["tokens"]
    body = (
        await client.post("/graphql", json={"query": query % carols["id"]}, headers=tenant.headers)
    ).json()
    assert body["data"]["revokeToken"] == {"__typename": "Token", "id": carols["id"]}


async def test_a_non_admin_cannot_revoke_another_members_token(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    bob = await member(ctx, "bob@example.com", Role.OPERATOR)
    [adas] = (await ok(await client.get(f"{O}/tokens", headers=tenant.headers)))["tokens"]
    listing = await client.get(f"{O}/tokens", params={"member": "ada@example.com"}, headers=bob)
    assert listing.status_code == 403 and listing.json()["error"]["code"] == "forbidden"
    refused = await client.delete(f"{O}/tokens/{adas['id']}", headers=bob)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "forbidden" and "admin" in refused.json()["error"]["message"]
    assert (await client.get(f"{O}/stacks", headers=tenant.headers)).status_code == 200
    assert await trail(client, tenant, "token.revoke") == []

    # A token of someone outside the organization is not found, even by an admin.
    async with ctx.unit() as unit:
        await accounts.create_org(unit.session, "globex")
        await accounts.create_token(unit.session, "globex", "hank@example.com", name="hank")
        outsider = await unit.session.scalar(select(ApiToken.id).where(ApiToken.name == "hank"))
    missing = await client.delete(f"{O}/tokens/{outsider}", headers=tenant.headers)
    assert missing.status_code == 404


async def test_the_demo_token_is_reused_and_older_ones_are_revoked(ctx: Context) -> None:
    # A database that earlier `make run`s left two demo tokens in.
    first = await seed_demo(ctx)
    async with ctx.unit() as unit:
        older = await accounts.create_token(unit.session, "demo", DEMO_USER, name="demo")
    again = await seed_demo(ctx)
    assert again.token == first.token
    assert (ctx.settings.data_dir / DEMO_TOKEN_FILE).stat().st_mode & 0o077 == 0
    async with ctx.db.transaction() as session:
        live = list(await session.scalars(select(ApiToken.name).where(ApiToken.revoked_at.is_(None))))
        assert live == ["demo"]
        await accounts.authenticate(session, again.token)
    del older

    # A token that no longer works (revoked, or another database) is replaced.
    (ctx.settings.data_dir / DEMO_TOKEN_FILE).write_text("fl_not-a-token\n")
    fresh = await seed_demo(ctx)
    assert fresh.token != first.token
    assert (ctx.settings.data_dir / DEMO_TOKEN_FILE).read_text().strip() == fresh.token
    async with ctx.db.transaction() as session:
        assert (
            await session.scalar(
                select(ApiToken.id)
                .where(ApiToken.revoked_at.is_(None), ApiToken.name == "demo")
                .limit(2)
                .offset(1)
            )
            is None
        )


async def test_a_deleted_stacks_and_folders_destinations_go_with_them(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    h = tenant.headers
    await ok(
        await client.post(f"{O}/stacks", json={"slug": "web", "repository": "file:///r"}, headers=h), 201
    )
    await ok(await client.post(f"{O}/folders", json={"path": "prod"}, headers=h), 201)
    for name, scope in (("on-web", {"stack": "web"}), ("on-prod", {"folder": "prod"}), ("all", {})):
        body = {"name": name, "url": "http://127.0.0.1:9/x", "events": ["run.failed"], **scope}
        await ok(await client.post(f"{O}/notifications", json=body, headers=h), 201)
    await ok(await client.delete(f"{O}/stacks/web", headers=h), 204)
    await ok(await client.delete(f"{O}/folders/prod", headers=h), 204)
    left = (await ok(await client.get(f"{O}/notifications", headers=h)))["notifications"]
    assert [d["name"] for d in left] == ["all"]
    [stack_row] = await trail(client, tenant, "stack.delete")
    [folder_row] = await trail(client, tenant, "folder.delete")
    assert stack_row["details"]["notifications_deleted"] == ["on-web"]
    assert folder_row["details"]["notifications_deleted"] == ["on-prod"]
