"""Issue 18: the product, its documentation and its messages say the same thing.

- A refusal because of the run's status is 409 `invalid_status` for cancel, approve and discard
  alike, with the current status in the body and one sentence of message.
- A required field left out or sent as null says "'<field>' is required".
- Every GET route honours the query parameters it documents and refuses any other with 422
  naming it; the table below must list every GET route the app serves.

(The README's quick start is run against the demo in tests/e2e/test_readme_quick_start_served.py; the error
code table in tests/test_error_codes.py; the log and failed-resource behaviour with real Terraform
in tests/e2e/test_execution.py and tests/e2e/test_execution_integrity.py.)
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from conftest import Tenant, make_stack
from firstlume.app import create_app
from firstlume.db.models import Run
from firstlume.services import dispatch
from firstlume.services.context import Context
from firstlume.settings import Settings
from support.runs import plan_run, report, start
from support.snapshot import snapshot

O = "/api/v1/orgs/acme"
PLAN = {
    "format_version": "1.2",
    "resource_changes": [
        {
            "address": "terraform_data.a",
            "mode": "managed",
            "type": "terraform_data",
            "name": "a",
            "change": {
                "actions": ["create"],
                "before": None,
                "after": {"input": "x"},
                "after_unknown": {},
                "before_sensitive": False,
                "after_sensitive": {},
            },
        }
    ],
}


def one_sentence(message: str) -> bool:
    """One sentence: a capital first, a period last, and no other sentence end or chained
    clause ("…: it is …: do …") in between."""
    body = message[:-1]
    return (
        message[:1].isupper()
        and message.endswith(".")
        and not re.search(r"[.!?]\s", body)
        and body.count(": ") == 0
    )


# Refusals because of the run's status ----------------------------------------------------------


@pytest.fixture
async def runs_by_status(ctx: Context, tenant: Tenant) -> dict[str, str]:
    """A run in each of: queued, planning, awaiting_approval, applied (status → run id)."""
    for slug in ("one", "two", "three"):
        await make_stack(ctx, tenant, {"slug": slug, "repository": "file:///repo"})
    awaiting = await start(ctx, tenant.token, "acme", "one", "apply")
    assert await plan_run(ctx, PLAN) == {awaiting: "awaiting_approval"}
    planning = await start(ctx, tenant.token, "acme", "two", "apply")
    await dispatch.claim_plans(ctx)
    applied = await start(ctx, tenant.token, "acme", "three", "plan")
    async with ctx.unit() as unit:
        await unit.session.execute(update(Run).where(Run.id == applied).values(status="applied"))
    queued = await start(ctx, tenant.token, "acme", "three", "apply")
    return {"queued": queued, "planning": planning, "awaiting_approval": awaiting, "applied": applied}


REFUSED = [
    # (action, status of the run, words the sentence must hold)
    ("cancel", "awaiting_approval", "discard it instead"),
    ("cancel", "planning", "corrupt the state"),
    ("cancel", "applied", "already finished"),
    ("approve", "queued", "only a run awaiting approval can be approved"),
    ("approve", "applied", "only a run awaiting approval can be approved"),
    ("discard", "planning", "only a run awaiting approval can be discarded"),
    ("discard", "applied", "only a run awaiting approval can be discarded"),
]


@pytest.mark.parametrize(("action", "status", "words"), REFUSED)
async def test_every_refusal_for_the_runs_status_is_invalid_status_with_the_status_in_one_sentence(
    client: httpx.AsyncClient,
    ctx: Context,
    tenant: Tenant,
    runs_by_status: dict[str, str],
    action: str,
    status: str,
    words: str,
) -> None:
    run_id = runs_by_status[status]
    before = await snapshot(ctx)
    response = await client.post(f"{O}/runs/{run_id}/{action}", headers=tenant.headers)
    assert response.status_code == 409, response.text
    error = response.json()["error"]
    assert set(error) == {"code", "message", "status"}
    assert (error["code"], error["status"]) == ("invalid_status", status)
    assert error["message"].startswith(f"Run {run_id} is {status};"), error["message"]
    assert words in error["message"] and one_sentence(error["message"]), error["message"]
    assert await snapshot(ctx) == before


def test_the_one_sentence_check_refuses_the_old_cancel_message() -> None:
    old = (
        "Run r1 is awaiting_approval and cannot be canceled: it is awaiting approval: discard it "
        "instead. Only queued and apply_queued runs can be canceled."
    )
    assert not one_sentence(old)
    assert one_sentence("Run r1 is queued; only a run awaiting approval can be approved.")


# Required fields -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "field", "message"),
    [
        ("/stacks", '{"slug": "ok"}', "repository", "'repository' is required."),
        ("/stacks", '{"slug": "ok", "repository": null}', "repository", "'repository' is required."),
        ("/stacks", '{"repository": "file:///r", "slug": null}', "slug", "'slug' is required."),
        ("/stacks/net/runs", '{"type": null}', "type", "'type' is required: one of plan, apply, destroy, drift."),
        ("/folders", '{"path": null}', "path", "'path' is required: a folder path such as \"prod/eu\"."),
    ],
)  # fmt: skip
async def test_a_required_field_left_out_or_null_is_said_to_be_required(
    client: httpx.AsyncClient,
    ctx: Context,
    tenant: Tenant,
    path: str,
    body: str,
    field: str,
    message: str,
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    response = await client.post(O + path, content=body, headers=tenant.headers)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"], error["message"]) == ("invalid_request", field, message)
    assert "got null" not in error["message"]


# Query parameters of every GET route ----------------------------------------------------------

# Every GET route the app serves under /api/v1 → the query parameters it documents, with values
# it must accept. A route added without a line here fails the first test below.
GET_ROUTES: dict[str, dict[str, str]] = {
    "/api/v1/orgs": {},
    "/api/v1/orgs/{org}/stacks": {},
    "/api/v1/orgs/{org}/stacks/{stack}": {},
    "/api/v1/orgs/{org}/folders": {},
    "/api/v1/orgs/{org}/settings": {},
    "/api/v1/orgs/{org}/variables": {},
    "/api/v1/orgs/{org}/stacks/{stack}/settings": {},
    "/api/v1/orgs/{org}/stacks/{stack}/variables": {},
    "/api/v1/orgs/{org}/folders/{folder:path}/settings": {},
    "/api/v1/orgs/{org}/folders/{folder:path}/variables": {},
    "/api/v1/orgs/{org}/stacks/{stack}/runs": {
        "status": "failed,queued", "type": "plan", "trigger": "manual", "limit": "5", "before": "9",
    },
    "/api/v1/orgs/{org}/runs": {"active": "true", "status": "queued", "type": "plan", "trigger": "manual"},
    "/api/v1/orgs/{org}/runs/{run}": {},
    "/api/v1/orgs/{org}/runs/{run}/changes": {},
    "/api/v1/orgs/{org}/runs/{run}/logs": {"step": "checkout"},
    "/api/v1/orgs/{org}/stacks/{stack}/state": {},
    "/api/v1/orgs/{org}/stacks/{stack}/state/lock": {},
    "/api/v1/orgs/{org}/stacks/{stack}/state/versions": {"limit": "5", "before": "9"},
    "/api/v1/orgs/{org}/stacks/{stack}/state/versions/{serial:int}": {},
    "/api/v1/orgs/{org}/stacks/{stack}/state/outputs": {},
    "/api/v1/orgs/{org}/stacks/{stack}/units/{unit:path}/state": {},
    "/api/v1/orgs/{org}/stacks/{stack}/units/{unit:path}/state/lock": {},
    "/api/v1/orgs/{org}/stacks/{stack}/units/{unit:path}/state/versions": {"limit": "5", "before": "9"},
    "/api/v1/orgs/{org}/stacks/{stack}/units/{unit:path}/state/versions/{serial:int}": {},
    "/api/v1/orgs/{org}/stacks/{stack}/units/{unit:path}/state/outputs": {},
    "/api/v1/orgs/{org}/members": {},
    "/api/v1/orgs/{org}/tokens": {"member": "ada@example.com"},
    "/api/v1/orgs/{org}/audit": {"action": "run.start", "limit": "5"},
    "/api/v1/orgs/{org}/drift": {},
    "/api/v1/orgs/{org}/stacks/{stack}/drift": {"limit": "5", "before": "9"},
    "/api/v1/orgs/{org}/git/deliveries": {"limit": "5"},
    "/api/v1/orgs/{org}/git/hosts": {},
    "/api/v1/orgs/{org}/pull-requests": {"state": "open", "stack": "net"},
    "/api/v1/orgs/{org}/notifications": {},
    "/api/v1/orgs/{org}/notifications/{id}": {},
    "/api/v1/orgs/{org}/notifications/{id}/deliveries": {"limit": "5"},
    "/api/v1/orgs/{org}/stacks/{stack}/dependencies": {},
    "/api/v1/orgs/{org}/dependency-graph": {},
    "/api/v1/orgs/{org}/policies": {},
    "/api/v1/orgs/{org}/policies/{name}": {},
    "/api/v1/orgs/{org}/sso": {},
    "/api/v1/orgs/{org}/folders/{folder:path}/grants": {},
    "/api/v1/session": {},
    "/api/v1/sso": {},
    # A deleted stack's reads: `{id}` here is no deleted stack (404), so their parameters
    # (?limit, ?before, ?unit) are taken in tests/test_deleting_things.py.
    "/api/v1/orgs/{org}/deleted-stacks": {},
    "/api/v1/orgs/{org}/deleted-stacks/{id}": {},
    "/api/v1/orgs/{org}/deleted-stacks/{id}/runs": {},
    "/api/v1/orgs/{org}/deleted-stacks/{id}/state/versions": {},
    "/api/v1/orgs/{org}/deleted-stacks/{id}/state/versions/{serial:int}": {},
    # The executor protocol's reads (a phase token; docs/executor-protocol.md).
    "/api/v1/executor/spec": {},
    "/api/v1/executor/plan": {},
    "/api/v1/executor/configuration-version": {},
}  # fmt: skip
# The sign-in's steps in the browser (services/access/oidc.py): identity providers add parameters
# of their own to the callback (iss, session_state, scope), so these take what they are given; and
# terraform login's check (services/access/cli_login.py), which takes OAuth's parameters and answers
# in OAuth's error shape (RFC 6749 §5.2), not Firstlume's.
SIGN_IN_STEPS = {"/api/v1/sso/login", "/api/v1/sso/callback", "/api/v1/cli-login/check"}


def served_get_routes(settings: Settings) -> set[str]:
    app = create_app(settings)
    return {
        route.path
        for route in app.routes
        if "GET" in (getattr(route, "methods", None) or ())
        and route.path.startswith("/api/v1")
        and "{rest:path}" not in route.path
    }


def test_the_table_lists_every_get_route_the_app_serves(settings: Settings) -> None:
    assert served_get_routes(settings) == set(GET_ROUTES) | SIGN_IN_STEPS


@pytest.fixture
async def one_of_each(ctx: Context, tenant: Tenant, client: httpx.AsyncClient) -> dict[str, str]:
    """What the routes' paths name: a stack in a folder, a run of it."""
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo", "folder": "prod"})
    run_id = await start(ctx, tenant.token, "acme", "net", "plan")
    destination = await client.post(
        "/api/v1/orgs/acme/notifications",
        json={"name": "ops", "url": "https://93.184.216.34/hook", "events": ["run.applied"]},  # never called
        headers=tenant.headers,
    )
    assert destination.status_code == 201, destination.text
    return {
        "id": destination.json()["id"],
        "org": "acme",
        "stack": "net",
        "folder:path": "prod",
        "run": run_id,
        "unit:path": "eu",
        "serial:int": "1",
        "name": "no-such-policy",
    }


