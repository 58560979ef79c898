"""The audit trail (platform-api.md §5): every change made through REST, GraphQL or the CLI leaves
one row, in the change's own transaction; names only, never a variable's value or a secret; a
refused request leaves none; `GET $O/audit` and `organization.audit` filter and page it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from conftest import Tenant
from firstlume.db.models_audit import AuditEntry
from firstlume.domain.audit import AuditAction
from firstlume.services import audit
from firstlume.services.context import Context
from support.runs import plan_run
from support.snapshot import snapshot
from test_graphql_api import data, gql, synthetic_plan

O = "/api/v1/orgs/acme"
# Values that must never reach an audit row (nor any plaintext column).
SENSITIVE_VALUE = "s3cr3t-SENSITIVE-value-7f1d"
PLAIN_VALUE = "plain-VARIABLE-value-93ab"
HTTPS_TOKEN = "ghp_AUDITTOKEN-c0ffee"
URL_PASSWORD = "url-PASSWORD-d00d"
SECRETS = (SENSITIVE_VALUE, PLAIN_VALUE, HTTPS_TOKEN, URL_PASSWORD)


async def audit_rows(client: httpx.AsyncClient, tenant: Tenant, **params: Any) -> list[dict[str, Any]]:
    response = await client.get(f"{O}/audit", params=params, headers=tenant.headers)
    assert response.status_code == 200, response.text
    return response.json()["entries"]  # type: ignore[no-any-return]


async def count_rows(ctx: Context) -> int:
    async with ctx.db.transaction() as session:
        return int(await session.scalar(select(func.count()).select_from(AuditEntry)) or 0)


async def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


async def make_changes(client: httpx.AsyncClient, tenant: Tenant, ctx: Context) -> dict[str, str]:
    """One of each audited change through REST (and a discard through GraphQL); returns run ids."""
    h = tenant.headers
    await ok(
        await client.post(
            f"{O}/stacks",
            json={
                "slug": "net",
                "repository": "https://ada@git.example.com/infra.git",  # a password here is refused
                "folder": "prod/eu",
                "git_https_token": HTTPS_TOKEN,
            },
            headers=h,
        ),
        201,
    )
    await ok(await client.patch(f"{O}/settings", json={"require_approval": True}, headers=h))
    await ok(
        await client.patch(
            f"{O}/stacks/net/settings", json={"drift_schedule": "0 6 * * *", "approvers": None}, headers=h
        )
    )
    await ok(
        await client.put(
            f"{O}/stacks/net/variables/DB_PASSWORD",
            json={"value": SENSITIVE_VALUE, "sensitive": True},
            headers=h,
        )
    )
    await ok(
        await client.put(f"{O}/folders/prod/eu/variables/region", json={"value": PLAIN_VALUE}, headers=h)
    )
    await ok(await client.delete(f"{O}/folders/prod/eu/variables/region", headers=h), 204)

    canceled = (await ok(await client.post(f"{O}/stacks/net/runs", json={"type": "plan"}, headers=h), 201))[
        "id"
    ]
    await ok(await client.post(f"{O}/runs/{canceled}/cancel", headers=h))
    discarded = (
        await data(
            client,
            tenant,
            'mutation { startRun(org: "acme", stack: "net", type: APPLY) { ... on Run { id } } }',
        )
    )["startRun"]["id"]
    assert await plan_run(ctx, synthetic_plan()) == {discarded: "awaiting_approval"}
    discard = await data(
        client,
        tenant,
        'mutation($id: ID!) { discardRun(org: "acme", runId: $id) { __typename } }',
        id=discarded,
    )
    assert discard == {"discardRun": {"__typename": "Run"}}
    approved = (await ok(await client.post(f"{O}/stacks/net/runs", json={"type": "apply"}, headers=h), 201))[
        "id"
    ]
    assert await plan_run(ctx, synthetic_plan()) == {approved: "awaiting_approval"}
    await ok(await client.post(f"{O}/runs/{approved}/approve", headers=h))
    return {"canceled": canceled, "approved": approved, "discarded": discarded}


async def test_changes_through_rest_and_graphql_leave_one_row_each_with_names_only(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context, database_url: str
) -> None:
    runs = await make_changes(client, tenant, ctx)
    h = tenant.headers
    # The state lock, taken then force-unlocked; the state deleted.
    lock = json.dumps({"ID": "L1", "Operation": "OperationTypeApply", "Who": "bob@laptop"})
    assert (
        await client.request("LOCK", f"{O}/stacks/net/state/lock", content=lock, headers=h)
    ).status_code == 200
    assert (await client.delete(f"{O}/stacks/net/state/lock", headers=h)).status_code == 200
    # A person's state write (Terraform's http backend by hand): recorded without the state.
    state = {
        "version": 4,
        "serial": 1,
        "lineage": "lin-1",
        "outputs": {"pw": {"value": SENSITIVE_VALUE, "type": "string", "sensitive": True}},
        "resources": [],
    }
    written = await client.post(f"{O}/stacks/net/state", content=json.dumps(state), headers=h)
    assert written.status_code == 200, written.text
    assert (await client.delete(f"{O}/stacks/net/state", headers=h)).status_code in (200, 204)

    rows = await audit_rows(client, tenant, limit=500)
    actions = [r["action"] for r in reversed(rows)]
    assert actions == [
        "organization.create",
        "token.create",
        "folder.create",
        "folder.create",
        "stack.create",
        "settings.update",
        "settings.update",
        "variable.set",
        "variable.set",
        "variable.delete",
        "run.start",
        "run.cancel",
        "run.start",
        "run.discard",
        "run.start",
        "run.approve",
        "state.force_unlock",
        "state.write",
        "state.delete",
    ]
    by_action: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_action.setdefault(row["action"], []).insert(0, row)

    # Who, how, and which request: the REST answers carry the id the row records.
    stack_row = by_action["stack.create"][0]
    assert stack_row["actor"] == tenant.email and stack_row["via"] == "rest" and stack_row["token"]
    assert stack_row["target"] == "stack:net" and stack_row["stack"] == "net"
    assert stack_row["details"]["repository"] == "https://git.example.com/infra.git"
    assert stack_row["details"]["credentials"] == ["git_https_token"]
    assert [r["target"] for r in by_action["folder.create"]] == ["folder:prod", "folder:prod/eu"]
    # The tenant was made in process, not through an API: no person, no request.
    assert by_action["organization.create"][0]["actor"] == "system"

    org_settings, stack_settings = by_action["settings.update"]
    assert org_settings["target"] == "organization:acme" and org_settings["stack"] is None
    assert org_settings["details"] == {"changes": [{"setting": "require_approval", "old": None, "new": True}]}
    # approvers was already null: only what changed is listed.
    assert stack_settings["target"] == "stack:net" and stack_settings["stack"] == "net"
    assert stack_settings["details"] == {
        "changes": [{"setting": "drift_schedule", "old": None, "new": "0 6 * * *"}]
    }

    secret_var, plain_var = by_action["variable.set"]
    assert secret_var["details"] == {
        "name": "DB_PASSWORD",
        "scope": "stack:net",
        "kind": "terraform",
        "sensitive": True,
        "created": True,
    }
    assert secret_var["stack"] == "net"
    assert plain_var["target"] == "variable:region" and plain_var["details"]["scope"] == "folder:prod/eu"
    assert by_action["variable.delete"][0]["details"] == {"name": "region", "scope": "folder:prod/eu"}

    starts = by_action["run.start"]
    assert [r["target"] for r in starts] == [f"run:{runs[k]}" for k in ("canceled", "discarded", "approved")]
    assert [r["via"] for r in starts] == ["rest", "graphql", "rest"]
    assert by_action["run.discard"][0]["via"] == "graphql"
    assert by_action["run.discard"][0]["target"] == f"run:{runs['discarded']}"
    assert starts[0]["details"] == {"number": 1, "type": "plan"}
    assert by_action["run.cancel"][0]["details"] == {"number": 1, "was": "queued"}
    assert by_action["run.approve"][0]["details"] == {"number": 3, "acknowledged": []}
    assert by_action["state.force_unlock"][0]["details"] == {
        "unit": ".",
        "lock": "L1",
        "holder": tenant.email,
    }
    assert by_action["state.force_unlock"][0]["target"] == "state:net:."
    assert by_action["state.write"][0]["details"] == {"unit": ".", "serial": 1, "lineage": "lin-1"}
    assert by_action["state.delete"][0]["details"] == {"unit": ".", "versions": 1}

    # No audit row holds a variable's value or a secret, nor does any other plaintext column: the
    # whole database as text, and on SQLite the file's bytes (WAL included). (The stack's own
    # `repository` column keeps the URL as given, password included: only the audit copy is
    # checked for that one.)
    tables = await snapshot(ctx)
    for secret in SECRETS:
        assert secret not in repr(tables["audit_entries"]), secret
    stored = repr(tables)
    for secret in (SENSITIVE_VALUE, PLAIN_VALUE, HTTPS_TOKEN):
        assert secret not in stored, secret
    if database_url.startswith("sqlite"):
        path = Path(database_url.split("///", 1)[1])
        raw = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
        assert b"DB_PASSWORD" in raw  # the scan reads what was written
        for secret in (SENSITIVE_VALUE, PLAIN_VALUE, HTTPS_TOKEN):
            assert secret.encode() not in raw, secret


async def test_the_request_id_of_the_answer_is_the_rows(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    response = await client.patch(
        f"{O}/settings",
        json={"confirm_destructive": True},
        headers={**tenant.headers, "X-Request-Id": "req-42"},
    )
    assert response.status_code == 200 and response.headers["x-request-id"] == "req-42"
    generated = await client.patch(
        f"{O}/settings", json={"confirm_destructive": False}, headers=tenant.headers
    )
    [second, first] = await audit_rows(client, tenant, action="settings.update")
    assert first["request_id"] == "req-42"
    assert second["request_id"] == generated.headers["x-request-id"] and len(second["request_id"]) == 32


async def test_a_refused_request_writes_no_audit_row(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    runs = await make_changes(client, tenant, ctx)
    h = tenant.headers
    before = await snapshot(ctx)
    refused = [
        # 422: an unknown setting, a bad cron, a bad variable name, a bad value.
        await client.patch(f"{O}/settings", json={"require_approval": True, "nope": 1}, headers=h),
        await client.patch(f"{O}/stacks/net/settings", json={"drift_schedule": "every day"}, headers=h),
        await client.put(f"{O}/variables/9bad", json={"value": SENSITIVE_VALUE}, headers=h),
        await client.put(f"{O}/variables/ok", json={"value": None}, headers=h),
        await client.post(f"{O}/stacks", json={"slug": "Not A Slug", "repository": "x"}, headers=h),
        # 409: a stack that exists, a run that is not awaiting approval, one that cannot be canceled.
        await client.post(f"{O}/stacks", json={"slug": "net", "repository": "file:///x"}, headers=h),
        await client.post(f"{O}/runs/{runs['canceled']}/approve", headers=h),
        await client.post(f"{O}/runs/{runs['approved']}/discard", headers=h),
        await client.post(f"{O}/runs/{runs['canceled']}/cancel", headers=h),
        # 404: no such variable.
        await client.delete(f"{O}/variables/missing", headers=h),
    ]
    assert [r.status_code for r in refused] == [422, 422, 422, 422, 422, 409, 409, 409, 409, 404]
    bad_gql = await gql(
        client,
        tenant,
        'mutation { updateSettings(org: "acme", input: {driftSchedule: "nope"}) { __typename } }',
    )
    assert bad_gql["data"]["updateSettings"]["__typename"] == "InvalidInputError"
    assert await snapshot(ctx) == before


async def test_a_change_rolled_back_after_its_row_was_written_leaves_no_row(
    ctx: Context, tenant: Tenant
) -> None:
    """The row is in the change's transaction: when the unit fails later, both go."""
    from firstlume.services import accounts

    before = await count_rows(ctx)
    with pytest.raises(RuntimeError):
        async with ctx.unit() as unit:
            actor = await accounts.authenticate(unit.session, tenant.token)
            org = await accounts.org_for(unit.session, actor, tenant.org)
            await audit.record(unit.session, org, AuditAction.SETTINGS_UPDATE, "organization:acme")
            raise RuntimeError("the change fails after its audit row")
    assert await count_rows(ctx) == before


