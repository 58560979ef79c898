"""The permission table (services/access/permissions.py) is complete and is what the API does:
every REST route and every GraphQL root field, called by a reader, an operator, an admin, a
person of no organization here and another organization's admin, is allowed or refused (403
forbidden naming the role; 404 for outsiders, as if the organization did not exist) exactly as
the table says. A route or field missing from the table fails here, by name."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from graphql import GraphQLObjectType, build_schema
from starlette.routing import Route

from conftest import Tenant, make_stack, make_tenant
from firstlume.api.graphql.schema import schema
from firstlume.api.rest.guard import UnlistedRoutes, guard, unlisted
from firstlume.app import create_app
from firstlume.services import accounts
from firstlume.services.access import folder_grants, members
from firstlume.services.access.commands import PutMember
from firstlume.services.access.permissions import (
    FORCE_UNLOCK,
    GRAPHQL,
    REST,
    ROOT_TYPES,
    STACK_SCOPED_GRAPHQL,
    STACK_SCOPED_REST,
    Need,
    Open,
)
from firstlume.services.access.roles import Role
from firstlume.services.context import Context
from firstlume.settings import Settings
from support.runs import start

ORG = "acme"
LOCK = json.dumps({"ID": "lock-1", "Operation": "OperationTypeApply", "Who": "t@h", "Version": "1.9.0"})
STATE = json.dumps(
    {
        "version": 4,
        "serial": 1,
        "lineage": "l-1",
        "terraform_version": "1.9.0",
        "resources": [],
        "outputs": {},
    }
)


@dataclass
class Caller:
    name: str
    headers: dict[str, str]
    role: Role | None  # None: not a member of acme
    # The role a folder grant gives on the world's stack (in prod/), above the organization role.
    granted: Role | None = None


async def callers(ctx: Context, tenant: Tenant) -> list[Caller]:
    """A person of no organization here, another organization's admin, then acme's reader,
    operator and admin (the tenant): refusals first, so that what the allowed ones change
    (a lock taken, a run canceled) never turns a refusal into something else."""
    other_admin = await make_tenant(ctx, "globex", "gus@globex.example")
    loner = await make_tenant(ctx, "initech", "nina@initech.example")
    made = []
    async with ctx.unit() as unit:
        for email, role in (("rea@example.com", Role.READER), ("ole@example.com", Role.OPERATOR)):
            made.append((await accounts.create_token(unit.session, ORG, email, role=role), role))
    granted = await _granted_readers(ctx, tenant)
    return [
        Caller("non-member", loner.headers, None),
        Caller("other org's admin", other_admin.headers, None),
        Caller("reader", {"Authorization": f"Bearer {made[0][0]}"}, Role.READER),
        # Readers of the organization with folder grants: one an operator of prod/ (the world's
        # stack's folder) through group:net, one an operator of another folder only.
        Caller("reader, operator of prod/ by group:net", granted[0], Role.READER, granted=Role.OPERATOR),
        Caller("reader, operator of network/ only", granted[1], Role.READER),
        Caller("operator", {"Authorization": f"Bearer {made[1][0]}"}, Role.OPERATOR),
        Caller("admin", tenant.headers, Role.ADMIN),
    ]


async def world(ctx: Context, tenant: Tenant) -> dict[str, str]:
    await make_stack(ctx, tenant, {"slug": "web", "repository": "file:///r", "folder": "prod"})
    run_id = await start(ctx, tenant.token, ORG, "web", "plan")
    return {"org": ORG, "stack": "web", "folder": "prod", "name": "region", "run": run_id, "unit": "mod",
            "serial": "1", "email": "temp@example.com", "token": "no-such-token",
            "id": "00000000-0000-0000-0000-000000000000", "host": "github.com"}  # fmt: skip


async def _granted_readers(ctx: Context, tenant: Tenant) -> list[dict[str, str]]:
    await make_stack(ctx, tenant, {"slug": "dns", "repository": "file:///r", "folder": "network"})
    headers = []
    async with ctx.unit() as unit:
        org = await accounts.org_for(
            unit.session, await accounts.authenticate(unit.session, tenant.token), ORG
        )
        for email in ("nat@example.com", "elsa@example.com"):
            token = await accounts.create_token(unit.session, ORG, email, role=Role.READER)
            headers.append({"Authorization": f"Bearer {token}"})
        await members.put_member(
            unit.session, org, "nat@example.com", PutMember(role=Role.READER, groups=["net"])
        )
        await folder_grants.put_grants(unit.session, org, "prod", {"grants": {"group:net": "operator"}})
        await folder_grants.put_grants(
            unit.session, org, "network", {"grants": {"user:elsa@example.com": "operator"}}
        )
    return headers


def expected_for(need: Need, caller: Caller, key: str = "") -> str:
    """What the table says for `caller`; on the stack-scoped routes and fields (starting and
    deciding on the world's run), a folder grant raises the caller's role."""
    if not isinstance(need, Role):
        return "allowed"
    if caller.role is None:
        return "not_found"
    role = caller.role
    if key in STACK_SCOPED_REST | STACK_SCOPED_GRAPHQL and caller.granted is not None:
        role = max(role, caller.granted, key=lambda r: r.rank)
    return "allowed" if role.allows(need) else "forbidden"


def outcome(status: int, body: Any) -> str:
    error = body.get("error") if isinstance(body, dict) else None
    if status == 403 and error and error.get("code") == "forbidden":
        return "forbidden"
    if status == 404 and error and error["message"] == f"No organization '{ORG}'.":
        return "not_found"
    if status in (401, 403, 500):
        return f"refused {status} {error}"
    return "allowed"


BODIES = {
    "create_stack": lambda n: {"slug": f"s-{n}", "repository": "file:///x"},
    "create_folder": lambda n: {"path": f"f-{n}"},
    "patch_settings": lambda n: {"require_approval": True},
    "put_variable": lambda n: {"value": "eu"},
    "start_run": lambda n: {"type": "plan"},
    "members.put": lambda n: {"role": "reader", "groups": ["sre"]},
    "tokens.create": lambda n: {"name": f"t-{n}"},
    "state.write": lambda n: STATE,
    "state.lock": lambda n: LOCK,
    "state.unlock": lambda n: LOCK,
    "stacks.update": lambda n: {"trigger": "plan"},
    "git.hosts.put": lambda n: {"kind": "github", "api_url": "https://api.github.com", "token": f"t-{n}"},
    "tfe.create_workspace": lambda n: {"data": {"type": "workspaces", "attributes": {"name": f"w-{n}"}}},
    "notifications.create": lambda n: {
        "name": f"n-{n}",
        "url": "http://127.0.0.1:9/x",
        "events": ["run.applied"],
    },
    "notifications.update": lambda n: {"name": f"n-{n}"},
    "dependencies.put": lambda n: {"depends_on": []},
    "policies.create": lambda n: {
        "name": f"p-{n}",
        "kind": "plan",
        "rego": 'package p\ndeny contains "x" if { false }\n',
    },
    "policies.update": lambda n: {"description": f"d-{n}"},
}
NOT_IN_ORGANIZATIONS = {Open.PUBLIC, Open.EXECUTOR, Open.SIGNED_IN}


def concrete(path: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)(:\w+)?\}", lambda m: values[m.group(1)], path)


def test_every_route_and_graphql_field_is_in_the_table(settings: Settings) -> None:
    app = create_app(settings)
    assert unlisted(app.routes) == [], "add these routes to services/access/permissions.py REST"
    names = {getattr(r, "name", None) for r in app.routes}
    assert sorted(set(REST) - names) == [], "the table lists routes that do not exist"
    served = build_schema(schema.as_str())
    graphql_fields = {
        f"{root}.{name}"
        for root in ROOT_TYPES
        for name in (
            served.get_type(root).fields if isinstance(served.get_type(root), GraphQLObjectType) else {}
        )  # type: ignore[union-attr]
    }
    assert sorted(graphql_fields - set(GRAPHQL)) == [], "add these GraphQL fields to the table"
    # A route the table does not know stops the app from being built, naming it.
    with pytest.raises(UnlistedRoutes, match="brand_new"):
        guard([Route("/api/v1/new", lambda r: None, name="brand_new")])


async def test_every_rest_route_allows_and_refuses_as_the_table_says(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, settings: Settings
) -> None:
    values = await world(ctx, tenant)
    people = await callers(ctx, tenant)
    app = create_app(settings)
    checked, wrong = 0, []
    for n, route in enumerate(r for r in app.routes if isinstance(r, Route)):
        need = REST[route.name]
        if need in NOT_IN_ORGANIZATIONS:
            continue
        if route.name.startswith("tfe.") and "{org}" not in route.path:
            # The HCP Terraform API's routes by id authenticate in the id's organization:
            # tests/test_cli_configuration_upload.py checks them.
            continue
        path = concrete(route.path, values)
        for method in sorted((route.methods or set()) - {"HEAD"}):
            cases = [(need, BODIES.get(route.name, lambda _: {})(n))]
            if route.name == "state.unlock":
                cases.append((FORCE_UNLOCK, ""))  # an UNLOCK without a body is a force-unlock
            for case_need, body in cases:
                for caller in people:
                    content = body if isinstance(body, str) else json.dumps(body)
                    response = await client.request(method, path, headers=caller.headers, content=content)
                    try:
                        got = outcome(response.status_code, response.json())
                    except ValueError:
                        got = outcome(response.status_code, None)
                    want = expected_for(case_need, caller, route.name)
                    checked += 1
                    if got != want:
                        wrong.append(
                            f"{method} {route.path} ({route.name}) by {caller.name}: {got}, expected {want}: {response.text[:200]}"
                        )
                    if want == "forbidden":
                        assert response.json()["error"]["needed"] == case_need.value  # type: ignore[union-attr]
    assert wrong == [], "\n".join(wrong)
    assert checked >= 7 * 55  # every org route (root and unit state routes), each method and case


MUTATIONS = {
    "startRun": 'startRun(org: "acme", stack: "web", type: PLAN)',
    "approveRun": 'approveRun(org: "acme", runId: "$run")',
    "discardRun": 'discardRun(org: "acme", runId: "$run")',
    "cancelRun": 'cancelRun(org: "acme", runId: "$run")',
    "createFolder": 'createFolder(org: "acme", path: "g-$n")',
    "createStack": 'createStack(org: "acme", input: {slug: "g-$n", repository: "file:///x"})',
    "updateSettings": 'updateSettings(org: "acme", input: {requireApproval: true})',
    "setVariable": 'setVariable(org: "acme", name: "gv", value: "1")',
    "deleteVariable": 'deleteVariable(org: "acme", name: "gv")',
    "forceUnlock": 'forceUnlock(org: "acme", stack: "web")',
    "setMember": 'setMember(org: "acme", email: "temp2@example.com", role: "reader")',
    "removeMember": 'removeMember(org: "acme", email: "temp2@example.com")',
    "createToken": 'createToken(org: "acme", name: "g-$n")',
    "revokeToken": 'revokeToken(org: "acme", id: "no-such-token")',
    "updateStack": 'updateStack(org: "acme", stack: "web", input: {trigger: PLAN})',
    "rotateWebhookSecret": 'rotateWebhookSecret(org: "acme")',
    "putGitHost": 'putGitHost(org: "acme", host: "github.com", input: {kind: GITHUB, apiUrl: "https://api.github.com", token: "t-$n"})',
    "createNotification": 'createNotification(org: "acme", input: {name: "g-$n", url: "http://127.0.0.1:9/x", events: ["run.applied"]})',
    "updateNotification": 'updateNotification(org: "acme", id: "00000000-0000-0000-0000-000000000000", input: {name: "x"})',
    "deleteNotification": 'deleteNotification(org: "acme", id: "00000000-0000-0000-0000-000000000000")',
    "testNotification": 'testNotification(org: "acme", id: "00000000-0000-0000-0000-000000000000")',
    "createPolicy": 'createPolicy(org: "acme", name: "g-$n", kind: "plan", rego: "package p\\nwarn contains 1 if { false }")',
    "updatePolicy": 'updatePolicy(org: "acme", name: "no-such-policy", description: "d")',
    "deletePolicy": 'deletePolicy(org: "acme", name: "no-such-policy")',
    # Refused before anything is evaluated (no such policy): no worker process starts.
    "testPolicy": 'testPolicy(org: "acme", name: "no-such-policy", input: {})',
    # Refused by what they find (a queued run, no such folder): nothing of the world goes.
    "deleteStack": 'deleteStack(org: "acme", stack: "web")',
    "moveFolder": 'moveFolder(org: "acme", path: "no-such-folder", newPath: "g-$n")',
    "deleteFolder": 'deleteFolder(org: "acme", path: "no-such-folder")',
    "setStackDependencies": 'setStackDependencies(org: "acme", stack: "web", dependsOn: [])',
    "updateSso": 'updateSso(org: "acme", groups: [{idpGroup: "g-$n", role: "reader"}])',
    "setFolderGrants": 'setFolderGrants(org: "acme", path: "prod", grants: [{principal: "group:net", role: "operator"}])',
}
QUERIES = {
    "viewer": "viewer { email }",
    "organizations": "organizations { slug }",
    "organization": 'organization(slug: "acme") { slug members { email role } viewerRole }',
}
SUBSCRIPTIONS = {
    "runLog": 'runLog(org: "acme", runId: "$run") { text }',
    "runUpdated": 'runUpdated(org: "acme", runId: "$run") { id }',
    "resourceStates": 'resourceStates(org: "acme", runId: "$run") { address }',
    "activeRuns": 'activeRuns(org: "acme") { id }',
    "gitDeliveries": 'gitDeliveries(org: "acme") { id }',
}


def test_every_graphql_root_field_has_a_sample_here() -> None:
    samples = (
        {f"Mutation.{k}" for k in MUTATIONS}
        | {f"Query.{k}" for k in QUERIES}
        | {f"Subscription.{k}" for k in SUBSCRIPTIONS}
    )
    assert sorted(k for k in GRAPHQL if k.split(".")[0] in ROOT_TYPES) == sorted(samples)


async def test_every_graphql_query_and_mutation_allows_and_refuses_as_the_table_says(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    values = await world(ctx, tenant)
    people = await callers(ctx, tenant)
    wrong = []
    for n, (field, call) in enumerate(
        [
            *(("Query." + k, v) for k, v in QUERIES.items()),
            *(("Mutation." + k, v) for k, v in MUTATIONS.items()),
        ]
    ):
        need = GRAPHQL[field]
        text = call.replace("$run", values["run"]).replace("$n", str(n))
        query = (
            "{ " + text + " }"
            if field.startswith("Query.")
            else "mutation { " + text + " { __typename ... on Error { code message } } }"
        )
        for caller in people:
            body = (await client.post("/graphql", headers=caller.headers, json={"query": query})).json()
            errors = body.get("errors") or []
            result = (body.get("data") or {}).get(field.split(".")[1])
            if errors:
                got = errors[0]["extensions"].get("code", "?")
            elif (
                isinstance(result, dict)
                and result.get("__typename") == "NotFoundError"
                and "No organization" in result["message"]
            ):
                got = "not_found"
            else:
                got = "allowed"
            want = expected_for(need, caller, field)
            if field == "Query.organization" and caller.role is None:
                want, got = "null", "null" if result is None else "visible"
            if got != want:
                wrong.append(f"{field} by {caller.name}: {got}, expected {want}: {body}")
    assert wrong == [], "\n".join(wrong)


SPEC = {
    # platform-api.md §5 and the managed state routes, written out independently of the table.
    Role.READER: ["dependencies.get", "dependencies.graph", "git.deliveries", "drift.overview", "drift.stack", "list_stacks", "get_stack", "list_folders", "get_settings", "list_variables", "list_stack_runs",
                  "list_org_runs", "get_run", "get_changes", "logs", "state.lock_status", "state.versions",
                  "members.list", "tokens.list", "tokens.create", "tokens.revoke", "Subscription.runLog",
                  "Subscription.runUpdated", "Subscription.resourceStates", "Subscription.activeRuns",
                  "Subscription.gitDeliveries",
                  "Mutation.createToken", "Mutation.revokeToken", "policies.list", "policies.get"],
    Role.OPERATOR: ["start_run", "approve", "discard", "cancel", "state.read", "state.write", "state.lock",
                    "state.unlock", "state.version", "state.outputs", "Mutation.startRun", "Mutation.approveRun",
                    "Mutation.discardRun", "Mutation.cancelRun", "StackState.outputs"],
    Role.ADMIN: ["create_stack", "create_folder", "patch_settings", "put_variable", "delete_variable",
                 "state.delete", "state.force_unlock", "members.put", "members.delete", "Mutation.createFolder",
                 "Mutation.createStack", "Mutation.updateSettings", "Mutation.setVariable", "Mutation.deleteVariable",
                 "Mutation.forceUnlock", "Mutation.setMember", "Mutation.removeMember",
                 "git.rotate_secret", "stacks.update", "Mutation.updateStack", "Mutation.rotateWebhookSecret",
                 *(f"notifications.{n}" for n in ("list", "create", "get", "update", "delete", "deliveries", "test")),
                 "Mutation.createNotification", "Mutation.updateNotification", "Mutation.deleteNotification",
                 "Mutation.testNotification", "Organization.notifications", "audit.list", "Organization.audit",
                 "stacks.delete", "folders.update", "folders.delete", "Mutation.deleteStack", "Mutation.moveFolder",
                 "Mutation.deleteFolder", "dependencies.put", "Mutation.setStackDependencies",
                 *(f"policies.{n}" for n in ("create", "update", "delete", "test")),
                 *(f"Mutation.{n}Policy" for n in ("create", "update", "delete", "test")),
                 "sso.get", "sso.put", "folder_grants.get", "folder_grants.put",
                 "Mutation.updateSso", "Mutation.setFolderGrants", "Organization.sso", "Organization.folderGrants",
                 *(f"deleted_stacks.{n}" for n in ("list", "get", "runs", "state_versions", "state_version"))],
}  # fmt: skip


def test_the_table_says_what_the_contract_says() -> None:
    table = {**REST, **GRAPHQL}
    assert {name: table[name] for names in SPEC.values() for name in names} == {
        name: role for role, names in SPEC.items() for name in names
    }
    assert FORCE_UNLOCK == Role.ADMIN
    assert all(table[f"executor.{n}"] == Open.EXECUTOR for n in ("spec", "finish", "logs", "upload_plan"))
    assert REST["list_orgs"] == Open.SIGNED_IN and GRAPHQL["Query.organization"] == Open.SIGNED_IN


def test_the_documented_permission_table_is_the_code_s() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "rest-api.md").read_text()
    for name, need in REST.items():
        assert re.search(rf"^\| `{re.escape(name)}` \| [^|]+ \| {need.value} \|$", doc, re.M), name
    for key, need in GRAPHQL.items():
        assert f"| `{key}` | {need.value} |" in doc, key


async def test_state_outputs_in_graphql_need_the_operator_role(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    await world(ctx, tenant)
    people = {c.name: c for c in await callers(ctx, tenant)}
    query = '{ organization(slug: "acme") { stack(slug: "web") { state { serial lock { holder } outputs { name } } } } }'
    for name, want in [("reader", "forbidden"), ("operator", None), ("admin", None)]:
        body = (await client.post("/graphql", headers=people[name].headers, json={"query": query})).json()
        codes = [e["extensions"]["code"] for e in body.get("errors") or []]
        assert codes == ([want] if want else []), (name, body)
        if want:
            assert "outputs" in body["errors"][0]["path"]
            # The refusal nulls the outputs alone: the stack and the rest of its state stay.
            assert body["data"]["organization"]["stack"]["state"] == {
                "serial": None,
                "lock": None,
                "outputs": None,
            }
    # Without the outputs, a reader sees the state's serial and lock.
    safe = '{ organization(slug: "acme") { stack(slug: "web") { state { serial lock { holder } } } } }'
    body = (await client.post("/graphql", headers=people["reader"].headers, json={"query": safe})).json()
    assert not body.get("errors") and body["data"]["organization"]["stack"]["state"] == {
        "serial": None,
        "lock": None,
    }