def concrete(template: str, values: dict[str, str]) -> str:
    return re.sub(r"\{([^}]+)\}", lambda m: values[m.group(1)], template)


@pytest.mark.parametrize("template", sorted(GET_ROUTES))
async def test_every_get_route_refuses_an_unknown_query_parameter_naming_it(
    client: httpx.AsyncClient, tenant: Tenant, one_of_each: dict[str, str], template: str
) -> None:
    path = concrete(template, one_of_each)
    for query in (
        "?colour=red",
        "?" + "&".join([*(f"{k}={v}" for k, v in GET_ROUTES[template].items()), "colour=red"]),
    ):
        response = await client.get(path + query, headers=tenant.headers)
        assert response.status_code == 422, (path + query, response.text)
        error = response.json()["error"]
        assert (error["code"], error["field"]) == ("invalid_request", "colour")
        assert "'colour'" in error["message"]


@pytest.mark.parametrize("template", sorted(t for t in GET_ROUTES if GET_ROUTES[t]))
async def test_every_get_route_takes_the_parameters_it_documents(
    client: httpx.AsyncClient, tenant: Tenant, one_of_each: dict[str, str], template: str
) -> None:
    path = concrete(template, one_of_each)
    query = "&".join(f"{k}={v}" for k, v in GET_ROUTES[template].items())
    response = await client.get(f"{path}?{query}", headers=tenant.headers)
    assert response.status_code == 200, (path, query, response.text)


