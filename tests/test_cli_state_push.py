"""The CLI's state writes (`terraform state push|rm` through a `cloud` block) in process, on both
databases: a new version under the workspace lock; a foreign lineage, a serial going backwards,
a wrong checksum, no lock, another organization's workspace: a clear 4xx and nothing stored;
`-force` replaces the state as HCP Terraform does. The real CLI: tests/e2e/test_cli_state.py."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import httpx
import pytest

from conftest import Tenant, make_tenant
from firstlume.services.context import Context

V2 = "/api/v2"
LINEAGE = "8d3a6c52-0000-4000-8000-000000000001"


def state(serial: int, lineage: str = LINEAGE, resources: int = 1) -> bytes:
    body = {
        "version": 4,
        "terraform_version": "1.11.4",
        "serial": serial,
        "lineage": lineage,
        "outputs": {},
        "resources": [
            {
                "mode": "managed",
                "type": "terraform_data",
                "name": f"r{i}",
                "provider": 'provider["terraform.io/builtin/terraform"]',
                "instances": [{"schema_version": 0, "attributes": {"id": str(i)}}],
            }
            for i in range(resources)
        ],
        "check_results": None,
    }
    return json.dumps(body, indent=2).encode()


def version_document(raw: bytes, **changes: Any) -> dict[str, Any]:
    parsed = json.loads(raw)
    attributes = {
        "serial": parsed["serial"],
        "md5": hashlib.md5(raw).hexdigest(),
        "lineage": parsed.get("lineage"),
        "state": base64.b64encode(raw).decode(),
    }
    attributes.update(changes)
    return {
        "data": {
            "type": "state-versions",
            "attributes": {k: v for k, v in attributes.items() if v is not None},
        }
    }


class Workspace:
    def __init__(self, client: httpx.AsyncClient, tenant: Tenant, ident: str) -> None:
        self.client, self.tenant, self.id = client, tenant, ident
        self.headers = {**tenant.headers, "Content-Type": "application/vnd.api+json"}

    async def post(self, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        return await self.client.post(
            f"{V2}/workspaces/{self.id}{path}", content=json.dumps(body or {}), headers=self.headers
        )

    async def push(self, raw: bytes, **changes: Any) -> httpx.Response:
        return await self.post("/state-versions", version_document(raw, **changes))

    async def versions(self) -> list[dict[str, Any]]:
        response = await self.client.get(
            f"/api/v1/orgs/{self.tenant.org}/stacks/network/state/versions", headers=self.tenant.headers
        )
        return response.json()["versions"]  # type: ignore[no-any-return]


@pytest.fixture
async def workspace(client: httpx.AsyncClient, tenant: Tenant) -> Workspace:
    created = await client.post(
        f"{V2}/organizations/{tenant.org}/workspaces",
        content=json.dumps({"data": {"type": "workspaces", "attributes": {"name": "network"}}}),
        headers=tenant.headers,
    )
    assert created.status_code == 201, created.text
    ws = Workspace(client, tenant, created.json()["data"]["id"])
    assert (await ws.post("/actions/lock")).status_code == 200
    first = await ws.push(state(1))
    assert first.status_code == 201, first.text
    return ws


def refusal(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    [error] = response.json()["errors"]
    return str(error["detail"])


async def test_a_pushed_state_is_a_new_version_the_cli_reads_back(workspace: Workspace) -> None:
    raw = state(2, resources=3)
    pushed = await workspace.push(raw)
    assert pushed.status_code == 201, pushed.text
    data = pushed.json()["data"]
    assert data["type"] == "state-versions" and data["attributes"]["serial"] == 2
    current = await workspace.client.get(
        f"{V2}/workspaces/{workspace.id}/current-state-version", headers=workspace.headers
    )
    url = current.json()["data"]["attributes"]["hosted-state-download-url"]
    assert (await workspace.client.get(url, headers=workspace.headers)).content == raw
    versions = await workspace.versions()
    assert [(v["serial"], v["resources"], v["created_by"]) for v in versions] == [
        (2, 3, workspace.tenant.email),
        (1, 1, workspace.tenant.email),
    ]


@pytest.mark.parametrize(
    ("raw", "changes", "status", "words"),
    [
        (state(5, lineage="another-lineage"), {}, 409, "lineage"),
        (state(0), {}, 409, "behind the current serial"),
        (state(1, resources=2), {}, 409, "already stored with other content"),
        (state(2), {"md5": "0" * 32}, 422, "md5"),
        (state(2), {"serial": 3}, 422, "not the state's own"),
        (state(2), {"state": "***not base64***"}, 422, "base64"),
        (state(2), {"state": None}, 422, "param is missing or the value is empty: state"),
        (b'{"serial": 2}', {"lineage": None, "serial": 2}, 422, "version"),
    ],
)
async def test_bad_pushes_are_refused_and_nothing_is_stored(
    workspace: Workspace, raw: bytes, changes: dict[str, Any], status: int, words: str
) -> None:
    before = await workspace.versions()
    assert words in refusal(await workspace.push(raw, **changes), status)
    assert await workspace.versions() == before


async def test_a_push_needs_the_workspace_lock(workspace: Workspace) -> None:
    assert (await workspace.post("/actions/unlock")).status_code == 200
    assert "Lock the workspace" in refusal(await workspace.push(state(2)), 409)
    assert len(await workspace.versions()) == 1


async def test_force_replaces_the_state_whatever_its_lineage(workspace: Workspace) -> None:
    forced = await workspace.push(state(1, lineage="another-lineage", resources=2), force=True)
    assert forced.status_code == 201, forced.text
    [newest, _] = await workspace.versions()
    # Kept by serial: the forced state goes in as the next one.
    assert (newest["serial"], newest["lineage"], newest["resources"]) == (2, "another-lineage", 2)


async def test_another_organizations_workspace_is_not_found(
    workspace: Workspace, client: httpx.AsyncClient, ctx: Context
) -> None:
    other = await make_tenant(ctx, "globex", "grace@example.com")
    attempt = await client.post(
        f"{V2}/workspaces/{workspace.id}/state-versions",
        content=json.dumps(version_document(state(2))),
        headers=other.headers,
    )
    assert attempt.status_code == 404, attempt.text
    unknown = await client.post(
        f"{V2}/workspaces/ws-nope/state-versions",
        content=json.dumps(version_document(state(2))),
        headers=workspace.headers,
    )
    assert unknown.status_code == 404, unknown.text
    assert len(await workspace.versions()) == 1