async def test_record_refuses_details_that_would_hold_a_value(ctx: Context, tenant: Tenant) -> None:
    async with ctx.unit() as unit:
        from firstlume.services import accounts

        actor = await accounts.authenticate(unit.session, tenant.token)
        org = await accounts.org_for(unit.session, actor, tenant.org)
        with pytest.raises(ValueError, match="value"):
            await audit.record(
                unit.session, org, AuditAction.VARIABLE_SET, "variable:x", {"name": "x", "value": "leak"}
            )
        with pytest.raises(ValueError, match="secret"):
            await audit.record(
                unit.session, org, AuditAction.STACK_UPDATE, "stack:x", {"x": [{"secret": "s"}]}
            )


async def test_filters_and_pages(client: httpx.AsyncClient, tenant: Tenant, ctx: Context) -> None:
    runs = await make_changes(client, tenant, ctx)
    everything = await audit_rows(client, tenant, limit=500)
    assert len(everything) == 16

    approvals = await audit_rows(client, tenant, action="run.approve,run.cancel")
    assert [r["action"] for r in approvals] == ["run.approve", "run.cancel"]
    assert [r["action"] for r in await audit_rows(client, tenant, actor="system")] == [
        "token.create",
        "organization.create",
    ]
    mine = await audit_rows(client, tenant, actor=tenant.email, limit=500)
    assert len(mine) == 14 and {r["actor"] for r in mine} == {tenant.email}
    of_stack = await audit_rows(client, tenant, stack="net", limit=500)
    assert {r["stack"] for r in of_stack} == {"net"} and len(of_stack) == 9
    assert [r["action"] for r in await audit_rows(client, tenant, target=f"run:{runs['approved']}")] == [
        "run.approve",
        "run.start",
    ]
    # Times: since is inclusive, until exclusive.
    middle = everything[7]
    newer = await audit_rows(client, tenant, since=middle["time"], limit=500)
    older = await audit_rows(client, tenant, until=middle["time"], limit=500)
    assert middle["id"] in {r["id"] for r in newer} and middle["id"] not in {r["id"] for r in older}
    assert len(newer) + len(older) == len(everything)
    assert await audit_rows(client, tenant, since="2999-01-01T00:00:00Z") == []

    # Pages of 4, newest first, with no entry twice or missed.
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 4}
        if cursor:
            params["cursor"] = cursor
        page = await ok(await client.get(f"{O}/audit", params=params, headers=tenant.headers))
        seen += [r["id"] for r in page["entries"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [r["id"] for r in everything]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"action": "run.explode"}, "action"),
        ({"since": "yesterday"}, "since"),
        ({"until": "2026-01-01T00:00:00"}, "until"),
        ({"since": "2026-02-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "since"),
        ({"cursor": "abc"}, "cursor"),
        ({"limit": "0"}, "limit"),
        ({"limit": "lots"}, "limit"),
        ({"actr": "ada@example.com"}, "actr"),
        ({"stack": "x" * 2_000_000}, "stack"),
    ],
)
async def test_a_bad_filter_is_refused_naming_it(
    client: httpx.AsyncClient, tenant: Tenant, params: dict[str, str], field: str
) -> None:
    if len(params.get("stack", "")) > 1000:
        # Too long for a URL: sent the way it would reach GraphQL instead.
        body = await gql(
            client,
            tenant,
            'query($s: [String!]) { organization(slug: "acme") { audit(stack: $s) { nodes { id } } } }',
            s=[params["stack"]],
        )
        assert body["errors"][0]["extensions"]["field"] == field, body["errors"]
        return
    response = await client.get(f"{O}/audit", params=params, headers=tenant.headers)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field


