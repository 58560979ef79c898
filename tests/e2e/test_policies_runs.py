"""Policies evaluated at the end of a plan, driven through the executor's real finish use case
(services/phases.py, which evaluates policies in the worker process before it locks the run):
approval policies that ask for two approvals from group:dba, results over REST and GraphQL, the
input's masking of sensitive values, and a policy's test against an input or a past run."""

from __future__ import annotations

import json
from typing import Any

import httpx

from conftest import Tenant, make_stack
from firstlume.services import accounts, dispatch, phases
from firstlume.services.context import Context
from support.runs import report, start, status_of
from test_graphql_api import gql, synthetic_plan

O = "/api/v1/orgs/acme"
DBA_DELETES = """package firstlume.dba

deleting if {
  some rc in input.plan.resource_changes
  "delete" in rc.change.actions
}

approvals_required := 2 if deleting

approvers contains "group:dba" if deleting
"""
WATCH = """package firstlume.watch

warn contains msg if {
  some group in input.changes.groups
  some change in group.changes
  msg := sprintf("%s: %s (run %s by %s)", [group.action, change.address, input.run.type, input.run.created_by])
}
"""
# Denies if any string anywhere in the input holds the secret: the input must never hold it.
LEAK = """package firstlume.leak

deny contains "the input holds a secret" if {
  walk(input, [_, value])
  is_string(value)
  contains(value, "hunter2-secret")
}
"""


async def _token(
    ctx: Context, email: str, role: str, groups: list[str], client: httpx.AsyncClient, h: Any
) -> dict[str, str]:
    put = await client.put(f"{O}/members/{email}", headers=h, json={"role": role, "groups": groups})
    assert put.status_code == 200, put.text
    async with ctx.unit() as unit:
        token = await accounts.create_token(unit.session, "acme", email)
    return {"Authorization": f"Bearer {token}"}


async def _policy(client: httpx.AsyncClient, tenant: Tenant, name: str, kind: str, rego: str) -> None:
    created = await client.post(
        f"{O}/policies", headers=tenant.headers, json={"name": name, "kind": kind, "rego": rego}
    )
    assert created.status_code == 201, created.text


async def finish_plans(
    ctx: Context, plan_json: dict[str, Any], variables: list[dict[str, Any]] | None = None
) -> dict[str, str]:
    """Claims every startable plan, uploads `plan_json` and finishes it through the same use case
    the executor's HTTP route calls (policies included)."""
    results = {}
    for launch in await dispatch.claim_plans(ctx):
        body = {"plan_file_b64": "cGxhbg==", "plan_json": plan_json, "variables": variables or []}
        await report(ctx, launch.token, "plan", body)

        async def finished() -> dict[str, Any]:
            return {"status": "succeeded"}

        answer = await phases.finish(ctx, launch.token, finished())
        results[launch.run_id] = str(answer.status)
    return results