@pytest.mark.parametrize(
    ("template", "query", "field"),
    [
        ("/api/v1/orgs/{org}/runs/{run}/logs", "?follow=maybe", "follow"),
        ("/api/v1/orgs/{org}/runs", "?active=false", "active"),
        ("/api/v1/orgs/{org}/stacks/{stack}/runs", "?status=stuck", "status"),
        ("/api/v1/orgs/{org}/stacks/{stack}/state/versions", "?limit=0", "limit"),
    ],
)
async def test_a_documented_parameter_with_a_value_it_does_not_take_is_refused(
    client: httpx.AsyncClient,
    tenant: Tenant,
    one_of_each: dict[str, str],
    template: str,
    query: str,
    field: str,
) -> None:
    response = await client.get(concrete(template, one_of_each) + query, headers=tenant.headers)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["field"] == field


async def test_a_filter_is_honoured_not_ignored(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, one_of_each: dict[str, str]
) -> None:
    # The example: ?status=failed returned everything.
    everything = (await client.get(f"{O}/stacks/net/runs", headers=tenant.headers)).json()["runs"]
    failed = (await client.get(f"{O}/stacks/net/runs?status=failed", headers=tenant.headers)).json()["runs"]
    assert len(everything) == 1 and failed == []


# A run's error and its failed resources --------------------------------------------------------

