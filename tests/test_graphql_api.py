"""The GraphQL API over HTTP, in process: what it reads, what its mutations do and how they fail.

Runs are driven through the executor HTTP routes with a phase token from the dispatcher, the way
a real executor drives them."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from conftest import Tenant, make_stack, make_tenant
from firstlume.db.models import Organization
from firstlume.services import accounts, dispatch
from firstlume.services.context import Context
from support.executor_api import ExecutorReports
from support.runs import plan_run, start, status_of
from support.snapshot import snapshot

ORG = "acme"


def synthetic_plan(creates: int = 1, replaces: int = 0, deletes: int = 0, updates: int = 0) -> dict[str, Any]:
    """A `show -json` plan with that many changes of each kind (terraform_data resources)."""

    def change(name: str, actions: list[str], before: Any, after: Any, **extra: Any) -> dict[str, Any]:
        return {
            "address": f"terraform_data.{name}",
            "mode": "managed",
            "type": "terraform_data",
            "name": name,
            "change": {
                "actions": actions,
                "before": before,
                "after": after,
                "after_unknown": {},
                "before_sensitive": {} if before is not None else False,
                "after_sensitive": {} if after is not None else False,
                **extra,
            },
        }

    changes = [change(f"new{i}", ["create"], None, {"input": f"n{i}"}) for i in range(creates)]
    changes += [
        change(f"repl{i}", ["delete", "create"], {"triggers_replace": "v1"}, {"triggers_replace": "v2"},
               replace_paths=[["triggers_replace"]])
        for i in range(replaces)
    ]  # fmt: skip
    changes += [change(f"gone{i}", ["delete"], {"input": "x"}, None) for i in range(deletes)]
    changes += [change(f"upd{i}", ["update"], {"input": "a"}, {"input": "b"}) for i in range(updates)]
    return {"format_version": "1.2", "terraform_version": "1.11.0", "resource_changes": changes}


async def gql(
    client: httpx.AsyncClient, tenant: Tenant | None, query: str, **variables: Any
) -> dict[str, Any]:
    """The whole response body (data and errors)."""
    headers = tenant.headers if tenant else {}
    response = await client.post("/graphql", json={"query": query, "variables": variables}, headers=headers)
    assert response.status_code == 200, response.text
    assert "Traceback" not in response.text and 'File "' not in response.text
    return response.json()  # type: ignore[no-any-return]


async def data(client: httpx.AsyncClient, tenant: Tenant | None, query: str, **variables: Any) -> Any:
    body = await gql(client, tenant, query, **variables)
    assert not body.get("errors"), body["errors"]
    return body["data"]


async def claim_one(ctx: Context, client: httpx.AsyncClient) -> ExecutorReports:
    [launch] = await dispatch.claim_plans(ctx)
    return ExecutorReports(client, launch.token)


START = """mutation($org: String!, $stack: String!, $type: RunType!) {
  startRun(org: $org, stack: $stack, type: $type) { __typename ... on Run { id number status queuePosition } ... on Error { code message } }
}"""

RUN_DETAILS = """query($org: String!, $id: ID!) { organization(slug: $org) { run(id: $id) {
  id number type status awaitingApproval finished createdBy createdAt finishedAt queuePosition error logLength
  stack { slug }
  commit { sha author message url }
  steps { name status startedAt finishedAt durationMs }
  summary { delete replace update create text }
  approval { required confirmDestructive approvedBy approvedAt acknowledged }
  configuration { configYaml engine settings { requireApproval { value origin } confirmDestructive { value origin } }
                  variables { name origin sensitive kind } }
  stateBackends { unit backend }
  log { text nextOffset }
  planLog: log(step: "plan") { text nextOffset }
} } }"""


@pytest.fixture
async def stack(ctx: Context, tenant: Tenant) -> str:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo", "folder": "prod/eu"})
    return "net"


async def test_viewer_and_organizations_list_only_the_callers_memberships(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    other = await make_tenant(ctx, "globex", "grace@example.com")
    await make_tenant(ctx, "initech", "bob@example.com")
    async with ctx.unit() as unit:
        await accounts.create_token(unit.session, "globex", tenant.email)
    mine = await data(
        client, tenant, "{ viewer { email organizations { slug name } } organizations { slug } }"
    )
    assert mine["viewer"]["email"] == tenant.email
    assert [o["slug"] for o in mine["viewer"]["organizations"]] == ["acme", "globex"]
    assert [o["slug"] for o in mine["organizations"]] == ["acme", "globex"]
    theirs = await data(client, other, '{ organizations { slug } acme: organization(slug: "acme") { slug } }')
    assert theirs == {"organizations": [{"slug": "globex"}], "acme": None}
    missing = await data(client, tenant, '{ organization(slug: "no-such-org") { slug } }')
    assert missing == {"organization": None}


async def test_folders_and_stacks_form_a_tree(client: httpx.AsyncClient, tenant: Tenant) -> None:
    created = await data(
        client,
        tenant,
        'mutation { createFolder(org: "acme", path: "prod/eu") { ... on Folder { path name parent { path } } } }',
    )
    assert created["createFolder"] == {"path": "prod/eu", "name": "eu", "parent": {"path": "prod"}}
    for slug, folder in [("net", "prod/eu"), ("dns", "prod"), ("tools", None), ("db", "dev/us")]:
        result = await data(
            client,
            tenant,
            """mutation($org: String!, $input: CreateStackInput!) { createStack(org: $org, input: $input) {
                 __typename ... on Stack { slug branch path repository folder { path } } } }""",
            org=ORG,
            input={"slug": slug, "repository": "file:///repo", "folder": folder, "path": "infra"},
        )
        assert result["createStack"] == {
            "__typename": "Stack", "slug": slug, "branch": "main", "path": "infra", "repository": "file:///repo",
            "folder": {"path": folder} if folder else None,
        }  # fmt: skip
    tree = await data(
        client,
        tenant,
        """{ organization(slug: "acme") {
             rootFolders { path stacks { slug } children { path stacks { slug } children { path } } }
             rootStacks { slug }
             folders { path }
             stacks { slug folder { path } }
             folder(path: "prod/eu") { path parent { path parent { path } } stacks { slug } }
             missing: folder(path: "nope") { path }
           } }""",
    )
    org = tree["organization"]
    assert org["rootFolders"] == [
        {"path": "dev", "stacks": [], "children": [{"path": "dev/us", "stacks": [{"slug": "db"}], "children": []}]},
        {"path": "prod", "stacks": [{"slug": "dns"}], "children": [{"path": "prod/eu", "stacks": [{"slug": "net"}], "children": []}]},
    ]  # fmt: skip
    assert org["rootStacks"] == [{"slug": "tools"}]
    assert [f["path"] for f in org["folders"]] == ["dev", "dev/us", "prod", "prod/eu"]
    assert [(s["slug"], s["folder"]["path"] if s["folder"] else None) for s in org["stacks"]] == [
        ("db", "dev/us"), ("dns", "prod"), ("net", "prod/eu"), ("tools", None),
    ]  # fmt: skip
    assert org["folder"] == {
        "path": "prod/eu",
        "parent": {"path": "prod", "parent": None},
        "stacks": [{"slug": "net"}],
    }
    assert org["missing"] is None


async def test_stack_git_credentials_are_write_only(client: httpx.AsyncClient, tenant: Tenant) -> None:
    token = "ghp_write-only-credential-123"
    body = await gql(
        client,
        tenant,
        """mutation($input: CreateStackInput!) { createStack(org: "acme", input: $input) { ... on Stack { slug gitAuth } } }""",
        input={"slug": "private", "repository": "https://git.example.com/x.git", "gitHttpsToken": token},
    )
    assert body["data"]["createStack"] == {"slug": "private", "gitAuth": "HTTPS_TOKEN"}
    read = await client.post(
        "/graphql",
        json={
            "query": '{ organization(slug: "acme") { stack(slug: "private") { slug gitAuth repository } } }'
        },
        headers=tenant.headers,
    )
    assert token not in json.dumps(body) and token not in read.text


async def test_stack_runs_are_paginated_newest_first_with_a_capped_page_size(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, stack: str
) -> None:
    for _ in range(45):
        await start(ctx, tenant.token, ORG, stack, "plan")
    page_query = """query($after: String, $first: Int!) { organization(slug: "acme") { stack(slug: "net") {
        runs(first: $first, after: $after) { totalCount pageInfo { hasNextPage endCursor } nodes { number } } } } }"""
    numbers: list[int] = []
    after = None
    pages = []
    while True:
        page = (await data(client, tenant, page_query, after=after, first=20))["organization"]["stack"][
            "runs"
        ]
        pages.append(page)
        numbers += [n["number"] for n in page["nodes"]]
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
    assert numbers == list(range(45, 0, -1))
    assert [len(p["nodes"]) for p in pages] == [20, 20, 5]
    assert {p["totalCount"] for p in pages} == {45}
    for first, after in [(101, None), (0, None), (-1, None), (5, "not-a-cursor"), (5, "²"), (5, "9" * 40)]:
        body = await gql(client, tenant, page_query, after=after, first=first)
        assert body["data"] is None or body["data"]["organization"]["stack"] is None
        [error] = body["errors"]
        assert error["extensions"]["code"] == "invalid_request"
        assert error["extensions"]["field"] in ("first", "after")


async def test_run_shows_steps_commit_configuration_backends_approval_and_log(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, stack: str
) -> None:
    started = await data(client, tenant, START, org=ORG, stack=stack, type="APPLY")
    run = started["startRun"]
    assert run["__typename"] == "Run" and run["status"] == "QUEUED" and run["queuePosition"] == 1
    executor = await claim_one(ctx, client)
    await executor.step("checkout", "running")
    await executor.log("checkout", "Cloning file:///repo\n")
    await executor.post(
        "commit",
        {
            "sha": "a" * 40,
            "author": "Ada <ada@example.com>",
            "message": "Add the network\n\nbody",
            "url": None,
        },
    )
    await executor.step("checkout", "done")
    await executor.post(
        "configuration",
        {
            "config_yaml": "variables:\n  region: eu\n",
            "engine": "terraform",
            "variables": [
                {"name": "region", "origin": "config.yaml", "sensitive": False, "kind": "terraform"},
                {
                    "name": "db_password",
                    "origin": "organization",
                    "sensitive": True,
                    "value": "hunter2-leaked",
                },
            ],
        },
    )
    await executor.step("plan", "running")
    await executor.log("plan", "Plan: 1 to add\n")
    await executor.post("state-backends", {"backends": [{"unit": ".", "backend": "local"}]})
    await executor.post(
        "plan", {"plan_file_b64": "cGxhbg==", "plan_json": synthetic_plan(creates=1), "variables": []}
    )
    await executor.step("plan", "done")
    await executor.post("finish", {"status": "succeeded"})

    response = await client.post(
        "/graphql",
        json={"query": RUN_DETAILS, "variables": {"org": ORG, "id": run["id"]}},
        headers=tenant.headers,
    )
    assert "hunter2-leaked" not in response.text
    got = response.json()["data"]["organization"]["run"]
    assert {k: got[k] for k in ("type", "status", "awaitingApproval", "finished", "createdBy", "queuePosition", "error")} == {
        "type": "APPLY", "status": "AWAITING_APPROVAL", "awaitingApproval": True, "finished": False,
        "createdBy": tenant.email, "queuePosition": None, "error": None,
    }  # fmt: skip
    assert got["stack"] == {"slug": "net"}
    assert got["commit"] == {
        "sha": "a" * 40,
        "author": "Ada <ada@example.com>",
        "message": "Add the network",
        "url": None,
    }
    assert [(s["name"], s["status"]) for s in got["steps"]] == [
        ("checkout", "DONE"), ("plan", "DONE"), ("approval", "RUNNING"),
    ]  # fmt: skip
    assert (
        all(isinstance(s["durationMs"], int) for s in got["steps"][:2])
        and got["steps"][2]["durationMs"] is None
    )
    assert got["summary"] == {"delete": 0, "replace": 0, "update": 0, "create": 1, "text": "1 create"}
    assert got["approval"] == {
        "required": True, "confirmDestructive": False, "approvedBy": None, "approvedAt": None, "acknowledged": [],
    }  # fmt: skip
    assert got["configuration"] == {
        "configYaml": "variables:\n  region: eu\n",
        "engine": "terraform",
        "settings": {
            "requireApproval": {"value": True, "origin": "default"},
            "confirmDestructive": {"value": False, "origin": "default"},
        },
        "variables": [
            {"name": "region", "origin": "config.yaml", "sensitive": False, "kind": "TERRAFORM"},
            {"name": "db_password", "origin": "organization", "sensitive": True, "kind": "TERRAFORM"},
        ],
    }
    assert got["stateBackends"] == [{"unit": ".", "backend": "local"}]
    assert got["log"] == {"text": "Cloning file:///repo\nPlan: 1 to add\n", "nextOffset": got["logLength"]}
    assert got["planLog"] == {"text": "Plan: 1 to add\n", "nextOffset": got["logLength"]}
    rest = await data(
        client, tenant, 'query($id: ID!) { organization(slug: "acme") { run(id: $id) { log(fromOffset: 8) { text } } } }',
        id=run["id"],
    )  # fmt: skip
    assert rest["organization"]["run"]["log"]["text"] == "file:///repo\nPlan: 1 to add\n"


async def test_failed_run_shows_its_error(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, stack: str
) -> None:
    run_id = await start(ctx, tenant.token, ORG, stack, "plan")
    executor = await claim_one(ctx, client)
    await executor.step("init", "running")
    await executor.post(
        "finish", {"status": "failed", "error": "Error: Failed to query available provider packages"}
    )
    got = await data(client, tenant, RUN_DETAILS, org=ORG, id=run_id)
    run = got["organization"]["run"]
    assert run["status"] == "FAILED" and run["finished"] is True and run["finishedAt"] is not None
    assert run["error"] == "Error: Failed to query available provider packages"
    assert run["steps"] == [{**run["steps"][0], "name": "init", "status": "FAILED"}]


async def test_active_runs_have_queue_positions_and_flag_approval(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, stack: str
) -> None:
    await make_stack(ctx, tenant, {"slug": "dns", "repository": "file:///repo"})
    first = await start(ctx, tenant.token, ORG, "net", "apply")
    queued = [await start(ctx, tenant.token, ORG, "net", "plan") for _ in range(2)]
    other = await start(ctx, tenant.token, ORG, "dns", "plan")
    assert await plan_run(ctx, synthetic_plan()) == {first: "awaiting_approval", other: "planned"}
    finished = await data(
        client,
        tenant,
        '{ organization(slug: "acme") { activeRuns { id status awaitingApproval queuePosition stack { slug } } } }',
    )
    assert finished["organization"]["activeRuns"] == [
        {"id": first, "status": "AWAITING_APPROVAL", "awaitingApproval": True, "queuePosition": None, "stack": {"slug": "net"}},
        {"id": queued[0], "status": "QUEUED", "awaitingApproval": False, "queuePosition": 1, "stack": {"slug": "net"}},
        {"id": queued[1], "status": "QUEUED", "awaitingApproval": False, "queuePosition": 2, "stack": {"slug": "net"}},
    ]  # fmt: skip


# Settings and variables ---------------------------------------------------------------------

SETTINGS = """{ organization(slug: "acme") {
  settings { ...S }
  folder(path: "prod/eu") { settings { ...S } }
  stack(slug: "net") { settings { ...S } }
} }
fragment S on Settings { explicit { requireApproval confirmDestructive }
  effective { requireApproval { value origin } confirmDestructive { value origin } } }"""

UPDATE_SETTINGS = """mutation($input: SettingsInput!, $folder: String, $stack: String) {
  updateSettings(org: "acme", input: $input, folder: $folder, stack: $stack) {
    __typename
    ... on Settings { explicit { requireApproval confirmDestructive } effective { requireApproval { value origin } } }
    ... on Error { code message }
    ... on InvalidInputError { field }
  } }"""


def effective(settings: dict[str, Any]) -> dict[str, tuple[bool, str]]:
    return {k: (v["value"], v["origin"]) for k, v in settings["effective"].items()}


async def test_settings_explicit_and_effective_with_origins_at_every_level(
    client: httpx.AsyncClient, tenant: Tenant, stack: str
) -> None:
    before = (await data(client, tenant, SETTINGS))["organization"]
    assert effective(before["stack"]["settings"]) == {
        "requireApproval": (True, "default"), "confirmDestructive": (False, "default"),
    }  # fmt: skip
    assert before["folder"]["settings"]["explicit"] == {"requireApproval": None, "confirmDestructive": None}

    org = await data(client, tenant, UPDATE_SETTINGS, input={"requireApproval": False})
    assert org["updateSettings"]["explicit"] == {"requireApproval": False, "confirmDestructive": None}
    assert org["updateSettings"]["effective"]["requireApproval"] == {"value": False, "origin": "organization"}
    await data(client, tenant, UPDATE_SETTINGS, input={"confirmDestructive": True}, folder="prod")
    await data(client, tenant, UPDATE_SETTINGS, input={"requireApproval": True}, folder="prod/eu")
    after = (await data(client, tenant, SETTINGS))["organization"]
    assert effective(after["settings"]) == {
        "requireApproval": (False, "organization"),
        "confirmDestructive": (False, "default"),
    }
    assert effective(after["folder"]["settings"]) == {
        "requireApproval": (True, "folder:prod/eu"), "confirmDestructive": (True, "folder:prod"),
    }  # fmt: skip
    assert effective(after["stack"]["settings"]) == effective(after["folder"]["settings"])

    own = await data(client, tenant, UPDATE_SETTINGS, input={"confirmDestructive": False}, stack="net")
    assert own["updateSettings"]["explicit"] == {"requireApproval": None, "confirmDestructive": False}
    # null removes the level's value: the stack inherits again.
    await data(client, tenant, UPDATE_SETTINGS, input={"confirmDestructive": None}, stack="net")
    await data(client, tenant, UPDATE_SETTINGS, input={"requireApproval": None}, folder="prod/eu")
    final = (await data(client, tenant, SETTINGS))["organization"]["stack"]["settings"]
    assert final["explicit"] == {"requireApproval": None, "confirmDestructive": None}
    assert effective(final) == {
        "requireApproval": (False, "organization"),
        "confirmDestructive": (True, "folder:prod"),
    }


async def test_settings_refusals_are_typed(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, stack: str
) -> None:
    before = await snapshot(ctx)
    cases = [
        ({"input": {}}, "InvalidInputError"),
        ({"input": {"requireApproval": True}, "folder": "prod", "stack": "net"}, "InvalidInputError"),
        ({"input": {"requireApproval": True}, "folder": "nope"}, "NotFoundError"),
        ({"input": {"requireApproval": True}, "stack": "nope"}, "NotFoundError"),
    ]
    for variables, typename in cases:
        result = (await data(client, tenant, UPDATE_SETTINGS, **variables))["updateSettings"]
        assert result["__typename"] == typename, (variables, result)
        assert result["message"]
    assert await snapshot(ctx) == before


VARIABLES = """{ organization(slug: "acme") {
  variables { ...V } folder(path: "prod") { variables { ...V } } stack(slug: "net") { variables { ...V } } } }