async def test_two_approvals_from_dba_each_audited_and_outsiders_refused(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    h = tenant.headers
    await make_stack(ctx, tenant, {"slug": "db", "repository": "file:///r"})
    await _policy(client, tenant, "dba", "approval", DBA_DELETES)
    assert (
        await client.patch(f"{O}/stacks/db/settings", headers=h, json={"policies": ["dba"]})
    ).status_code == 200
    bob = await _token(ctx, "bob@example.com", "operator", ["sre"], client, h)
    dee = await _token(ctx, "dee@example.com", "operator", ["dba"], client, h)
    dan = await _token(ctx, "dan@example.com", "operator", ["dba"], client, h)

    # Nothing deleted: the policy asks for nothing, one approval by anyone as usual.
    quiet = await start(ctx, tenant.token, "acme", "db", "apply")
    assert await finish_plans(ctx, synthetic_plan(creates=1)) == {quiet: "awaiting_approval"}
    run = (await client.get(f"{O}/runs/{quiet}", headers=h)).json()
    assert run["approval"]["approvals_required"] == 1 and run["approval"]["approvals_progress"] is None
    assert run["policy_checks"] == [
        {"policy": "dba", "kind": "approval", "result": "pass", "messages": [], "took_ms": run["policy_checks"][0]["took_ms"],
         "approvals_required": None, "approvers": None}
    ]  # fmt: skip
    assert (await client.post(f"{O}/runs/{quiet}/discard", headers=bob)).status_code == 200

    run_id = await start(ctx, tenant.token, "acme", "db", "apply")
    assert await finish_plans(ctx, synthetic_plan(creates=1, deletes=1)) == {run_id: "awaiting_approval"}
    run = (await client.get(f"{O}/runs/{run_id}", headers=h)).json()
    assert run["policy_checks"][0]["messages"] == ["2 approvals from group:dba"]
    assert run["approval"]["approvals_required"] == 2
    assert run["approval"]["policy_approvers"] == ["group:dba"]

    # An operator outside the group, and the admin outside it: 403 not_an_approver, unchanged.
    for outsider in (bob, h):
        refused = await client.post(f"{O}/runs/{run_id}/approve", headers=outsider, json={"acknowledged": []})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_an_approver", (
            refused.text
        )
        assert "group:dba" in refused.json()["error"]["message"]
    assert await status_of(ctx, run_id) == "awaiting_approval"

    first = await client.post(f"{O}/runs/{run_id}/approve", headers=dee, json={"acknowledged": []})
    assert first.status_code == 200, first.text
    run = (await client.get(f"{O}/runs/{run_id}", headers=h)).json()
    assert run["status"] == "awaiting_approval"
    assert run["approval"]["approvals_progress"] == "1 of 2"
    assert [a["by"] for a in run["approval"]["approvals"]] == ["dee@example.com"]
    again = await client.post(f"{O}/runs/{run_id}/approve", headers=dee, json={"acknowledged": []})
    assert again.status_code == 409 and again.json()["error"]["code"] == "already_approved"

    view = await gql(
        client,
        tenant,
        'query($id: ID!) { organization(slug: "acme") { run(id: $id) { status policyChecks { policy kind result messages }'
        " approval { approvalsRequired approvalsProgress policyApprovers approvals { by } } } } }",
        id=run_id,
    )
    assert view["data"]["organization"]["run"] == {
        "status": "AWAITING_APPROVAL",
        "policyChecks": [{"policy": "dba", "kind": "approval", "result": "pass", "messages": ["2 approvals from group:dba"]}],
        "approval": {"approvalsRequired": 2, "approvalsProgress": "1 of 2", "policyApprovers": ["group:dba"], "approvals": [{"by": "dee@example.com"}]},
    }  # fmt: skip

    second = await client.post(f"{O}/runs/{run_id}/approve", headers=dan, json={"acknowledged": []})
    assert second.status_code == 200, second.text
    assert await status_of(ctx, run_id) == "apply_queued"
    run = (await client.get(f"{O}/runs/{run_id}", headers=h)).json()
    assert run["approval"]["approvals_progress"] == "2 of 2"

    audit = (await client.get(f"{O}/audit", headers=h, params={"action": "run.approve"})).json()
    entries = [e for e in audit["entries"] if e["target"] == f"run:{run_id}"]
    assert sorted((e["actor"], e["details"]["approvals"]) for e in entries) == [
        ("dan@example.com", "2 of 2"),
        ("dee@example.com", "1 of 2"),
    ]

    # On another stack (this one's run holds its lock): a discard by one eligible approver ends it.
    await make_stack(ctx, tenant, {"slug": "db2", "repository": "file:///r"})
    assert (
        await client.patch(f"{O}/stacks/db2/settings", headers=h, json={"policies": ["dba"]})
    ).status_code == 200
    third = await start(ctx, tenant.token, "acme", "db2", "apply")
    assert await finish_plans(ctx, synthetic_plan(deletes=1)) == {third: "awaiting_approval"}
    refused = await client.post(f"{O}/runs/{third}/discard", headers=bob)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_an_approver"
    assert (await client.post(f"{O}/runs/{third}/discard", headers=dan)).status_code == 200
    assert await status_of(ctx, third) == "discarded"