TWO = {**PLAN, "resource_changes": [
    {**PLAN["resource_changes"][0], "address": f"terraform_data.{n}", "name": n} for n in ("first", "broken", "later")
]}  # fmt: skip
RUN_QUERY = """query($id: ID!) { organization(slug: "acme") { run(id: $id) {
  status error failedResources { count addresses } changes { nodes { address state error } } } } }"""


async def applied_with(
    client: httpx.AsyncClient,
    ctx: Context,
    tenant: Tenant,
    resources: list[dict[str, Any]],
    error: str | None,
) -> str:
    """An apply of three resources, approved, whose apply phase reports `resources` and ends
    failed with `error` (None: a failure of resources only)."""
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, "acme", "net", "apply")
    assert await plan_run(ctx, TWO) == {run_id: "awaiting_approval"}
    assert (await client.post(f"{O}/runs/{run_id}/approve", headers=tenant.headers)).status_code == 200
    [launch] = await dispatch.claim_applies(ctx)
    if resources:
        await report(ctx, launch.token, "resources", {"updates": resources})
    assert await report(ctx, launch.token, "finish", {"status": "failed", "error": error}) == "failed"
    return run_id


async def both_apis(
    client: httpx.AsyncClient, tenant: Tenant, run_id: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    rest = (await client.get(f"{O}/runs/{run_id}", headers=tenant.headers)).json()
    response = await client.post(
        "/graphql", json={"query": RUN_QUERY, "variables": {"id": run_id}}, headers=tenant.headers
    )
    body = response.json()
    assert "errors" not in body, body
    return rest, body["data"]["organization"]["run"]


async def test_a_failed_resource_is_counted_apart_and_leaves_the_runs_error_null(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    run_id = await applied_with(
        client,
        ctx,
        tenant,
        [
            {"address": "terraform_data.first", "state": "done"},
            {"address": "terraform_data.broken", "state": "failed", "error": "Error: the disk is full"},
        ],
        None,
    )
    rest, graphql = await both_apis(client, tenant, run_id)
    assert rest["error"] is None and graphql["error"] is None
    assert rest["failed_resources"] == {"count": 1, "addresses": ["terraform_data.broken"]}
    assert graphql["failedResources"] == {"count": 1, "addresses": ["terraform_data.broken"]}
    states = {c["address"]: c["state"] for c in graphql["changes"]["nodes"]}
    assert states == {
        "terraform_data.first": "DONE", "terraform_data.broken": "FAILED", "terraform_data.later": "NOT_APPLIED",
    }  # fmt: skip


async def test_a_run_level_failure_is_the_runs_error_and_an_apply_that_never_started_leaves_pending(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    # As Terraform refusing a stale plan: the apply ends before any resource starts.
    run_id = await applied_with(client, ctx, tenant, [], "Saved plan is stale")
    rest, graphql = await both_apis(client, tenant, run_id)
    assert rest["error"] == graphql["error"] == "Saved plan is stale"
    assert rest["failed_resources"] == {"count": 0, "addresses": []}
    assert graphql["failedResources"] == {"count": 0, "addresses": []}
    # The documented state of resources of an apply that never started: pending, never
    # not_applied (kept for "another resource failed").
    states = {c["state"] for c in graphql["changes"]["nodes"]}
    assert states == {"PENDING"}


def test_the_docs_say_what_an_apply_that_never_started_leaves() -> None:
    docs = " ".join((Path(__file__).resolve().parent.parent / "docs" / "rest-api.md").read_text().split())
    assert "If the apply never starts" in docs and "every resource stays `pending`" in docs
    assert "`not_applied` is kept for what never started because another resource failed" in docs
