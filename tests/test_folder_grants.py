"""Roles per folder: a grant raises a member's role on a folder and everything under it, never
lowers it. group:net is an operator of network/: its reader members start and approve runs of
stacks under network/ (and its subfolders) and get 403 elsewhere; reads show each stack's
effective role as viewer_role (REST and GraphQL); GET shows the grants with their origins."""

from __future__ import annotations

from typing import Any

import httpx

from conftest import Tenant
from firstlume.services.context import Context
from support.members import add_member, grant_folder
from support.runs import plan_run, start
from test_graphql_api import synthetic_plan

O = "/api/v1/orgs/acme"


async def _world(client: httpx.AsyncClient, ctx: Context, tenant: Tenant) -> dict[str, dict[str, str]]:
    h = tenant.headers
    for slug, folder in (("vpc", "network"), ("dns", "network/eu"), ("web", "prod")):
        made = await client.post(
            f"{O}/stacks", headers=h, json={"slug": slug, "repository": "file:///r", "folder": folder}
        )
        assert made.status_code == 201, made.text
    patched = await client.patch(f"{O}/settings", headers=h, json={"require_approval": True})
    assert patched.status_code == 200, patched.text
    people = {}
    for name, role, groups in (
        ("nat", "reader", ["net"]),
        ("rex", "reader", []),
        ("ola", "operator", ["net"]),
    ):
        people[name] = await add_member(client, ctx, h, "acme", f"{name}@example.com", role, groups)
    await grant_folder(client, h, "acme", "network", {"group:net": "operator"})
    return people


async def _start(client: httpx.AsyncClient, headers: dict[str, str], stack: str) -> httpx.Response:
    return await client.post(f"{O}/stacks/{stack}/runs", headers=headers, json={"type": "plan"})