async def test_other_organizations_trails_are_not_found(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    from conftest import make_tenant

    other = await make_tenant(ctx, "globex", "grace@example.com")
    response = await client.get(f"{O}/audit", headers=other.headers)
    assert response.status_code == 404
    # Each organization sees its own rows only.
    assert [r["action"] for r in await audit_rows(client, tenant)] == ["token.create", "organization.create"]
    theirs = await client.get("/api/v1/orgs/globex/audit", headers=other.headers)
    assert [r["target"] for r in theirs.json()["entries"]][1] == "organization:globex"


async def test_graphql_reads_the_same_trail_with_filters_and_pages(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    await make_changes(client, tenant, ctx)
    query = """query($first: Int!, $after: String, $action: [String!], $stack: [String!]) {
      organization(slug: "acme") { audit(first: $first, after: $after, action: $action, stack: $stack) {
        nodes { id time actor tokenId action target stack details via requestId }
        pageInfo { hasNextPage endCursor } } } }"""
    first = (await data(client, tenant, query, first=2, action=["run.start"]))["organization"]["audit"]
    assert [n["action"] for n in first["nodes"]] == ["run.start", "run.start"]
    assert [n["via"] for n in first["nodes"]] == ["rest", "graphql"]
    assert first["pageInfo"]["hasNextPage"] is True
    rest = (
        await data(client, tenant, query, first=2, after=first["pageInfo"]["endCursor"], action=["run.start"])
    )["organization"]["audit"]
    assert [n["details"]["number"] for n in rest["nodes"]] == [1]
    assert rest["pageInfo"] == {"hasNextPage": False, "endCursor": None}
    same = await audit_rows(client, tenant, action="run.start")
    assert [n["id"] for n in first["nodes"] + rest["nodes"]] == [r["id"] for r in same]

    bad = await gql(client, tenant, query, first=2, action=["nope"])
    assert bad["errors"][0]["extensions"]["field"] == "action"
    assert "run.start" in bad["errors"][0]["message"]


async def test_a_run_no_person_started_is_recorded_as_the_system(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    """A push or the drift schedule starts runs in no person's name: actor "system", and who
    stands behind it in the details."""
    from conftest import make_stack
    from firstlume.domain.runs import RunType, TriggerKind
    from firstlume.services import accounts, catalog, runs
    from firstlume.services.access.roles import Role
    from firstlume.services.commands import StartRun

    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    async with ctx.unit() as unit:
        org = await accounts.authenticate_in_org(unit.session, tenant.token, tenant.org, Role.OPERATOR)
        stack = await catalog.stack_by_slug(unit.session, org[1], "net")
        trigger = runs.Trigger(kind=TriggerKind.PUSH, by="git:linus@example.com", commit="a" * 40)
        await runs.start_run(unit, None, stack, StartRun(type=RunType.PLAN), trigger=trigger)
    [row] = await audit_rows(client, tenant, action="run.start")
    assert (row["actor"], row["token"], row["via"]) == ("system", None, "system")
    assert row["details"] == {
        "number": 1,
        "type": "plan",
        "trigger": "push",
        "by": "git:linus@example.com",
        "commit": "a" * 40,
    }


async def test_graphql_mutations_are_audited_as_graphql(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    await data(
        client,
        tenant,
        'mutation { createStack(org: "acme", input: {slug: "net", repository: "file:///repo", '
        'gitHttpsToken: "' + HTTPS_TOKEN + '"}) { __typename } }',
    )
    await data(
        client,
        tenant,
        'mutation { updateSettings(org: "acme", stack: "net", input: {confirmDestructive: true}) { __typename } }',
    )
    await data(
        client,
        tenant,
        'mutation { setVariable(org: "acme", stack: "net", name: "TOKEN", value: "'
        + SENSITIVE_VALUE
        + '", sensitive: true) { __typename } }',
    )
    await data(
        client, tenant, 'mutation { deleteVariable(org: "acme", stack: "net", name: "TOKEN") { __typename } }'
    )
    rows = await audit_rows(client, tenant, stack="net")
    assert [(r["action"], r["via"], r["actor"]) for r in reversed(rows)] == [
        ("stack.create", "graphql", tenant.email),
        ("settings.update", "graphql", tenant.email),
        ("variable.set", "graphql", tenant.email),
        ("variable.delete", "graphql", tenant.email),
    ]
    assert rows[-1]["details"]["credentials"] == ["git_https_token"]
    text = json.dumps(rows)
    assert SENSITIVE_VALUE not in text and HTTPS_TOKEN not in text


async def test_tokens_members_and_the_webhook_secret_are_audited_without_a_secret(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    h = tenant.headers
    created = await ok(await client.post(f"{O}/tokens", json={"name": "laptop"}, headers=h), 201)
    await ok(await client.delete(f"{O}/tokens/{created['id']}", headers=h))
    await ok(
        await client.put(
            f"{O}/members/bob@example.com", json={"role": "operator", "groups": ["sre"]}, headers=h
        )
    )
    await ok(await client.delete(f"{O}/members/bob@example.com", headers=h), 204)
    secret = (await ok(await client.post(f"{O}/git/webhook-secret", headers=h), 201))["secret"]
    rows = list(reversed(await audit_rows(client, tenant)))[2:]  # after the tenant's organization and token
    assert [(r["action"], r["target"]) for r in rows] == [
        ("token.create", f"token:{created['id']}"),
        ("token.revoke", f"token:{created['id']}"),
        ("member.update", "member:bob@example.com"),
        ("member.remove", "member:bob@example.com"),
        ("git.webhook_secret.rotate", "org:acme"),
    ]
    assert rows[0]["details"]["name"] == "laptop" and rows[2]["details"] == {
        "role": "operator",
        "groups": ["sre"],
    }
    trail = repr(await snapshot(ctx))
    assert created["token"] not in trail and secret not in trail


def test_every_action_is_documented_as_recorded() -> None:
    """docs/rest-api.md's audit table has a row for every action (none is "reserved" any more)."""
    doc = (Path(__file__).resolve().parent.parent / "docs" / "rest-api.md").read_text()
    trail = doc[doc.index("\n## Audit trail") : doc.index("\n## Error codes")]
    rows = "\n".join(line.split("|")[1] for line in trail.splitlines() if line.startswith("| `"))
    assert sorted(a.value for a in AuditAction if f"`{a.value}`" not in rows) == []
    assert "Reserved" not in trail
