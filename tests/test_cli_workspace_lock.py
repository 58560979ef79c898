"""A workspace's lock over the HCP Terraform API (`terraform force-unlock` and the CLI's state
commands) is the stack's managed-state lock, held in the person's name."""

from __future__ import annotations

import json

import httpx

from conftest import Tenant

V2 = "/api/v2"


async def test_lock_unlock_and_force_unlock_are_the_managed_state_lock(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    headers = {**tenant.headers, "Content-Type": "application/vnd.api+json"}
    created = await client.post(
        f"{V2}/organizations/{tenant.org}/workspaces",
        content=json.dumps({"data": {"type": "workspaces", "attributes": {"name": "network"}}}),
        headers=headers,
    )
    assert created.status_code == 201, created.text
    workspace = created.json()["data"]["id"]
    assert created.json()["data"]["attributes"]["locked"] is False

    locked = await client.post(
        f"{V2}/workspaces/{workspace}/actions/lock", content='{"reason": "maintenance"}', headers=headers
    )
    assert locked.status_code == 200, locked.text
    assert locked.json()["data"]["attributes"]["locked"] is True
    again = await client.post(f"{V2}/workspaces/{workspace}/actions/lock", content="{}", headers=headers)
    assert again.status_code == 409, again.text
    assert again.json()["errors"][0]["detail"]

    unlocked = await client.post(f"{V2}/workspaces/{workspace}/actions/unlock", headers=headers)
    assert unlocked.status_code == 200, unlocked.text
    assert unlocked.json()["data"]["attributes"]["locked"] is False

    await client.post(f"{V2}/workspaces/{workspace}/actions/lock", content="{}", headers=headers)
    forced = await client.post(f"{V2}/workspaces/{workspace}/actions/force-unlock", headers=headers)
    assert forced.status_code == 200, forced.text
    assert forced.json()["data"]["attributes"]["locked"] is False