async def test_a_group_granted_operator_on_network_starts_and_approves_there_only(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    people = await _world(client, ctx, tenant)
    nat, rex = people["nat"], people["rex"]
    # Approving: a run under network/ awaiting approval, and one under prod/.
    net_run = await start(ctx, tenant.token, "acme", "dns", "apply")
    prod_run = await start(ctx, tenant.token, "acme", "web", "apply")
    results = await plan_run(ctx, synthetic_plan())
    assert results[net_run] == results[prod_run] == "awaiting_approval", results
    denied = await client.post(f"{O}/runs/{prod_run}/approve", headers=nat, content="{}")
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "forbidden", denied.text
    approved = await client.post(f"{O}/runs/{net_run}/approve", headers=nat, content="{}")
    assert approved.status_code == 200 and approved.json()["status"] == "apply_queued", approved.text

    # Starting: under network/ and its subfolders only.
    for stack in ("vpc", "dns"):  # network/ and network/eu/
        started = await _start(client, nat, stack)
        assert started.status_code == 201, started.text
    refused = await _start(client, nat, "web")
    assert refused.status_code == 403 and refused.json()["error"]["needed"] == "operator"
    assert (await _start(client, rex, "vpc")).status_code == 403  # no grant reaches rex

    # GraphQL: the same checks.
    mutation = 'mutation { startRun(org: "acme", stack: "%s", type: PLAN) { __typename } }'
    ok = (await client.post("/graphql", headers=nat, json={"query": mutation % "vpc"})).json()
    assert ok["data"]["startRun"]["__typename"] == "Run", ok
    no = (await client.post("/graphql", headers=nat, json={"query": mutation % "web"})).json()
    assert no["errors"][0]["extensions"]["code"] == "forbidden", no


async def test_viewer_role_and_the_grants_with_their_origins(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    people = await _world(client, ctx, tenant)
    listed = (await client.get(f"{O}/stacks", headers=people["nat"])).json()["stacks"]
    assert {s["slug"]: s["viewer_role"] for s in listed} == {
        "vpc": "operator",
        "dns": "operator",
        "web": "reader",
    }
    one = (await client.get(f"{O}/stacks/web", headers=tenant.headers)).json()
    assert one["viewer_role"] == "admin"
    # A grant never lowers: ola is an operator everywhere; a reader grant changes nothing.
    h = tenant.headers
    put = await client.put(
        f"{O}/folders/prod/grants", headers=h, json={"grants": {"user:ola@example.com": "reader"}}
    )
    assert put.status_code == 200
    ola = (await client.get(f"{O}/stacks/web", headers=people["ola"])).json()
    assert ola["viewer_role"] == "operator"

    query = '{ organization(slug: "acme") { stacks { slug viewerRole } } }'
    body = (await client.post("/graphql", headers=people["nat"], json={"query": query})).json()
    roles = {s["slug"]: s["viewerRole"] for s in body["data"]["organization"]["stacks"]}
    assert roles == {"vpc": "operator", "dns": "operator", "web": "reader"}, body

    grants = (await client.get(f"{O}/folders/network/eu/grants", headers=h)).json()
    assert grants == {
        "path": "network/eu",
        "grants": {},
        "effective": [{"principal": "group:net", "role": "operator", "origin": "network"}],
    }
    entries = (await client.get(f"{O}/audit", headers=h, params={"action": "folder.grants.update"})).json()
    assert [e["target"] for e in entries["entries"]] == ["folder:prod", "folder:network"]


async def test_bad_grants_are_refused_and_change_nothing(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    people = await _world(client, ctx, tenant)
    h = tenant.headers
    bodies: list[Any] = [
        {"grants": {"team:net": "operator"}},
        {"grants": {"group:net": "owner"}},
        {"grants": {"user:not-an-email": "reader"}},
        {"grants": ["group:net"]},
        {"grants": {}, "extra": 1},
    ]
    for body in bodies:
        refused = await client.put(f"{O}/folders/network/grants", headers=h, json=body)
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_request", body
    not_object = await client.put(f"{O}/folders/network/grants", headers=h, json=[])
    assert not_object.status_code == 400 and not_object.json()["error"]["code"] == "invalid_json"
    missing = await client.put(f"{O}/folders/nowhere/grants", headers=h, json={"grants": {}})
    assert missing.status_code == 404
    not_admin = await client.put(f"{O}/folders/network/grants", headers=people["ola"], json={"grants": {}})
    assert not_admin.status_code == 403
    kept = (await client.get(f"{O}/folders/network/grants", headers=h)).json()
    assert kept["grants"] == {"group:net": "operator"}


async def test_graphql_sets_and_reads_the_grants_and_the_sso_mapping(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    people = await _world(client, ctx, tenant)
    h = tenant.headers
    mutation = """mutation { setFolderGrants(org: "acme", path: "network/eu",
      grants: [{principal: "user:rex@example.com", role: "operator"}]) {
        __typename ... on FolderGrants { path grants { principal role origin } effective { principal origin } }
        ... on Error { code message } } }"""
    body = (await client.post("/graphql", headers=h, json={"query": mutation})).json()
    assert body["data"]["setFolderGrants"] == {
        "__typename": "FolderGrants",
        "path": "network/eu",
        "grants": [{"principal": "user:rex@example.com", "role": "operator", "origin": "network/eu"}],
        "effective": [
            {"principal": "group:net", "origin": "network"},
            {"principal": "user:rex@example.com", "origin": "network/eu"},
        ],
    }, body
    assert (await _start(client, people["rex"], "dns")).status_code == 201
    bad = mutation.replace("operator", "owner")
    refused = (await client.post("/graphql", headers=h, json={"query": bad})).json()
    assert refused["data"]["setFolderGrants"]["__typename"] == "InvalidInputError", refused

    update = """mutation { updateSso(org: "acme", groups: [{idpGroup: "platform-sre", role: "operator", groups: ["sre"]}],
      defaultRole: "reader") { __typename ... on SsoMapping { defaultRole groups { idpGroup role groups } } } }"""
    body = (await client.post("/graphql", headers=h, json={"query": update})).json()
    assert body["data"]["updateSso"] == {
        "__typename": "SsoMapping",
        "defaultRole": "reader",
        "groups": [{"idpGroup": "platform-sre", "role": "operator", "groups": ["sre"]}],
    }, body
    read = '{ organization(slug: "acme") { sso { defaultRole } folderGrants(path: "network") { grants { principal } } } }'
    body = (await client.post("/graphql", headers=h, json={"query": read})).json()
    assert body["data"]["organization"] == {
        "sso": {"defaultRole": "reader"},
        "folderGrants": {"grants": [{"principal": "group:net"}]},
    }, body
    as_reader = (await client.post("/graphql", headers=people["nat"], json={"query": read})).json()
    assert as_reader["errors"][0]["extensions"]["code"] == "forbidden", as_reader
