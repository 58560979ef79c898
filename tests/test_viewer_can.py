"""`viewerCan` (what the caller may do, for the UI's controls) says exactly what the enforcing
code allows: for each role, and for a reader whose group has an operator grant on network/, every
action of the field is attempted for real through GraphQL and must be refused (403 forbidden)
exactly when the field says false. A change to the permission table moves both together; a
field that drifted from the guard fails here. Also: Settings.reach counts the stacks a setting
reaches from a level."""

from __future__ import annotations

from typing import Any

import httpx

from conftest import Tenant
from firstlume.services import accounts
from firstlume.services.access.viewer_actions import ACTIONS
from firstlume.services.context import Context
from support.members import add_member, grant_folder
from support.runs import start

O = "/api/v1/orgs/acme"

# Each action of viewerCan, attempted with arguments that pass the permission check and then end
# without changing anything the other attempts rely on (a missing target, a finished run),
# except startRun, which really starts a plan. {stack} and {run} are the stack and a canceled run.
ATTEMPTS: dict[str, str] = {
    "start_run": 'mutation { r: startRun(org: "acme", stack: "{stack}", type: PLAN) { __typename } }',
    "approve_run": 'mutation { r: approveRun(org: "acme", runId: "{run}") { __typename } }',
    "discard_run": 'mutation { r: discardRun(org: "acme", runId: "{run}") { __typename } }',
    "cancel_run": 'mutation { r: cancelRun(org: "acme", runId: "{run}") { __typename } }',
    "create_stack": 'mutation { r: createStack(org: "acme", input: {slug: "", repository: ""}) { __typename } }',
    "create_folder": 'mutation { r: createFolder(org: "acme", path: "") { __typename } }',
    "update_stack": 'mutation { r: updateStack(org: "acme", stack: "nope", input: {name: "x"}) { __typename } }',
    "delete_stack": 'mutation { r: deleteStack(org: "acme", stack: "nope") { __typename } }',
    "move_folder": 'mutation { r: moveFolder(org: "acme", path: "nope", newPath: "nope2") { __typename } }',
    "delete_folder": 'mutation { r: deleteFolder(org: "acme", path: "nope") { __typename } }',
    "update_settings": 'mutation { r: updateSettings(org: "acme", stack: "nope", input: {requireApproval: true}) { __typename } }',
    "set_variable": 'mutation { r: setVariable(org: "acme", stack: "nope", name: "x", value: "y") { __typename } }',
    "force_unlock": 'mutation { r: forceUnlock(org: "acme", stack: "nope") { __typename } }',
    "set_member": 'mutation { r: setMember(org: "acme", email: "x@example.com", role: "nope") { __typename } }',
    "manage_notifications": 'mutation { r: updateNotification(org: "acme", id: "nope", input: {}) { __typename } }',
    "manage_policies": 'mutation { r: updatePolicy(org: "acme", name: "nope") { __typename } }',
    "set_folder_grants": 'mutation { r: setFolderGrants(org: "acme", path: "nope", grants: []) { __typename } }',
    "set_stack_dependencies": 'mutation { r: setStackDependencies(org: "acme", stack: "nope", dependsOn: []) { __typename } }',
    # Really rotates the organization's webhook secret: nothing here relies on it.
    "rotate_webhook_secret": 'mutation { r: rotateWebhookSecret(org: "acme") { __typename } }',
    "read_state": '{ organization(slug: "acme") { stack(slug: "{stack}") { state { outputs { name } } } } }',
    "read_audit": '{ organization(slug: "acme") { audit(first: 1) { nodes { action } } } }',
}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


FIELDS = " ".join(_camel(name) for name in ACTIONS)


async def _world(client: httpx.AsyncClient, ctx: Context, tenant: Tenant) -> dict[str, dict[str, str]]:
    h = tenant.headers
    for slug, folder in (("vpc", "network"), ("web", "prod")):
        made = await client.post(
            f"{O}/stacks", headers=h, json={"slug": slug, "repository": "file:///r", "folder": folder}
        )
        assert made.status_code == 201, made.text
    people = {"admin": h}
    for name, role, groups in (
        ("rex", "reader", []),
        ("ola", "operator", []),
        ("nat", "reader", ["net"]),  # an operator on network/ through the grant below
    ):
        people[name] = await add_member(client, ctx, h, "acme", f"{name}@example.com", role, groups)
    await grant_folder(client, h, "acme", "network", {"group:net": "operator"})
    return people


async def _canceled_run(client: httpx.AsyncClient, ctx: Context, tenant: Tenant, stack: str) -> str:
    run = await start(ctx, tenant.token, "acme", stack, "plan")
    q = 'mutation { cancelRun(org: "acme", runId: "RUN") { __typename } }'.replace("RUN", run)
    done = (await client.post("/graphql", headers=tenant.headers, json={"query": q})).json()
    assert done["data"]["cancelRun"]["__typename"] == "Run", done
    return run


async def _refused(client: httpx.AsyncClient, headers: dict[str, str], query: str) -> bool:
    body: dict[str, Any] = (await client.post("/graphql", headers=headers, json={"query": query})).json()
    codes = {e.get("extensions", {}).get("code") for e in body.get("errors") or []}
    assert codes <= {"forbidden"}, body  # any other error is a broken attempt, not an answer
    return "forbidden" in codes


