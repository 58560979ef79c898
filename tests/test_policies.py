"""Policies as code (adoption-api.md section 8), without evaluating any (evaluation starts a worker
process: tests/e2e/test_policies_*.py): the admins' CRUD over REST and GraphQL, each change
audited; a module that does not compile refused with 422 and its line and column; the inherited
`policies` setting with origins; what a policy's rules mean for a run; the masked plan."""

from __future__ import annotations

import json

import httpx

from conftest import Tenant, make_stack, make_tenant
from firstlume.domain.changes import SENSITIVE, scrubbed_plan
from firstlume.domain.policies import (
    CheckResult,
    PolicyKind,
    approval_rules,
    check_of,
    denial,
)
from firstlume.services import accounts
from firstlume.services.access.roles import Role
from firstlume.services.context import Context
from test_graphql_api import gql

O = "/api/v1/orgs/acme"
DENY = 'package firstlume.protect\n\ndeny contains msg if {\n  some rc in input.plan.resource_changes\n  "delete" in rc.change.actions\n  msg := rc.address\n}\n'  # fmt: skip


async def test_admins_create_read_change_and_delete_policies_each_change_audited(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    h = tenant.headers
    created = await client.post(
        f"{O}/policies",
        headers=h,
        json={"name": "protect", "kind": "plan", "rego": DENY, "description": "No deletes"},
    )
    assert created.status_code == 201, created.text
    body = created.json()
    assert {k: body[k] for k in ("name", "kind", "description", "rego")} == {
        "name": "protect",
        "kind": "plan",
        "description": "No deletes",
        "rego": DENY,
    }
    twice = await client.post(
        f"{O}/policies", headers=h, json={"name": "protect", "kind": "plan", "rego": DENY}
    )
    assert twice.status_code == 409 and twice.json()["error"]["code"] == "already_exists"

    listed = (await client.get(f"{O}/policies", headers=h)).json()["policies"]
    assert [p["name"] for p in listed] == ["protect"]
    changed = await client.put(f"{O}/policies/protect", headers=h, json={"description": "Never delete"})
    assert changed.status_code == 200 and changed.json()["description"] == "Never delete"
    assert (await client.get(f"{O}/policies/protect", headers=h)).json()["description"] == "Never delete"

    # Readers read policies (why a run failed); only admins change them.
    async with ctx.unit() as unit:
        reader = await accounts.create_token(unit.session, "acme", "rea@example.com", role=Role.READER)
    rh = {"Authorization": f"Bearer {reader}"}
    assert (await client.get(f"{O}/policies/protect", headers=rh)).status_code == 200
    refused = await client.put(f"{O}/policies/protect", headers=rh, json={"description": "x"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"

    # Another organization sees none of it.
    globex = await make_tenant(ctx, "globex", "gus@globex.example")
    other = await client.get("/api/v1/orgs/globex/policies/protect", headers=globex.headers)
    assert other.status_code == 404

    assert (await client.delete(f"{O}/policies/protect", headers=h)).status_code == 204
    assert (await client.get(f"{O}/policies/protect", headers=h)).status_code == 404
    assert (await client.delete(f"{O}/policies/protect", headers=h)).status_code == 404

    audit = (await client.get(f"{O}/audit", headers=h, params={"limit": 50})).json()["entries"]
    trail = [(e["action"], e["target"], e["details"]) for e in audit if e["action"].startswith("policy.")]
    assert sorted(trail, key=lambda t: t[0]) == [
        ("policy.create", "policy:protect", {"name": "protect", "kind": "plan"}),
        ("policy.delete", "policy:protect", {"name": "protect"}),
        ("policy.update", "policy:protect", {"name": "protect", "changed": ["description"]}),
    ]


async def test_a_module_that_does_not_compile_is_refused_with_its_line_and_column(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    h = tenant.headers
    cases = [
        ("package p\n\ndeny contains msg if {\n  msg := input.a +\n}\n", 4, 7),
        ('package p\n\ndeny contains msg if {\n  nosuch(1)\n  msg := "x"\n}\n', 4, 3),
    ]
    for rego, line, column in cases:
        refused = await client.post(
            f"{O}/policies", headers=h, json={"name": "bad", "kind": "plan", "rego": rego}
        )
        assert refused.status_code == 422, refused.text
        error = refused.json()["error"]
        assert error["code"] == "policy_compile_error" and error["field"] == "rego"
        assert (error["line"], error["column"]) == (line, column), error
        assert f"line {line}, column {column}" in error["message"]
    # A plan policy with neither deny nor warn, and an unknown kind: refused too.
    empty = await client.post(
        f"{O}/policies", headers=h, json={"name": "bad", "kind": "plan", "rego": "package p\n\nx := 1\n"}
    )
    assert empty.status_code == 422 and "deny or warn" in empty.json()["error"]["message"]
    kind = await client.post(
        f"{O}/policies", headers=h, json={"name": "bad", "kind": "sentinel", "rego": DENY}
    )
    assert kind.status_code == 422 and kind.json()["error"]["field"] == "kind"
    # Nothing was written, and a good module's update to a broken one leaves it as it was.
    assert (await client.get(f"{O}/policies", headers=h)).json()["policies"] == []
    assert (
        await client.post(f"{O}/policies", headers=h, json={"name": "ok", "kind": "plan", "rego": DENY})
    ).status_code == 201
    broken = await client.put(f"{O}/policies/ok", headers=h, json={"rego": "package p\ndeny contains"})
    assert broken.status_code == 422 and broken.json()["error"]["line"] == 2
    assert (await client.get(f"{O}/policies/ok", headers=h)).json()["rego"] == DENY

    # GraphQL: the same refusal as data, with the line and column.
    body = await gql(
        client,
        tenant,
        'mutation($rego: String!) { createPolicy(org: "acme", name: "g", kind: "plan", rego: $rego) {'
        " __typename ... on RegoCompileError { code line column } ... on Policy { name } } }",
        rego=cases[0][0],
    )
    assert body["data"]["createPolicy"] == {
        "__typename": "RegoCompileError",
        "code": "policy_compile_error",
        "line": 4,
        "column": 7,
    }


async def test_graphql_creates_lists_changes_and_deletes_policies(
    client: httpx.AsyncClient, tenant: Tenant
) -> None:
    created = await gql(
        client,
        tenant,
        'mutation($rego: String!) { createPolicy(org: "acme", name: "dba", kind: "approval", rego: $rego) {'
        " __typename ... on Policy { name kind } } }",
        rego='package dba\n\napprovals_required := 2\n\napprovers contains "group:dba"\n',
    )
    assert created["data"]["createPolicy"] == {"__typename": "Policy", "name": "dba", "kind": "approval"}
    updated = await gql(
        client,
        tenant,
        'mutation { updatePolicy(org: "acme", name: "dba", description: "Two DBAs") { __typename ... on Policy { description } } }',
    )
    assert updated["data"]["updatePolicy"] == {"__typename": "Policy", "description": "Two DBAs"}
    listed = await gql(client, tenant, '{ organization(slug: "acme") { policies { name description } } }')
    assert listed["data"]["organization"]["policies"] == [{"name": "dba", "description": "Two DBAs"}]
    deleted = await gql(
        client,
        tenant,
        'mutation { deletePolicy(org: "acme", name: "dba") { __typename ... on DeletedPolicy { name } } }',
    )
    assert deleted["data"]["deletePolicy"] == {"__typename": "DeletedPolicy", "name": "dba"}


async def test_the_policies_setting_is_inherited_with_origins_and_names_existing_policies(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    h = tenant.headers
    for name in ("base", "prod-only"):
        assert (
            await client.post(f"{O}/policies", headers=h, json={"name": name, "kind": "plan", "rego": DENY})
        ).status_code == 201
    assert (await client.post(f"{O}/folders", headers=h, json={"path": "prod"})).status_code == 201
    await make_stack(ctx, tenant, {"slug": "web", "repository": "file:///r", "folder": "prod"})
    await make_stack(ctx, tenant, {"slug": "lab", "repository": "file:///r"})

    fresh = (await client.get(f"{O}/stacks/web/settings", headers=h)).json()
    assert fresh["effective"]["policies"] == {"value": None, "origin": "default"}
    assert (await client.patch(f"{O}/settings", headers=h, json={"policies": ["base"]})).status_code == 200
    patched = await client.patch(
        f"{O}/folders/prod/settings", headers=h, json={"policies": ["base", "prod-only"]}
    )
    assert patched.status_code == 200, patched.text
    web = (await client.get(f"{O}/stacks/web/settings", headers=h)).json()
    assert web["effective"]["policies"] == {"value": ["base", "prod-only"], "origin": "folder:prod"}
    lab = (await client.get(f"{O}/stacks/lab/settings", headers=h)).json()
    assert lab["effective"]["policies"] == {"value": ["base"], "origin": "organization"}

    # An empty list at the stack turns them off there; null inherits again.
    assert (
        await client.patch(f"{O}/stacks/web/settings", headers=h, json={"policies": []})
    ).status_code == 200
    web = (await client.get(f"{O}/stacks/web/settings", headers=h)).json()
    assert web["effective"]["policies"] == {"value": [], "origin": "stack"}
    view = await gql(
        client,
        tenant,
        '{ organization(slug: "acme") { stack(slug: "web") { settings { explicit { policies }'
        " effective { policies { value origin } } } } } }",
    )
    assert view["data"]["organization"]["stack"]["settings"] == {
        "explicit": {"policies": []},
        "effective": {"policies": {"value": [], "origin": "stack"}},
    }
    assert (
        await client.patch(f"{O}/stacks/web/settings", headers=h, json={"policies": None})
    ).status_code == 200
    web = (await client.get(f"{O}/stacks/web/settings", headers=h)).json()
    assert web["effective"]["policies"]["origin"] == "folder:prod"

    unknown = await client.patch(f"{O}/settings", headers=h, json={"policies": ["base", "nosuch"]})
    assert unknown.status_code == 422 and unknown.json()["error"]["field"] == "policies"
    assert "nosuch" in unknown.json()["error"]["message"]
    wrong = await client.patch(f"{O}/settings", headers=h, json={"policies": "base"})
    assert wrong.status_code == 422 and wrong.json()["error"]["field"] == "policies"


def test_rules_become_checks_and_approval_rules() -> None:
    plan = PolicyKind.PLAN
    assert check_of("p", plan, {}, 3).result is CheckResult.PASS
    warned = check_of("p", plan, {"warn": ["b", "a", "a"]}, 3)
    assert (warned.result, warned.messages) == (CheckResult.WARN, ("a", "b"))
    denied = check_of("p", plan, {"deny": ["no"], "warn": ["w"]}, 3)
    assert denied.result is CheckResult.DENY and denied.messages == ("no",)
    assert denial([denied, warned]) == "policy p: no"
    assert denial([warned]) is None

    approval = PolicyKind.APPROVAL
    two = check_of("dba", approval, {"approvals_required": 2, "approvers": ["group:dba"]}, 1)
    one = check_of("sec", approval, {"approvers": ["user:Sec@Example.com"]}, 1)
    none = check_of("quiet", approval, {"approvals_required": 0}, 1)
    assert two.messages == ("2 approvals from group:dba",) and one.approvals_required == 1
    assert none.approvals_required is None and none.messages == ()
    rules = approval_rules([two, one, none])
    assert (rules.approvals_required, rules.approvers) == (2, ("group:dba", "user:sec@example.com"))
    bad = check_of("x", approval, {"approvals_required": "two"}, 1)
    assert bad.result is CheckResult.DENY and "whole number" in bad.messages[0]
    bad = check_of("x", approval, {"approvers": ["dba"]}, 1)
    assert bad.result is CheckResult.DENY and "user:<email>" in bad.messages[0]


def test_the_plan_policies_see_has_every_sensitive_value_masked() -> None:
    secret = "s3cr3t-value-42"
    plan = {
        "format_version": "1.2",
        "variables": {"password": {"value": secret}, "region": {"value": "eu-west-1"}},
        "configuration": {"root_module": {"variables": {"password": {"sensitive": True}, "region": {}}}},
        "resource_changes": [
            {
                "address": "terraform_data.a",
                "type": "terraform_data",
                "change": {
                    "actions": ["update"],
                    "before": {"input": {"pw": secret, "n": 1}, "output": secret},
                    "after": {"input": {"pw": secret, "n": 2}, "output": None},
                    "before_sensitive": {"input": {"pw": True}},
                    "after_sensitive": {"input": {"pw": True}},
                    "after_unknown": {"output": True},
                },
            }
        ],
        "output_changes": {
            "pw": {"actions": ["create"], "before": None, "after": secret, "after_sensitive": True}
        },
        "prior_state": {
            "values": {"root_module": {"resources": [{"values": {"conn": f"user:{secret}@db"}}]}}
        },
        "planned_values": {"root_module": {"resources": [{"values": {"other": "held by Firstlume"}}]}},
    }
    shown = scrubbed_plan(plan, ["held by Firstlume"])
    text = json.dumps(shown)
    assert secret not in text and "held by Firstlume" not in text
    change = shown["resource_changes"][0]["change"]
    assert change["after"]["input"] == {"pw": SENSITIVE, "n": 2}
    assert change["before"]["output"] == SENSITIVE  # unmarked, but equal to a marked value
    assert shown["variables"] == {"password": {"value": SENSITIVE}, "region": {"value": "eu-west-1"}}
    assert shown["output_changes"]["pw"]["after"] == SENSITIVE
    assert change["actions"] == ["update"] and shown["format_version"] == "1.2"
