"""The REST compatibility routes of docs/rest-api.md that need no execution."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from conftest import Tenant, make_stack, make_tenant
from firstlume.services import dispatch
from firstlume.services.context import Context
from support.snapshot import snapshot

O = "/api/v1/orgs/acme"


@pytest.fixture
async def stack(ctx: Context, tenant: Tenant) -> str:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo", "folder": "prod/eu"})
    return "net"


def form(body: str) -> dict[str, Any]:
    """What `curl -d` sends: the JSON text with a form Content-Type."""
    return {"content": body}


APPROVAL_RULES = ("require_approval", "confirm_destructive")


def rules(values: dict[str, Any]) -> dict[str, Any]:
    """The two settings of the documentation, out of all the inherited settings."""
    return {k: v for k, v in values.items() if k in APPROVAL_RULES}


def curl_headers(tenant: Tenant) -> dict[str, str]:
    return {**tenant.headers, "Content-Type": "application/x-www-form-urlencoded"}


async def test_create_and_read_stacks_and_folders(client: httpx.AsyncClient, tenant: Tenant) -> None:
    h = curl_headers(tenant)
    created = await client.post(
        f"{O}/stacks",
        headers=h,
        **form('{"slug": "net", "folder": "prod/eu", "repository": "file:///repo", "path": "infra/net"}'),
    )
    assert created.status_code == 201, created.text
    body = created.json()
    assert {k: body[k] for k in ("slug", "name", "folder", "repository", "branch", "path")} == {
        "slug": "net", "name": "net", "folder": "prod/eu", "repository": "file:///repo", "branch": "main", "path": "infra/net",
    }  # fmt: skip
    assert (await client.get(f"{O}/stacks/net", headers=h)).json()["slug"] == "net"
    assert [s["slug"] for s in (await client.get(f"{O}/stacks", headers=h)).json()["stacks"]] == ["net"]
    folders = (await client.get(f"{O}/folders", headers=h)).json()["folders"]
    assert [(f["path"], f["parent"]) for f in folders] == [("prod", None), ("prod/eu", "prod")]
    created_folder = await client.post(f"{O}/folders", headers=h, **form('{"path": "dev/us/east"}'))
    assert created_folder.status_code == 201 and created_folder.json()["path"] == "dev/us/east"
    again = await client.post(f"{O}/folders", headers=h, **form('{"path": "dev/us/east"}'))
    assert again.status_code == 200
    paths = [f["path"] for f in (await client.get(f"{O}/folders", headers=h)).json()["folders"]]
    assert paths == ["dev", "dev/us", "dev/us/east", "prod", "prod/eu"]
    duplicate = await client.post(
        f"{O}/stacks", headers=h, **form('{"slug": "net", "repository": "file:///x"}')
    )
    assert duplicate.status_code == 409 and duplicate.json()["error"]["code"] == "already_exists"


async def test_settings_resolve_with_origins_and_null_removes(
    client: httpx.AsyncClient, tenant: Tenant, stack: str
) -> None:
    h = curl_headers(tenant)

    async def effective(path: str) -> dict[str, tuple[bool, str]]:
        body = (await client.get(f"{O}{path}/settings", headers=h)).json()
        return {k: (v["value"], v["origin"]) for k, v in body["effective"].items() if k in APPROVAL_RULES}

    assert await effective(f"/stacks/{stack}") == {
        "require_approval": (True, "default"), "confirm_destructive": (False, "default"),
    }  # fmt: skip
    assert (
        await client.patch(f"{O}/settings", headers=h, **form('{"require_approval": false}'))
    ).status_code == 200
    assert (await effective(f"/stacks/{stack}"))["require_approval"] == (False, "organization")
    await client.patch(f"{O}/folders/prod/settings", headers=h, **form('{"confirm_destructive": true}'))
    await client.patch(f"{O}/folders/prod/eu/settings", headers=h, **form('{"require_approval": true}'))
    assert await effective(f"/stacks/{stack}") == {
        "require_approval": (True, "folder:prod/eu"), "confirm_destructive": (True, "folder:prod"),
    }  # fmt: skip
    response = await client.patch(
        f"{O}/stacks/{stack}/settings", headers=h, **form('{"confirm_destructive": false}')
    )
    assert rules(response.json()["explicit"]) == {"require_approval": None, "confirm_destructive": False}
    assert (await effective(f"/stacks/{stack}"))["confirm_destructive"] == (False, "stack")
    # null removes the level's value: the stack and the inner folder inherit again.
    await client.patch(f"{O}/stacks/{stack}/settings", headers=h, **form('{"confirm_destructive": null}'))
    await client.patch(f"{O}/folders/prod/eu/settings", headers=h, **form('{"require_approval": null}'))
    assert await effective(f"/stacks/{stack}") == {
        "require_approval": (False, "organization"), "confirm_destructive": (True, "folder:prod"),
    }  # fmt: skip
    assert await effective("/folders/prod/eu") == {
        "require_approval": (False, "organization"), "confirm_destructive": (True, "folder:prod"),
    }  # fmt: skip
    org_settings = (await client.get(f"{O}/settings", headers=h)).json()
    assert rules(org_settings["explicit"]) == {"require_approval": False, "confirm_destructive": None}


async def test_variables_sensitive_values_are_write_only(
    client: httpx.AsyncClient, tenant: Tenant, stack: str, ctx: Context
) -> None:
    h = curl_headers(tenant)
    secret = "s3cr3t-db-password-value"
    put = await client.put(
        f"{O}/variables/db_password", headers=h, **form(f'{{"value": "{secret}", "sensitive": true}}')
    )
    assert put.status_code == 200 and put.json()["value"] is None and put.json()["sensitive"] is True
    await client.put(f"{O}/folders/prod/variables/region", headers=h, **form('{"value": "eu-west-1"}'))
    await client.put(
        f"{O}/stacks/{stack}/variables/TF_LOG", headers=h, **form('{"value": "DEBUG", "kind": "env"}')
    )
    listed = await client.get(f"{O}/variables", headers=h)
    assert listed.json()["variables"][0]["name"] == "db_password" and secret not in listed.text
    folder_vars = (await client.get(f"{O}/folders/prod/variables", headers=h)).json()["variables"]
    assert [(v["name"], v["value"], v["kind"]) for v in folder_vars] == [("region", "eu-west-1", "terraform")]
    # Values are sealed at rest, sensitive or not.
    dump = repr(await snapshot(ctx))
    assert secret not in dump and "eu-west-1" not in dump
    assert (await client.delete(f"{O}/folders/prod/variables/region", headers=h)).status_code == 204
    assert (await client.delete(f"{O}/folders/prod/variables/region", headers=h)).status_code == 404
    assert (await client.get(f"{O}/folders/prod/variables", headers=h)).json()["variables"] == []


async def test_runs_start_list_get_and_cancel(
    client: httpx.AsyncClient, tenant: Tenant, stack: str, ctx: Context
) -> None:
    h = curl_headers(tenant)
    first = await client.post(f"{O}/stacks/{stack}/runs", headers=h, **form('{"type": "plan"}'))
    assert first.status_code == 201, first.text
    run = first.json()
    assert (run["status"], run["type"], run["created_by"], run["queue_position"]) == (
        "queued",
        "plan",
        tenant.email,
        1,
    )
    second = (await client.post(f"{O}/stacks/{stack}/runs", headers=h, **form('{"type": "apply"}'))).json()
    assert second["queue_position"] == 2
    listed = (await client.get(f"{O}/stacks/{stack}/runs", headers=h)).json()["runs"]
    assert [r["id"] for r in listed] == [second["id"], run["id"]]  # newest first
    assert (await client.get(f"{O}/runs/{run['id']}", headers=h)).json()["id"] == run["id"]

    await dispatch.claim_plans(ctx)  # the first run starts planning
    active = (await client.get(f"{O}/runs?active=true", headers=h)).json()["runs"]
    assert [(r["id"], r["status"], r["queue_position"]) for r in active] == [
        (run["id"], "planning", None), (second["id"], "queued", 1),
    ]  # fmt: skip

    refused = await client.post(f"{O}/runs/{run['id']}/cancel", headers=h)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "invalid_status"
    assert refused.json()["error"]["status"] == "planning"
    assert "corrupt the state" in refused.json()["error"]["message"]
    canceled = await client.post(f"{O}/runs/{second['id']}/cancel", headers=h)
    assert canceled.status_code == 200 and canceled.json()["status"] == "canceled"
    assert canceled.json()["finished_at"] is not None
    again = await client.post(f"{O}/runs/{second['id']}/cancel", headers=h)
    assert again.status_code == 409


async def test_approve_and_discard_refuse_runs_not_awaiting_approval(
    client: httpx.AsyncClient, tenant: Tenant, stack: str
) -> None:
    h = curl_headers(tenant)
    run = (await client.post(f"{O}/stacks/{stack}/runs", headers=h, **form('{"type": "apply"}'))).json()
    for action in ("approve", "discard"):
        response = await client.post(f"{O}/runs/{run['id']}/{action}", headers=h)
        assert response.status_code == 409
        error = response.json()["error"]
        assert error["code"] == "invalid_status" and "awaiting approval" in error["message"]


async def test_logs_are_plain_text(client: httpx.AsyncClient, tenant: Tenant, stack: str) -> None:
    run = (
        await client.post(
            f"{O}/stacks/{stack}/runs", headers=curl_headers(tenant), **form('{"type": "plan"}')
        )
    ).json()
    response = await client.get(f"{O}/runs/{run['id']}/logs", headers=tenant.headers)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    assert response.text == ""


BAD_REQUESTS = [
    # (method, path, body, headers override, status, code)
    ("POST", "/stacks/net/runs", '{"type": ', None, 400, "invalid_json"),
    ("POST", "/stacks/net/runs", "[1, 2]", None, 400, "invalid_json"),
    ("POST", "/stacks/net/runs", '{"type": "yolo"}', None, 422, "invalid_request"),
    ("POST", "/stacks/net/runs", '{"type": 5}', None, 422, "invalid_request"),
    ("POST", "/stacks/net/runs", "{}", None, 422, "invalid_request"),
    ("POST", "/stacks/net/runs", '{"type": "plan", "extra": 1}', None, 422, "invalid_request"),
    ("POST", "/stacks/nope/runs", '{"type": "plan"}', None, 404, "not_found"),
    ("POST", "/stacks", '{"slug": "Bad Slug!", "repository": "file:///r"}', None, 422, "invalid_request"),
    ("POST", "/stacks", '{"slug": "ok", "repository": 7}', None, 422, "invalid_request"),
    (
        "POST",
        "/stacks",
        '{"slug": "ok", "repository": "file:///r", "path": "../../etc"}',
        None,
        422,
        "invalid_request",
    ),
    (
        "POST",
        "/stacks",
        '{"slug": "ok", "repository": "file:///r", "folder": "a//.."}',
        None,
        422,
        "invalid_request",
    ),
    ("POST", "/folders", '{"path": 3}', None, 422, "invalid_request"),
    ("PATCH", "/settings", '{"require_approval": "yes"}', None, 422, "invalid_request"),
    ("PATCH", "/settings", '{"approvers": ["x"]}', None, 422, "invalid_request"),
    ("PATCH", "/folders/nowhere/settings", '{"require_approval": true}', None, 404, "not_found"),
    ("PUT", "/variables/bad-name", '{"value": "x"}', None, 422, "invalid_request"),
    ("PUT", "/variables/ok", '{"value": "x", "sensitive": "yes"}', None, 422, "invalid_request"),
    ("PUT", "/variables/ok", '{"value": "x", "kind": "file"}', None, 422, "invalid_request"),
    ("PUT", "/variables/ok", '{"sensitive": true}', None, 422, "invalid_request"),
    ("GET", "/runs/0123456789abcdef0123456789abcdef", "", None, 404, "not_found"),
    ("GET", "/runs/../../etc/passwd", "", None, 404, "not_found"),
    ("POST", "/runs/unknown-run/approve", '{"acknowledged": []}', None, 404, "not_found"),
    ("POST", "/runs/unknown-run/cancel", "", None, 404, "not_found"),
    ("GET", "/runs?active=false", "", None, 422, "invalid_request"),
    ("GET", "/stacks/net/runs?limit=lots", "", None, 422, "invalid_request"),
    (
        "POST",
        "/stacks",
        '{"slug": "ok", "name": "a\\u0000b", "repository": "file:///r"}',
        None,
        422,
        "invalid_request",
    ),
    ("GET", "/runs/%00", "", None, 404, "not_found"),
    ("GET", "/stacks/net/runs?limit=%00", "", None, 422, "invalid_request"),
    ("POST", "/stacks/net/runs", '{"type": "plan"}', {}, 401, "unauthenticated"),
    (
        "POST",
        "/stacks/net/runs",
        '{"type": "plan"}',
        {"Authorization": "Bearer fl_wrong"},
        401,
        "unauthenticated",
    ),
    ("POST", "/stacks/net/runs", '{"type": "plan"}', {"Authorization": "Basic abc"}, 401, "unauthenticated"),
]


@pytest.mark.parametrize(("method", "path", "body", "headers", "status", "code"), BAD_REQUESTS)
async def test_bad_input_gets_a_clear_4xx_and_changes_nothing(
    client: httpx.AsyncClient,
    tenant: Tenant,
    stack: str,
    ctx: Context,
    method: str,
    path: str,
    body: str,
    headers: dict[str, str] | None,
    status: int,
    code: str,
) -> None:
    before = await snapshot(ctx)
    response = await client.request(
        method, O + path, content=body, headers=tenant.headers if headers is None else headers
    )
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"].endswith((".", "}")) and len(error["message"]) > 10
    assert "Traceback" not in response.text
    assert await snapshot(ctx) == before


async def test_unknown_org_and_other_orgs_are_indistinguishable(
    client: httpx.AsyncClient, tenant: Tenant, stack: str, ctx: Context
) -> None:
    other = await make_tenant(ctx, "globex", "hank@globex.example")
    run = (
        await client.post(
            f"{O}/stacks/{stack}/runs", headers=curl_headers(tenant), **form('{"type": "plan"}')
        )
    ).json()
    before = await snapshot(ctx)
    for method, path in [
        ("GET", f"{O}/stacks"),
        ("GET", f"{O}/stacks/{stack}"),
        ("POST", f"{O}/stacks/{stack}/runs"),
        ("GET", f"{O}/runs/{run['id']}"),
        ("POST", f"{O}/runs/{run['id']}/cancel"),
        ("GET", f"{O}/settings"),
        ("PATCH", f"{O}/settings"),
        ("GET", f"{O}/variables"),
    ]:
        response = await client.request(method, path, headers=other.headers, content='{"type": "plan"}')
        assert response.status_code == 404, (method, path, response.text)
        assert response.json()["error"]["message"] == "No organization 'acme'."
        assert run["id"] not in response.text and "net" not in response.text
    # The other org's own run lookup by this id finds nothing either.
    response = await client.get(f"/api/v1/orgs/globex/runs/{run['id']}", headers=other.headers)
    assert response.status_code == 404
    unknown = await client.get("/api/v1/orgs/initech/stacks", headers=tenant.headers)
    assert unknown.status_code == 404 and unknown.json()["error"]["message"] == "No organization 'initech'."
    assert await snapshot(ctx) == before


REFUSALS = [
    # (method, path, body, field, message): one sentence a person understands, naming the field.
    ("POST", "/stacks/net/runs", '{"type": "yolo"}', "type", "'type' must be one of plan, apply, destroy, drift; got 'yolo'."),
    ("POST", "/stacks/net/runs", "{}", "type", "'type' is required: one of plan, apply, destroy, drift."),
    ("POST", "/stacks/net/runs", '{"type": null}', "type", "'type' is required: one of plan, apply, destroy, drift."),
    ("POST", "/stacks", '{"repository": "file:///r"}', "slug", "'slug' is required."),
    ("POST", "/stacks/net/runs", '{"type": "plan", "extra": 1}', "extra", "Unknown field 'extra'; a run takes commit, type."),
    ("POST", "/stacks", '{"slug": "ok"}', "repository", "'repository' is required."),
    ("POST", "/stacks", '{"slug": "ok", "repository": null}', "repository", "'repository' is required."),
    ("POST", "/stacks", '{"slug": "ok", "repository": "  "}', "repository", "'repository' must not be empty."),
    ("POST", "/stacks", '{"slug": "ok", "repository": "file:///r", "branch": "' + "b" * 300 + '"}', "branch", "'branch' must be at most 255 characters."),
    ("POST", "/stacks", '{"slug": "ok", "repository": "file:///r", "colour": "red"}', "colour", "Unknown field 'colour'; a stack takes branch, folder, git_https_token, git_ssh_key, name, path, pull_requests, repository, slug, trigger."),
    ("POST", "/folders", "{}", "path", "'path' is required: a folder path such as \"prod/eu\"."),
    ("PATCH", "/settings", '{"require_approval": "yes"}', "require_approval", "'require_approval' must be true, false or null; got a string."),
    ("PATCH", "/settings", '{"approver": ["x"]}', "approver", "Unknown setting 'approver'; the settings are approvers, confirm_destructive, drift_schedule, forbid_self_approval, policies, pull_requests_from_forks, require_approval."),
    ("PATCH", "/settings", "{}", None, "Send at least one of require_approval, confirm_destructive, drift_schedule, approvers, forbid_self_approval, policies, pull_requests_from_forks."),
    ("PUT", "/variables/ok", '{"value": "x", "kind": "file"}', "kind", "'kind' must be one of terraform, env; got 'file'."),
    ("PUT", "/variables/ok", '{"value": {"a": 1}, "kind": "env"}', "value", "An env variable's 'value' must be a string."),
    ("PUT", "/variables/ok", '{"value": "x", "name": "other"}', "name", "Unknown field 'name'; a variable takes kind, sensitive, value."),
]  # fmt: skip


@pytest.mark.parametrize(("method", "path", "body", "field", "message"), REFUSALS)
async def test_refusals_name_the_field_in_one_sentence(
    client: httpx.AsyncClient,
    tenant: Tenant,
    stack: str,
    method: str,
    path: str,
    body: str,
    field: str | None,
    message: str,
) -> None:
    response = await client.request(method, O + path, content=body, headers=tenant.headers)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error.get("field"), error["message"]) == ("invalid_request", field, message)


async def test_approval_refuses_what_is_not_a_list_of_addresses_and_discard_takes_only_a_comment(
    client: httpx.AsyncClient, tenant: Tenant, stack: str, ctx: Context
) -> None:
    run = (
        await client.post(f"{O}/stacks/{stack}/runs", headers=tenant.headers, content='{"type": "apply"}')
    ).json()
    before = await snapshot(ctx)
    for action, body, field, message in [
        ("approve", '{"acknowledged": "a"}', "acknowledged", "'acknowledged' must be a list of resource addresses (strings); got a string."),
        ("approve", '{"acknowledged": ["a", 7]}', "acknowledged", "'acknowledged' must be a list of resource addresses (strings); got a number at position 1."),
        ("discard", '{"reason": "x"}', "reason", "Unknown field 'reason'; discarding a run takes only 'comment'."),
        ("cancel", '{"force": true}', "force", "Unknown field 'force'; canceling a run takes no fields."),
    ]:  # fmt: skip
        response = await client.post(f"{O}/runs/{run['id']}/{action}", headers=tenant.headers, content=body)
        assert response.status_code == 422, response.text
        assert (response.json()["error"]["field"], response.json()["error"]["message"]) == (field, message)
    assert await snapshot(ctx) == before
