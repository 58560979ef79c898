"""Managed state in GraphQL: each unit's serial, lock holder, versions and outputs (sensitive
values hidden), and the forceUnlock mutation; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import httpx

from conftest import Tenant, make_stack
from firstlume.services.context import Context
from test_state_api import SECRET, lock_info, state_doc

STATE = """
query State($org: String!, $slug: String!) {
  organization(slug: $org) {
    stack(slug: $slug) {
      state {
        unit serial lineage
        lock { id holder runId phase operation who lockedAt }
        versions(first: 5) { serial lineage sha256 resources createdAt createdBy runId runNumber phase }
        outputs { name type value sensitive }
      }
      states { unit serial }
    }
  }
}
"""

FORCE_UNLOCK = """
mutation Force($org: String!, $slug: String!) {
  forceUnlock(org: $org, stack: $slug) {
    __typename
    ... on StackState { unit lock { id } }
    ... on Error { code message }
  }
}
"""


async def gql(client: httpx.AsyncClient, tenant: Tenant, query: str) -> dict[str, Any]:
    variables = {"org": tenant.org, "slug": "net"}
    response = await client.post(
        "/graphql", json={"query": query, "variables": variables}, headers=tenant.headers
    )
    body = response.json()
    assert response.status_code == 200 and "errors" not in body, body
    return body["data"]  # type: ignore[no-any-return]


async def test_a_stacks_state_lock_versions_and_outputs(
    ctx: Context, client: httpx.AsyncClient, tenant: Tenant
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///nowhere"})
    base = f"/api/v1/orgs/{tenant.org}/stacks/net/state"
    empty = (await gql(client, tenant, STATE))["organization"]["stack"]
    assert empty["state"] == {
        "unit": ".",
        "serial": None,
        "lineage": None,
        "lock": None,
        "versions": [],
        "outputs": [],
    }
    assert empty["states"] == []

    await client.post(base, content=state_doc(1), headers=tenant.headers)
    await client.post(base, content=state_doc(2, value="two"), headers=tenant.headers)
    await client.request("LOCK", f"{base}/lock", content=lock_info("L9"), headers=tenant.headers)
    stack = (await gql(client, tenant, STATE))["organization"]["stack"]
    state = stack["state"]
    assert (state["serial"], state["lineage"]) == (2, "lineage-a")
    assert [v["serial"] for v in state["versions"]] == [2, 1]
    assert state["versions"][0]["createdBy"] == tenant.email and state["versions"][0]["runId"] is None
    assert state["versions"][0]["resources"] == 1
    assert state["lock"]["id"] == "L9" and state["lock"]["holder"] == tenant.email
    assert state["lock"]["who"] == "ada@laptop" and state["lock"]["operation"] == "OperationTypeApply"
    assert state["outputs"] == [
        {"name": "endpoint", "type": "string", "value": "https://two", "sensitive": False},
        {"name": "password", "type": "string", "value": "(sensitive)", "sensitive": True},
    ]
    assert stack["states"] == [{"unit": ".", "serial": 2}]
    assert SECRET not in json.dumps(stack)

    unlocked = (await gql(client, tenant, FORCE_UNLOCK))["forceUnlock"]
    assert unlocked == {"__typename": "StackState", "unit": ".", "lock": None}
    assert (await client.get(f"{base}/lock", headers=tenant.headers)).json() == {"lock": None}


async def test_force_unlock_of_a_missing_stack_is_a_typed_error(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    result = (await gql(client, tenant, FORCE_UNLOCK))["forceUnlock"]
    assert result["__typename"] == "NotFoundError" and result["code"] == "not_found"
