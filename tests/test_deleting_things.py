"""Issue 40, item 4: stacks and folders are renamed, moved and deleted, a stack's Git credentials
rotated and removed; a stack is deleted only when no run is active and its managed state holds
no resources (unless an admin forces it), is then kept for the retention period (readable by
admins) and purged; an empty folder only is deleted. Everything is audited."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from conftest import Tenant
from firstlume.db.models import Run, Stack
from firstlume.db.types import utcnow
from firstlume.domain.errors import NotFound
from firstlume.domain.runs import RunType
from firstlume.services import accounts, dispatch, runs
from firstlume.services.access.roles import Role
from firstlume.services.commands import StartRun
from firstlume.services.context import Context
from firstlume.services.removal import purge_deleted_stacks
from support.runs import CREATE_ONE, plan_run, start
from support.snapshot import snapshot
from test_graphql_api import data
from test_state_api import state_doc

O = "/api/v1/orgs/acme"
OLD_TOKEN = "ghp_OLD-credential-1a2b"
NEW_TOKEN = "ghp_NEW-credential-3c4d"


async def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


async def refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code, error
    return error


async def new_stack(client: httpx.AsyncClient, tenant: Tenant, slug: str, **body: Any) -> dict[str, Any]:
    return await ok(  # type: ignore[no-any-return]
        await client.post(
            f"{O}/stacks",
            json={"slug": slug, "repository": "file:///nowhere", **body},
            headers=tenant.headers,
        ),
        201,
    )


async def trail(client: httpx.AsyncClient, tenant: Tenant, **params: Any) -> list[dict[str, Any]]:
    body = await ok(await client.get(f"{O}/audit", params=params, headers=tenant.headers))
    return list(reversed(body["entries"]))


async def sealed_token(ctx: Context, stack_id: str) -> str | None:
    async with ctx.db.transaction() as session:
        sealed = await session.scalar(select(Stack.git_https_token_sealed).where(Stack.id == stack_id))
    return None if sealed is None else ctx.keyring.decrypt_text(sealed, f"stack-git:{stack_id}")


async def test_a_stack_is_renamed_moved_and_its_credentials_rotated_and_removed(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    h = tenant.headers
    made = await new_stack(client, tenant, "net", folder="prod", git_https_token=OLD_TOKEN)
    await new_stack(client, tenant, "web")

    renamed = await ok(
        await client.patch(f"{O}/stacks/net", json={"slug": "network", "folder": "staging/eu"}, headers=h)
    )
    assert (renamed["id"], renamed["slug"], renamed["folder"]) == (made["id"], "network", "staging/eu")
    await refused(await client.get(f"{O}/stacks/net", headers=h), 404, "not_found")
    assert (await ok(await client.get(f"{O}/stacks/network", headers=h)))["folder"] == "staging/eu"
    folders = {f["path"] for f in (await ok(await client.get(f"{O}/folders", headers=h)))["folders"]}
    assert {"prod", "staging", "staging/eu"} <= folders
    # A slug another stack has is refused, and nothing changes.
    taken = await refused(
        await client.patch(f"{O}/stacks/network", json={"slug": "web"}, headers=h), 409, "already_exists"
    )
    assert taken["field"] == "slug"
    await refused(
        await client.patch(f"{O}/stacks/network", json={"slug": "Not A Slug"}, headers=h),
        422,
        "invalid_request",
    )

    rotated = await ok(
        await client.patch(f"{O}/stacks/network", json={"git_https_token": NEW_TOKEN}, headers=h)
    )
    assert rotated["git_auth"] == "https_token" and NEW_TOKEN not in repr(rotated)
    assert await sealed_token(ctx, made["id"]) == NEW_TOKEN
    removed = await ok(
        await client.patch(f"{O}/stacks/network", json={"git_https_token": None, "folder": None}, headers=h)
    )
    assert (removed["git_auth"], removed["folder"]) == (None, None)
    assert await sealed_token(ctx, made["id"]) is None
    await refused(
        await client.patch(f"{O}/stacks/network", json={"name": None}, headers=h), 422, "invalid_request"
    )

    updates = await trail(client, tenant, action="stack.update")
    assert [(r["target"], r["details"]) for r in updates] == [
        ("stack:network", {"slug": "network", "renamed_from": "net", "folder": "staging/eu"}),
        ("stack:network", {"credentials": {"https_token": "replaced"}}),
        ("stack:network", {"folder": None, "credentials": {"https_token": "removed"}}),
    ]
    dump = repr(await snapshot(ctx))
    assert OLD_TOKEN not in dump and NEW_TOKEN not in dump


async def test_a_stack_is_not_renamed_while_a_phase_runs(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    await new_stack(client, tenant, "net")
    await start(ctx, tenant.token, "acme", "net", "plan")
    [launch] = await dispatch.claim_plans(ctx)
    busy = await refused(
        await client.patch(f"{O}/stacks/net", json={"slug": "network"}, headers=tenant.headers),
        409,
        "stack_busy",
    )
    assert "#1 (planning)" in busy["message"] and busy["runs"] == [launch.run_id]
    # Other fields may change meanwhile.
    await ok(await client.patch(f"{O}/stacks/net", json={"name": "Network"}, headers=tenant.headers))


async def test_a_stack_with_an_active_run_is_deleted_only_by_force(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    h = tenant.headers
    await new_stack(client, tenant, "net")
    waiting = await start(ctx, tenant.token, "acme", "net", "apply")
    assert await plan_run(ctx, CREATE_ONE) == {waiting: "awaiting_approval"}
    queued = await start(ctx, tenant.token, "acme", "net", "plan")
    busy = await refused(await client.delete(f"{O}/stacks/net", headers=h), 409, "stack_busy")
    assert "#1 (awaiting_approval), #2 (queued)" in busy["message"] and "force=true" in busy["message"]
    assert busy["runs"] == [waiting, queued]
    await ok(await client.get(f"{O}/stacks/net", headers=h))  # nothing changed

    await ok(await client.delete(f"{O}/stacks/net", params={"force": "true"}, headers=h), 204)
    discarded = await ok(await client.get(f"{O}/runs/{waiting}", headers=h))
    assert (discarded["status"], discarded["stack"]) == ("discarded", "net")
    run = await ok(await client.get(f"{O}/runs/{queued}", headers=h))
    assert run["status"] == "canceled" and run["stack"] == "net"
    await refused(await client.get(f"{O}/stacks/net", headers=h), 404, "not_found")
    assert (await ok(await client.get(f"{O}/stacks", headers=h)))["stacks"] == []
    await refused(
        await client.post(f"{O}/stacks/net/runs", json={"type": "plan"}, headers=h), 404, "not_found"
    )
    # The slug is free again.
    await new_stack(client, tenant, "net")
    [deleted] = await trail(client, tenant, action="stack.delete")
    assert (deleted["target"], deleted["stack"], deleted["details"]) == (
        "stack:net",
        "net",
        {"forced": True, "resources": 0, "ended_runs": [waiting, queued], "notifications_deleted": []},
    )


async def test_a_running_phase_refuses_even_a_forced_delete(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    await new_stack(client, tenant, "net")
    await start(ctx, tenant.token, "acme", "net", "plan")
    await dispatch.claim_plans(ctx)
    busy = await refused(
        await client.delete(f"{O}/stacks/net", params={"force": "true"}, headers=tenant.headers),
        409,
        "stack_busy",
    )
    assert "running" in busy["message"]


async def test_a_stack_whose_state_holds_resources_is_deleted_only_by_force(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    h = tenant.headers
    await new_stack(client, tenant, "net")
    await ok(await client.post(f"{O}/stacks/net/state", content=state_doc(1), headers=h))
    held = await refused(await client.delete(f"{O}/stacks/net", headers=h), 409, "stack_has_resources")
    assert held["resources"] == 1 and "1 resource" in held["message"]
    await refused(
        await client.delete(f"{O}/stacks/net", params={"force": "maybe"}, headers=h), 422, "invalid_request"
    )
    await ok(await client.delete(f"{O}/stacks/net", params={"force": "true"}, headers=h), 204)


async def test_only_admins_delete_stacks(client: httpx.AsyncClient, tenant: Tenant, ctx: Context) -> None:
    await new_stack(client, tenant, "net")
    async with ctx.unit() as unit:
        token = await accounts.create_token(unit.session, "acme", "bob@example.com", role=Role.OPERATOR)
    bob = {"Authorization": f"Bearer {token}"}
    await refused(await client.delete(f"{O}/stacks/net", headers=bob), 403, "forbidden")
    await refused(await client.get(f"{O}/deleted-stacks", headers=bob), 403, "forbidden")
    await refused(await client.delete(f"{O}/folders/x", headers=bob), 403, "forbidden")


async def test_a_deleted_stack_is_kept_for_admins_then_purged(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    h = tenant.headers
    made = await new_stack(client, tenant, "net")
    run_id = await start(ctx, tenant.token, "acme", "net", "plan")
    await ok(await client.post(f"{O}/runs/{run_id}/cancel", headers=h))
    await ok(await client.post(f"{O}/stacks/net/state", content=state_doc(1), headers=h))
    emptied = {**json.loads(state_doc(2)), "resources": []}  # what a destroy leaves
    await ok(await client.post(f"{O}/stacks/net/state", content=json.dumps(emptied).encode(), headers=h))
    await ok(await client.delete(f"{O}/stacks/net", headers=h), 204)

    [kept] = (await ok(await client.get(f"{O}/deleted-stacks", headers=h)))["stacks"]
    assert (kept["id"], kept["slug"], kept["deleted_by"]) == (made["id"], "net", "ada@example.com")
    assert kept["purge_after"] > kept["deleted_at"]
    assert await ok(await client.get(f"{O}/deleted-stacks/{made['id']}", headers=h)) == kept
    [run] = (await ok(await client.get(f"{O}/deleted-stacks/{made['id']}/runs", headers=h)))["runs"]
    assert (run["id"], run["stack"], run["status"]) == (run_id, "net", "canceled")
    versions = await ok(await client.get(f"{O}/deleted-stacks/{made['id']}/state/versions", headers=h))
    assert [(v["serial"], v["resources"]) for v in versions["versions"]] == [(2, 0), (1, 1)]
    actions = [r["action"] for r in await trail(client, tenant, stack="net")]
    assert actions[-4:] == ["run.cancel", "state.write", "state.write", "stack.delete"]

    # A stack found before its deletion starts no run afterwards (a push or the schedule).
    async with ctx.unit() as unit:
        row = await unit.session.get(Stack, made["id"])
        assert row is not None
        actor = await accounts.authenticate(unit.session, tenant.token)
        with pytest.raises(NotFound):
            await runs.start_run(unit, actor, row, StartRun(type=RunType.PLAN))

    async with ctx.db.transaction() as session:
        assert await purge_deleted_stacks(session, utcnow(), timedelta(days=30)) == []
        assert await purge_deleted_stacks(session, utcnow() + timedelta(days=31), timedelta(days=30)) == [
            made["id"]
        ]
    await refused(await client.get(f"{O}/deleted-stacks/{made['id']}", headers=h), 404, "not_found")
    async with ctx.db.transaction() as session:
        assert await session.scalar(select(Run.id).where(Run.id == run_id)) is None
    # The organization's audit trail outlives the stack.
    assert "stack.delete" in [r["action"] for r in await trail(client, tenant, stack="net")]


async def test_deleted_stack_state_versions_stay_readable(client: httpx.AsyncClient, tenant: Tenant) -> None:
    h = tenant.headers
    made = await new_stack(client, tenant, "net")
    await ok(await client.post(f"{O}/stacks/net/state", content=state_doc(1), headers=h))
    await ok(await client.delete(f"{O}/stacks/net", params={"force": "true"}, headers=h), 204)
    base = f"{O}/deleted-stacks/{made['id']}/state/versions"
    [version] = (await ok(await client.get(base, headers=h)))["versions"]
    assert (version["serial"], version["resources"]) == (1, 1)
    paged = await ok(await client.get(base, params={"unit": ".", "limit": "1", "before": "5"}, headers=h))
    assert [v["serial"] for v in paged["versions"]] == [1]
    runs = await ok(
        await client.get(
            f"{O}/deleted-stacks/{made['id']}/runs", params={"limit": "1", "before": "9"}, headers=h
        )
    )
    assert runs == {"runs": []}
    await refused(await client.get(base, params={"colour": "red"}, headers=h), 422, "invalid_request")
    stored = await client.get(f"{base}/1", headers=h)
    assert stored.status_code == 200 and stored.content == state_doc(1)
    await refused(await client.get(f"{base}/2", headers=h), 404, "not_found")
    await refused(await client.get(f"{O}/deleted-stacks/nope/runs", headers=h), 404, "not_found")


async def test_folders_are_renamed_moved_and_deleted_only_when_empty(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    h = tenant.headers
    await ok(await client.post(f"{O}/folders", json={"path": "prod/eu/west"}, headers=h), 201)
    await ok(await client.post(f"{O}/folders", json={"path": "staging"}, headers=h), 201)
    await new_stack(client, tenant, "net", folder="prod/eu")

    moved = await ok(
        await client.patch(f"{O}/folders/prod/eu", json={"path": "production/europe"}, headers=h)
    )
    assert (moved["path"], moved["name"], moved["parent"]) == ("production/europe", "europe", "production")
    paths = [f["path"] for f in (await ok(await client.get(f"{O}/folders", headers=h)))["folders"]]
    assert paths == ["prod", "production", "production/europe", "production/europe/west", "staging"]
    assert (await ok(await client.get(f"{O}/stacks/net", headers=h)))["folder"] == "production/europe"
    # Its settings moved with it.
    await ok(
        await client.patch(
            f"{O}/folders/production/europe/settings", json={"require_approval": False}, headers=h
        )
    )

    into_itself = await refused(
        await client.patch(f"{O}/folders/production", json={"path": "production/europe/x"}, headers=h),
        422,
        "invalid_request",
    )
    assert into_itself["field"] == "path"
    await refused(
        await client.patch(f"{O}/folders/production", json={"path": "staging"}, headers=h),
        409,
        "already_exists",
    )
    await refused(await client.patch(f"{O}/folders/nope", json={"path": "x"}, headers=h), 404, "not_found")

    full = await refused(
        await client.delete(f"{O}/folders/production/europe", headers=h), 409, "folder_not_empty"
    )
    assert full["folders"] == ["production/europe/west"] and full["stacks"] == ["net"]
    assert "folder production/europe/west, stack net" in full["message"]
    await ok(await client.patch(f"{O}/stacks/net", json={"folder": "staging"}, headers=h))
    await ok(await client.delete(f"{O}/folders/production/europe/west", headers=h), 204)
    await ok(await client.delete(f"{O}/folders/production/europe", headers=h), 204)
    await ok(await client.delete(f"{O}/folders/prod", headers=h), 204)
    await refused(await client.delete(f"{O}/folders/prod", headers=h), 404, "not_found")
    paths = [f["path"] for f in (await ok(await client.get(f"{O}/folders", headers=h)))["folders"]]
    assert paths == ["production", "staging"]

    rows = await trail(client, tenant, action=["folder.update", "folder.delete"])
    assert [(r["action"], r["target"], r["details"]) for r in rows] == [
        ("folder.update", "folder:production/europe", {"path": "production/europe", "was": "prod/eu"}),
        (
            "folder.delete",
            "folder:production/europe/west",
            {"variables_deleted": [], "notifications_deleted": []},
        ),
        ("folder.delete", "folder:production/europe", {"variables_deleted": [], "notifications_deleted": []}),
        ("folder.delete", "folder:prod", {"variables_deleted": [], "notifications_deleted": []}),
    ]


async def test_graphql_renames_moves_and_deletes(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    await new_stack(client, tenant, "net", folder="prod")
    renamed = await data(
        client,
        tenant,
        """mutation { updateStack(org: "acme", stack: "net", input: {slug: "network", folder: "ops", gitSshKey: "KEY"}) {
          __typename ... on Stack { slug } } }""",
    )
    assert renamed == {"updateStack": {"__typename": "Stack", "slug": "network"}}
    await start(ctx, tenant.token, "acme", "network", "plan")
    delete = """mutation($force: Boolean!) { deleteStack(org: "acme", stack: "network", force: $force) {
      __typename ... on Error { code message } ... on DeletedStack { slug deletedAt purgeAfter } } }"""
    busy = (await data(client, tenant, delete, force=False))["deleteStack"]
    assert (busy["__typename"], busy["code"]) == ("ConflictError", "stack_busy")
    gone = (await data(client, tenant, delete, force=True))["deleteStack"]
    assert (
        gone["__typename"] == "DeletedStack"
        and gone["slug"] == "network"
        and gone["purgeAfter"] > gone["deletedAt"]
    )
    listed = await data(client, tenant, '{ organization(slug: "acme") { deletedStacks { slug deletedBy } } }')
    assert listed == {
        "organization": {"deletedStacks": [{"slug": "network", "deletedBy": "ada@example.com"}]}
    }
    async with ctx.unit() as unit:
        token = await accounts.create_token(unit.session, "acme", "rita@example.com", role=Role.READER)
    reader = (
        await client.post(
            "/graphql",
            json={"query": '{ organization(slug: "acme") { deletedStacks { slug } } }'},
            headers={"Authorization": f"Bearer {token}"},
        )
    ).json()
    assert reader["errors"][0]["extensions"]["code"] == "forbidden"

    moved = await data(
        client,
        tenant,
        'mutation { moveFolder(org: "acme", path: "ops", newPath: "platform/ops") { __typename ... on Folder { path name } } }',
    )
    assert moved == {"moveFolder": {"__typename": "Folder", "path": "platform/ops", "name": "ops"}}
    not_empty = await data(
        client,
        tenant,
        'mutation { deleteFolder(org: "acme", path: "platform") { __typename ... on Error { code } } }',
    )
    assert not_empty == {"deleteFolder": {"__typename": "ConflictError", "code": "folder_not_empty"}}
    deleted = await data(
        client,
        tenant,
        'mutation { deleteFolder(org: "acme", path: "platform/ops") { __typename ... on DeletedFolder { path } } }',
    )
    assert deleted == {"deleteFolder": {"__typename": "DeletedFolder", "path": "platform/ops"}}
    assert "KEY" not in repr([r["details"] for r in await trail(client, tenant)])