async def test_the_input_holds_run_stack_and_changes_and_never_a_sensitive_value(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    h = tenant.headers
    assert (await client.post(f"{O}/folders", headers=h, json={"path": "prod"})).status_code == 201
    await make_stack(ctx, tenant, {"slug": "web", "repository": "file:///r", "folder": "prod"})
    await _policy(client, tenant, "watch", "plan", WATCH)
    await _policy(client, tenant, "leak", "plan", LEAK)
    assert (
        await client.patch(f"{O}/folders/prod/settings", headers=h, json={"policies": ["watch", "leak"]})
    ).status_code == 200
    put = await client.put(
        f"{O}/stacks/web/variables/password", headers=h, json={"value": "hunter2-secret", "sensitive": True}
    )
    assert put.status_code == 200, put.text

    plan = synthetic_plan(creates=1)
    # The secret everywhere a plan may carry it: marked, unmarked in another attribute (as
    # terraform_data.output copies it), in the variables, in the prior state.
    plan["resource_changes"][0]["change"]["after"] = {"input": "hunter2-secret", "output": "hunter2-secret"}
    plan["resource_changes"][0]["change"]["after_sensitive"] = {"input": True}
    plan["variables"] = {"password": {"value": "hunter2-secret"}}
    plan["prior_state"] = {
        "values": {"root_module": {"resources": [{"values": {"note": "pw=hunter2-secret"}}]}}
    }
    run_id = await start(ctx, tenant.token, "acme", "web", "plan")
    variables = [
        {
            "name": "password",
            "value": "hunter2-secret",
            "sensitive": True,
            "kind": "terraform",
            "origin": "stack",
        }
    ]
    assert await finish_plans(ctx, plan, variables) == {run_id: "planned"}
    run = (await client.get(f"{O}/runs/{run_id}", headers=h)).json()
    checks = {c["policy"]: c for c in run["policy_checks"]}
    assert checks["leak"]["result"] == "pass", checks["leak"]
    assert checks["watch"]["result"] == "warn"
    assert checks["watch"]["messages"] == ["create: terraform_data.new0 (run plan by ada@example.com)"]

    # The same input, for authoring: a test against the past run, then against an input as given.
    tested = await client.post(f"{O}/policies/leak/test", headers=h, json={"run": run_id})
    assert tested.status_code == 200 and tested.json()["result"] == "pass", tested.text
    given = {"plan": {"variables": {"x": {"value": "hunter2-secret"}}}}
    tested = await client.post(f"{O}/policies/leak/test", headers=h, json={"input": given})
    assert tested.json()["result"] == "deny" and tested.json()["messages"] == ["the input holds a secret"]
    body = await gql(
        client,
        tenant,
        'mutation($input: JSON) { testPolicy(org: "acme", name: "leak", input: $input) { __typename'
        " ... on PolicyCheck { result messages } } }",
        input=given,
    )
    assert body["data"]["testPolicy"] == {
        "__typename": "PolicyCheck",
        "result": "deny",
        "messages": ["the input holds a secret"],
    }
    # Another organization's run is not found; so is a run that does not exist.
    missing = await client.post(f"{O}/policies/leak/test", headers=h, json={"run": "0" * 32})
    assert missing.status_code == 404
    neither = await client.post(f"{O}/policies/leak/test", headers=h, json={})
    assert neither.status_code == 422 and "input" in neither.json()["error"]["message"]
    assert json.dumps(run).find("hunter2-secret") == -1


async def test_a_policy_that_errors_or_no_longer_exists_fails_the_run_closed(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    h = tenant.headers
    await make_stack(ctx, tenant, {"slug": "web", "repository": "file:///r"})
    await _policy(
        client, tenant, "broken", "plan", "package b\n\ndeny contains msg if {\n  msg := 1 / 0\n}\n"
    )
    await _policy(client, tenant, "gone", "plan", 'package g\n\nwarn contains "x" if { false }\n')
    assert (
        await client.patch(f"{O}/settings", headers=h, json={"policies": ["broken", "gone"]})
    ).status_code == 200
    assert (await client.delete(f"{O}/policies/gone", headers=h)).status_code == 204
    run_id = await start(ctx, tenant.token, "acme", "web", "apply")
    assert await finish_plans(ctx, synthetic_plan(creates=1)) == {run_id: "failed"}
    run = (await client.get(f"{O}/runs/{run_id}", headers=h)).json()
    lines = run["error"].splitlines()
    assert lines[0] == "policy broken failed: divide by zero at line 4, column 12"
    assert lines[1] == "policy gone does not exist (named by the policies setting, organization)"
    assert [c["result"] for c in run["policy_checks"]] == ["deny", "deny"]


async def test_a_policy_that_times_out_fails_the_run_and_the_others_are_still_evaluated(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    h = tenant.headers
    await make_stack(ctx, tenant, {"slug": "web", "repository": "file:///r"})
    slow = 'package s\n\ndeny contains "never" if {\n  some i in numbers.range(1, 1000000000)\n  i < 0\n}\n'
    await _policy(client, tenant, "slow", "plan", slow)
    await _policy(client, tenant, "watch", "plan", WATCH)
    assert (
        await client.patch(f"{O}/settings", headers=h, json={"policies": ["slow", "watch"]})
    ).status_code == 200
    run_id = await start(ctx, tenant.token, "acme", "web", "apply")
    assert await finish_plans(ctx, synthetic_plan(creates=1)) == {run_id: "failed"}
    run = (await client.get(f"{O}/runs/{run_id}", headers=h)).json()
    assert run["error"] == "policy slow timed out after 2 s"
    checks = {c["policy"]: c for c in run["policy_checks"]}
    assert checks["slow"]["result"] == "deny" and checks["slow"]["took_ms"] >= 2000
    # The worker that ran the slow policy was killed; a new one evaluated the next.
    assert checks["watch"]["result"] == "warn"
    assert checks["watch"]["messages"] == ["create: terraform_data.new0 (run apply by ada@example.com)"]