async def _viewer_can(client: httpx.AsyncClient, headers: dict[str, str], stack: str) -> dict[str, Any]:
    query = (
        '{ organization(slug: "acme") { viewerCan { role %s } stack(slug: "%s") { viewerCan { role %s } } } }'
    )
    body = (
        await client.post("/graphql", headers=headers, json={"query": query % (FIELDS, stack, FIELDS)})
    ).json()
    assert "errors" not in body, body
    return body["data"]["organization"]  # type: ignore[no-any-return]


async def test_viewer_can_says_exactly_what_attempting_each_action_finds(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    people = await _world(client, ctx, tenant)
    runs = {stack: await _canceled_run(client, ctx, tenant, stack) for stack in ("vpc", "web")}
    assert set(ATTEMPTS) == set(ACTIONS)
    expected_roles = {
        ("admin", "vpc"): "admin",
        ("admin", "web"): "admin",
        ("ola", "vpc"): "operator",
        ("ola", "web"): "operator",
        ("rex", "vpc"): "reader",
        ("rex", "web"): "reader",
        ("nat", "vpc"): "operator",  # raised by the grant on network/
        ("nat", "web"): "reader",
    }
    seen: dict[tuple[str, str], dict[str, bool]] = {}
    for (person, stack), role in expected_roles.items():
        headers = people[person]
        answers = await _viewer_can(client, headers, stack)
        said = answers["stack"]["viewerCan"]
        assert said["role"] == role, (person, stack, said)
        found = {}
        for action, query in ATTEMPTS.items():
            attempt = query.replace("{stack}", stack).replace("{run}", runs[stack])
            found[action] = not await _refused(client, headers, attempt)
            assert said[_camel(action)] == found[action], (person, stack, action, said, found)
        seen[(person, stack)] = found
        # The organization's answer is the organization role's: a stack in no granted folder.
        if stack == "web":
            org_said = {a: answers["viewerCan"][_camel(a)] for a in ACTIONS}
            assert org_said == found, (person, org_said, found)

    # And the answers are those the roles document (so the test above cannot pass by refusing all).
    assert all(seen[("admin", "web")].values())
    assert not any(seen[("rex", "web")].values())
    operator = {a for a, ok in seen[("ola", "web")].items() if ok}
    assert operator == {"start_run", "approve_run", "discard_run", "cancel_run", "read_state"}, operator
    nat_on_vpc = {a for a, ok in seen[("nat", "vpc")].items() if ok}
    # The grant raises the stack-scoped actions; reading state follows the organization role.
    assert nat_on_vpc == {"start_run", "approve_run", "discard_run", "cancel_run"}, nat_on_vpc


async def test_folder_viewer_can_follows_the_grants_reaching_it(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    people = await _world(client, ctx, tenant)
    query = '{ organization(slug: "acme") { viewerCan { role startRun } folder(path: "%s") { viewerCan { role startRun updateSettings } } } }'
    for path, role, may_start in (("network", "operator", True), ("prod", "reader", False)):
        body = (await client.post("/graphql", headers=people["nat"], json={"query": query % path})).json()
        org = body["data"]["organization"]
        assert org["viewerCan"] == {"role": "reader", "startRun": False}, body
        assert org["folder"]["viewerCan"] == {"role": role, "startRun": may_start, "updateSettings": False}, (
            body
        )


async def test_settings_reach_counts_the_stacks_that_take_a_setting_from_a_level(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    h = tenant.headers
    for slug, folder in (("a", "prod"), ("b", "prod/eu"), ("c", "prod/us"), ("d", "dev"), ("e", None)):
        body: dict[str, Any] = {"slug": slug, "repository": "file:///r"}
        if folder:
            body["folder"] = folder
        assert (await client.post(f"{O}/stacks", headers=h, json=body)).status_code == 201
    # prod/us sets its own require_approval; stack b sets its own approvers.
    assert (
        await client.patch(f"{O}/folders/prod/us/settings", headers=h, json={"require_approval": False})
    ).status_code == 200
    assert (
        await client.patch(f"{O}/stacks/b/settings", headers=h, json={"approvers": ["user:ada@example.com"]})
    ).status_code == 200

    query = """{ organization(slug: "acme") { settings { reach { setting stacks } }
      folder(path: "prod") { settings { reach { setting stacks } } }
      stack(slug: "a") { settings { reach { setting stacks } } } } }"""
    org = (await client.post("/graphql", headers=h, json={"query": query})).json()["data"]["organization"]

    def reach(level: dict[str, Any]) -> dict[str, int]:
        return {r["setting"]: r["stacks"] for r in level["settings"]["reach"]}

    assert reach(org)["require_approval"] == 4  # all five but c (prod/us sets it)
    assert reach(org)["approvers"] == 4  # all but b
    assert reach(org["folder"])["require_approval"] == 2  # a and b; c is under prod/us's own
    assert reach(org["folder"])["approvers"] == 2  # a and c
    assert reach(org["folder"])["confirm_destructive"] == 3
    assert set(reach(org["stack"]).values()) == {1}


async def test_the_token_of_the_request_is_marked_current(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    async with ctx.unit() as unit:
        other = await accounts.create_token(unit.session, "acme", tenant.email)
    query = "{ viewer { tokens { id current } } }"
    current = []
    for token in (tenant.token, other):
        headers = {"Authorization": f"Bearer {token}"}
        body = (await client.post("/graphql", headers=headers, json={"query": query})).json()
        tokens = body["data"]["viewer"]["tokens"]
        marked = [t["id"] for t in tokens if t["current"]]
        assert len(tokens) == 2 and len(marked) == 1, body
        current.append(marked[0])
    assert current[0] != current[1]  # each request marks its own token
