"""Members management: add with a role and groups, change, remove; the last admin stays; bad
input is refused with a sentence and changes nothing; GraphQL does the same."""

from __future__ import annotations

from typing import Any

import httpx

from conftest import Tenant
from firstlume.services.context import Context
from support.snapshot import snapshot

O = "/api/v1/orgs/acme"


async def test_members_are_added_changed_and_removed(client: httpx.AsyncClient, tenant: Tenant) -> None:
    h = tenant.headers
    assert (await client.get(f"{O}/members", headers=h)).json() == {
        "members": [{"email": "ada@example.com", "role": "admin", "groups": []}]
    }
    added = await client.put(
        f"{O}/members/bob@example.com", headers=h, json={"role": "operator", "groups": ["sre", "dba", "sre"]}
    )
    assert added.status_code == 200 and added.json() == {
        "email": "bob@example.com",
        "role": "operator",
        "groups": ["dba", "sre"],
    }
    changed = await client.put(f"{O}/members/bob@example.com", headers=h, json={"role": "admin"})
    assert changed.json() == {"email": "bob@example.com", "role": "admin", "groups": []}
    # Two admins: ada may step down, and then bob is the last one.
    assert (
        await client.put(f"{O}/members/ada@example.com", headers=h, json={"role": "operator"})
    ).status_code == 200
    gone = await client.delete(f"{O}/members/ada@example.com", headers=h)
    assert gone.status_code == 403 and gone.json()["error"]["needed"] == "admin"  # ada is an operator now


async def test_the_last_admin_stays_and_bad_input_changes_nothing(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    h = tenant.headers
    for method, path, body, status, code in [
        ("PUT", "/members/ada@example.com", {"role": "reader"}, 409, "last_admin"),
        ("DELETE", "/members/ada@example.com", None, 409, "last_admin"),
        ("DELETE", "/members/nobody@example.com", None, 404, "not_found"),
        ("PUT", "/members/bob@example.com", {"role": "boss"}, 422, "invalid_request"),
        ("PUT", "/members/bob@example.com", {}, 422, "invalid_request"),
        (
            "PUT",
            "/members/bob@example.com",
            {"role": "reader", "groups": ["no spaces"]},
            422,
            "invalid_request",
        ),
        ("PUT", "/members/bob@example.com", {"role": "reader", "groups": "sre"}, 422, "invalid_request"),
        ("PUT", "/members/not-an-email", {"role": "reader"}, 422, "invalid_request"),
        ("PUT", "/members/bob@example.com", {"role": "reader", "admin": True}, 422, "invalid_request"),
    ]:
        before = await snapshot(ctx)
        response = await client.request(method, O + path, headers=h, json=body)
        assert response.status_code == status, (path, body, response.text)
        error = response.json()["error"]
        assert error["code"] == code and error["message"].endswith(".")
        assert await snapshot(ctx) == before, (path, body)


async def test_graphql_manages_members(client: httpx.AsyncClient, tenant: Tenant) -> None:
    async def gql(query: str) -> Any:
        body = (await client.post("/graphql", headers=tenant.headers, json={"query": query})).json()
        assert not body.get("errors"), body
        return body["data"]

    put = await gql(
        'mutation { setMember(org: "acme", email: "sam@example.com", role: "operator", groups: ["sre"]) { __typename ... on Member { email role groups } } }'
    )
    assert put["setMember"] == {
        "__typename": "Member",
        "email": "sam@example.com",
        "role": "operator",
        "groups": ["sre"],
    }
    listed = await gql('{ organization(slug: "acme") { viewerRole members { email role groups } } }')
    assert listed["organization"] == {
        "viewerRole": "admin",
        "members": [
            {"email": "ada@example.com", "role": "admin", "groups": []},
            {"email": "sam@example.com", "role": "operator", "groups": ["sre"]},
        ],
    }
    last = await gql(
        'mutation { removeMember(org: "acme", email: "ada@example.com") { __typename ... on Error { code } } }'
    )
    assert last["removeMember"] == {"__typename": "ConflictError", "code": "last_admin"}
    removed = await gql('mutation { removeMember(org: "acme", email: "sam@example.com") { __typename } }')
    assert removed["removeMember"] == {"__typename": "RemovedMember"}
    bad = await gql(
        'mutation { setMember(org: "acme", email: "x@example.com", role: "boss") { __typename ... on Error { code } } }'
    )
    assert bad["setMember"] == {"__typename": "InvalidInputError", "code": "invalid_request"}