fragment V on Variable { name value sensitive kind updatedAt }"""

SET_VARIABLE = """mutation($name: String!, $value: JSON!, $sensitive: Boolean!, $kind: VariableKind!, $folder: String, $stack: String) {
  setVariable(org: "acme", name: $name, value: $value, sensitive: $sensitive, kind: $kind, folder: $folder, stack: $stack) {
    __typename ... on Variable { name value sensitive kind } ... on Error { code message } ... on InvalidInputError { field }
  } }"""


async def test_variables_at_every_level_and_sensitive_values_are_never_readable(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, stack: str
) -> None:
    secret = "pa55-w0rd-never-shown"
    responses = []

    async def set_variable(**variables: Any) -> dict[str, Any]:
        defaults = {"sensitive": False, "kind": "TERRAFORM"}
        response = await client.post(
            "/graphql",
            json={"query": SET_VARIABLE, "variables": {**defaults, **variables}},
            headers=tenant.headers,
        )
        responses.append(response.text)
        return response.json()["data"]["setVariable"]  # type: ignore[no-any-return]

    assert await set_variable(name="region", value="eu-west-1") == {
        "__typename": "Variable", "name": "region", "value": "eu-west-1", "sensitive": False, "kind": "TERRAFORM",
    }  # fmt: skip
    assert (await set_variable(name="db_password", value=secret, sensitive=True))["value"] is None
    # A value reads back as the JSON value it was set as: 3, not "3".
    assert (await set_variable(name="count", value=3, folder="prod"))["value"] == 3
    assert (await set_variable(name="TF_LOG", value="info", kind="ENV", stack="net"))["kind"] == "ENV"
    assert (await set_variable(name="token", value=secret, sensitive=True, stack="net"))["value"] is None

    read = await client.post("/graphql", json={"query": VARIABLES}, headers=tenant.headers)
    responses.append(read.text)
    org = read.json()["data"]["organization"]
    assert [(v["name"], v["value"], v["sensitive"]) for v in org["variables"]] == [
        ("db_password", None, True), ("region", "eu-west-1", False),
    ]  # fmt: skip
    assert [(v["name"], v["value"]) for v in org["folder"]["variables"]] == [("count", 3)]
    assert [(v["name"], v["value"], v["kind"]) for v in org["stack"]["variables"]] == [
        ("TF_LOG", "info", "ENV"), ("token", None, "TERRAFORM"),
    ]  # fmt: skip
    # Turning a value sensitive hides it from then on.
    assert (await set_variable(name="region", value="eu-west-1", sensitive=True))["value"] is None
    assert all(secret not in text for text in responses)

    before = await snapshot(ctx)
    for variables, typename, field in [
        ({"name": "1bad", "value": "x"}, "InvalidInputError", "name"),
        ({"name": "ok", "value": {"a": 1}, "kind": "ENV"}, "InvalidInputError", "value"),
        ({"name": "ok", "value": [1, 2], "kind": "ENV"}, "InvalidInputError", "value"),
        ({"name": "ok", "value": "x", "folder": "nope"}, "NotFoundError", None),
    ]:
        result = await set_variable(**variables)
        assert result["__typename"] == typename and result.get("field") == field, result
    assert await snapshot(ctx) == before

    delete = """mutation($name: String!, $stack: String) { deleteVariable(org: "acme", name: $name, stack: $stack) {
        __typename ... on DeletedVariable { name } ... on Error { code } } }"""
    assert (await data(client, tenant, delete, name="token", stack="net"))["deleteVariable"] == {
        "__typename": "DeletedVariable", "name": "token",
    }  # fmt: skip
    again = (await data(client, tenant, delete, name="token", stack="net"))["deleteVariable"]
    assert again == {"__typename": "NotFoundError", "code": "not_found"}


# Runs: mutations and their typed failures ------------------------------------------------------

APPROVE = """mutation($id: ID!, $ack: [String!]) { approveRun(org: "acme", runId: $id, acknowledged: $ack) {
  __typename
  ... on Run { status approval { approvedBy approvedAt acknowledged confirmDestructive } steps { name status }
               changes { groups { changes { address state } } } }
  ... on Error { code message }
  ... on InvalidStatusError { status }
  ... on AcknowledgementRequiredError { missing }
} }"""
DISCARD = """mutation($id: ID!) { discardRun(org: "acme", runId: $id) {
  __typename ... on Run { status } ... on Error { code message } ... on InvalidStatusError { status } } }"""
CANCEL = """mutation($id: ID!) { cancelRun(org: "acme", runId: $id) {
  __typename ... on Run { status } ... on Error { code message } ... on InvalidStatusError { status } } }"""


async def awaiting_run(
    ctx: Context, tenant: Tenant, stack: str, plan: dict[str, Any], *, confirm: bool
) -> str:
    async with ctx.unit() as unit:
        actor = await accounts.authenticate(unit.session, tenant.token)
        org = await accounts.org_for(unit.session, actor, tenant.org)
        await unit.session.execute(
            update(Organization).where(Organization.id == org.id).values(confirm_destructive=confirm)
        )
    run_id = await start(ctx, tenant.token, ORG, stack, "apply")
    assert await plan_run(ctx, plan) == {run_id: "awaiting_approval"}
    return run_id


async def test_approve_refuses_missing_acknowledgements_with_the_list_then_records_them(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, stack: str
) -> None:
    plan = synthetic_plan(creates=1, replaces=1, deletes=1)
    run_id = await awaiting_run(ctx, tenant, stack, plan, confirm=True)
    before = await snapshot(ctx)
    for ack, missing in [
        (None, ["terraform_data.repl0", "terraform_data.gone0"]),
        (["terraform_data.gone0", "terraform_data.new0"], ["terraform_data.repl0"]),
    ]:
        refused = (await data(client, tenant, APPROVE, id=run_id, ack=ack))["approveRun"]
        assert refused["__typename"] == "AcknowledgementRequiredError"
        assert refused["code"] == "acknowledgement_required"
        assert sorted(refused["missing"]) == sorted(missing)
        assert all(address in refused["message"] for address in missing)
    assert await snapshot(ctx) == before

    approved = (
        await data(client, tenant, APPROVE, id=run_id, ack=["terraform_data.repl0", "terraform_data.gone0"])
    )["approveRun"]
    assert approved["__typename"] == "Run" and approved["status"] == "APPLY_QUEUED"
    assert approved["approval"]["approvedBy"] == tenant.email and approved["approval"]["approvedAt"]
    assert sorted(approved["approval"]["acknowledged"]) == ["terraform_data.gone0", "terraform_data.repl0"]
    assert ("approval", "DONE") in [(s["name"], s["status"]) for s in approved["steps"]]
    assert {c["state"] for g in approved["changes"]["groups"] for c in g["changes"]} == {"PENDING"}

    twice = (await data(client, tenant, APPROVE, id=run_id, ack=[]))["approveRun"]
    assert twice == {
        **twice,
        "__typename": "InvalidStatusError",
        "code": "invalid_status",
        "status": "APPLY_QUEUED",
    }
    canceled = (await data(client, tenant, CANCEL, id=run_id))["cancelRun"]
    assert canceled == {"__typename": "Run", "status": "CANCELED"}


async def test_discard_and_cancel_follow_the_lifecycle(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, stack: str
) -> None:
    run_id = await awaiting_run(ctx, tenant, stack, synthetic_plan(), confirm=False)
    queued = await start(ctx, tenant.token, ORG, stack, "plan")

    not_awaiting = (await data(client, tenant, DISCARD, id=queued))["discardRun"]
    assert not_awaiting["__typename"] == "InvalidStatusError" and not_awaiting["status"] == "QUEUED"
    awaiting = (await data(client, tenant, CANCEL, id=run_id))["cancelRun"]
    assert awaiting["__typename"] == "InvalidStatusError" and awaiting["status"] == "AWAITING_APPROVAL"
    assert "discard it instead" in awaiting["message"]

    assert (await data(client, tenant, DISCARD, id=run_id))["discardRun"] == {
        "__typename": "Run",
        "status": "DISCARDED",
    }
    assert (await data(client, tenant, CANCEL, id=queued))["cancelRun"] == {
        "__typename": "Run",
        "status": "CANCELED",
    }
    assert await status_of(ctx, queued) == "canceled"


async def test_cancel_refuses_a_running_run(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, stack: str
) -> None:
    run_id = await start(ctx, tenant.token, ORG, stack, "apply")
    await dispatch.claim_plans(ctx)
    before = await snapshot(ctx)
    refused = (await data(client, tenant, CANCEL, id=run_id))["cancelRun"]
    assert refused["__typename"] == "InvalidStatusError" and refused["code"] == "invalid_status"
    assert refused["status"] == "PLANNING" and "corrupt the state" in refused["message"]
    assert await snapshot(ctx) == before


async def test_start_run_refusals_are_typed(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, stack: str
) -> None:
    before = await snapshot(ctx)
    result = await data(client, tenant, START, org=ORG, stack="nope", type="PLAN")
    assert result["startRun"]["__typename"] == "NotFoundError"
    result = await data(client, tenant, START, org="no-such-org", stack=stack, type="PLAN")
    assert result["startRun"]["__typename"] == "NotFoundError"
    assert await snapshot(ctx) == before


async def test_create_refusals_are_typed(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, stack: str
) -> None:
    create = """mutation($input: CreateStackInput!) { createStack(org: "acme", input: $input) {
        __typename ... on Error { code message } ... on AlreadyExistsError { field } ... on InvalidInputError { field } } }"""
    before = await snapshot(ctx)
    for stack_input, typename, field in [
        ({"slug": "net", "repository": "file:///x"}, "AlreadyExistsError", "slug"),
        ({"slug": "Bad Slug", "repository": "file:///x"}, "InvalidInputError", "slug"),
        ({"slug": "ok", "repository": "  "}, "InvalidInputError", "repository"),
        ({"slug": "ok", "repository": "file:///x", "folder": "../up"}, "InvalidInputError", "folder"),
        ({"slug": "ok", "repository": "file:///x", "path": "/abs"}, "InvalidInputError", "path"),
        (
            {"slug": "ok", "repository": "file:///x", "gitHttpsToken": ""},
            "InvalidInputError",
            "gitHttpsToken",
        ),
    ]:
        result = (await data(client, tenant, create, input=stack_input))["createStack"]
        assert (result["__typename"], result.get("field")) == (typename, field), result
    folder = """mutation($path: String!) { createFolder(org: "acme", path: $path) {
        __typename ... on InvalidInputError { field } } }"""
    assert (await data(client, tenant, folder, path="a/../b"))["createFolder"] == {
        "__typename": "InvalidInputError", "field": "path",
    }  # fmt: skip
    assert await snapshot(ctx) == before


# Bad input and isolation ----------------------------------------------------------------------


async def test_another_organizations_ids_are_not_found_and_nothing_leaks(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, stack: str
) -> None:
    other = await make_tenant(ctx, "globex", "grace@example.com")
    await make_stack(ctx, other, {"slug": "secret-stack", "repository": "file:///globex-private"})
    their_run = await start(ctx, other.token, "globex", "secret-stack", "apply")
    assert await plan_run(ctx, synthetic_plan()) == {their_run: "awaiting_approval"}
    before = await snapshot(ctx)
    texts = []
    for query, variables in [
        ('query($id: ID!) { organization(slug: "acme") { run(id: $id) { id status } } }', {"id": their_run}),
        ('{ organization(slug: "globex") { stacks { slug } activeRuns { id } } }', {}),
        ('{ organization(slug: "acme") { stack(slug: "secret-stack") { slug } } }', {}),
        (APPROVE, {"id": their_run, "ack": []}),
        (DISCARD, {"id": their_run}),
        (CANCEL, {"id": their_run}),
        ('mutation($id: ID!) { approveRun(org: "globex", runId: $id) { __typename } }', {"id": their_run}),
        ('mutation { startRun(org: "globex", stack: "secret-stack", type: APPLY) { __typename } }', {}),
        ('mutation { createFolder(org: "globex", path: "x") { __typename } }', {}),
        ('mutation { setVariable(org: "globex", name: "x", value: "y") { __typename } }', {}),
        ('mutation { updateSettings(org: "globex", input: {requireApproval: false}) { __typename } }', {}),
    ]:
        response = await client.post(
            "/graphql", json={"query": query, "variables": variables}, headers=tenant.headers
        )
        assert response.status_code == 200
        body = response.json()
        assert not body.get("errors"), body
        texts.append(response.text)
        found = [v for v in body["data"].values()]
        assert all(v is None or v.get("__typename") == "NotFoundError" or v.get("run") is None
                   or v.get("stack") is None for v in found), body  # fmt: skip
    for text in texts:
        assert (
            "secret-stack" not in text
            and "globex-private" not in text
            and their_run not in text.replace(f"No run '{their_run}'", "")
        )
    assert await snapshot(ctx) == before


async def test_bad_input_gets_errors_without_traces(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    bad_token = tenant.headers | {"Authorization": "Bearer fl_not-a-token"}
    run_by_id = 'query($id: ID!) { organization(slug: "acme") { run(id: $id) { id } } }'
    refused: list[tuple[dict[str, str], str, dict[str, Any], str | None]] = [
        ({}, "{ viewer { email } }", {}, "unauthenticated"),
        (
            {},
            'mutation { startRun(org: "acme", stack: "net", type: PLAN) { __typename } }',
            {},
            "unauthenticated",
        ),
        (bad_token, "{ organizations { slug } }", {}, "unauthenticated"),
        (
            tenant.headers,
            'mutation { startRun(org: "acme", stack: "net", type: "plan") { __typename } }',
            {},
            None,
        ),
        (
            tenant.headers,
            'mutation($t: RunType!) { startRun(org: "acme", stack: "net", type: $t) { __typename } }',
            {"t": "sideways"},
            None,
        ),
        (tenant.headers, '{ organization(slug: "acme") { stack(slug: 7) { slug } } }', {}, None),
        (tenant.headers, '{ organization(slug: "acme") { nope } }', {}, None),
        (tenant.headers, "{ organization(slug: ", {}, None),
        (tenant.headers, run_by_id, {"id": {"x": 1}}, None),
        (tenant.headers, run_by_id, {}, None),
        (tenant.headers, run_by_id, {"id": "\x00"}, "invalid_request"),
        (tenant.headers, '{ organization(slug: "a\\u0000") { slug } }', {}, "invalid_request"),
    ]
    for headers, query, variables, code in refused:
        response = await client.post(
            "/graphql", json={"query": query, "variables": variables}, headers=headers
        )
        assert response.status_code in (200, 400), response.text
        assert "Traceback" not in response.text and 'File "' not in response.text
        body = response.json()
        assert body["errors"] and not body.get("data"), body
        if code:
            assert [e["extensions"]["code"] for e in body["errors"]] == [code]
    # Unknown ids of any shape are simply not there.
    for run_id in ("5", "x" * 5000, "'; DROP TABLE runs; --", r"\u0000"):
        assert await data(client, tenant, run_by_id, id=run_id) == {"organization": {"run": None}}
    for raw in (b"not json", b"[]", b'{"query": 5}'):
        response = await client.post(
            "/graphql", content=raw, headers={**tenant.headers, "Content-Type": "application/json"}
        )
        assert response.status_code == 400 and "Traceback" not in response.text


async def test_an_unexpected_failure_is_masked_and_logged(
    client: httpx.AsyncClient,
    tenant: Tenant,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken(*_: Any) -> Any:
        raise RuntimeError("connection to 10.0.0.7 failed: password=s3cr3t")

    monkeypatch.setattr(accounts, "orgs_of", broken)
    response = await client.post(
        "/graphql", json={"query": "{ organizations { slug } }"}, headers=tenant.headers
    )
    assert response.json()["errors"] == [
        {"message": "Unexpected error.", "locations": [{"line": 1, "column": 3}], "path": ["organizations"],
         "extensions": {"code": "internal_error"}},
    ]  # fmt: skip
    assert "s3cr3t" not in response.text and "10.0.0.7" not in response.text
    assert "s3cr3t" in caplog.text  # for the operator, in the server's log


def test_every_expected_failure_has_a_typed_result_except_authentication() -> None:
    import firstlume.app  # noqa: F401  (every module imported: the subclasses below are all of them)
    from firstlume.api.graphql import errors as typed_errors
    from firstlume.db.models import StateHead
    from firstlume.domain import errors as domain
    from firstlume.services.policies.engine import PolicyCompileError
    from firstlume.services.state.locks import LockHeldByOther, StateLocked
    from support.error_codes import error_classes

    head = StateHead(lock_id="L1", lock_holder="ada@example.com", lock_info={"ID": "L1"})
    samples = {
        domain.AcknowledgementRequired: domain.AcknowledgementRequired(["a.b"]),
        domain.InvalidTransition: domain.InvalidTransition("queued", "applied"),
        domain.InvalidStatus: domain.InvalidStatus("message", status="queued"),
        LockHeldByOther: LockHeldByOther(head, "L2"),
        StateLocked: StateLocked(head, "it is held"),
        PolicyCompileError: PolicyCompileError("unexpected token", 3, 7),
    }
    for cls in error_classes():  # all of them, whatever this test process imported before
        if cls.__module__.startswith("firstlume.api"):
            continue
        error = samples.get(cls) or cls("message", field="some_field")
        result = typed_errors.as_error_type(error)
        if issubclass(cls, (domain.Unauthenticated, domain.Forbidden, domain.StorageUnavailable)):
            # Authentication and authorization refusals (a role, an approver rule) are GraphQL
            # errors with their code, for any operation.
            assert result is None
            continue
        assert isinstance(result, typed_errors.Error), cls
        assert (result.code, result.message) == (error.code, error.message)
    assert isinstance(typed_errors.as_error_type(domain.StatusChanged("x")), typed_errors.ConflictError)
    assert (
        typed_errors.as_error_type(domain.InvalidRequest("x", field="git_https_token")).field
        == "gitHttpsToken"
    )  # type: ignore[union-attr]
