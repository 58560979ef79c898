"""A comment given with an approval or a discard (issue 48, item 11): it is on the run (REST and
GraphQL), in the notifications of the run's later changes, and in the audit entry; a comment that
is not a string, or is too long, is refused with a 422 that names the field, and the run is left
as it was. In process, on both databases, with a real HTTP receiver for the notifications."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import update

from conftest import Tenant, make_stack
from firstlume.db.models import Run
from firstlume.services.commands import MAX_RUN_COMMENT
from firstlume.services.context import Context
from support.runs import CREATE_ONE, plan_run, start, status_of
from support.waiting import until
from support.webhooks import Receiver, webhook_receiver
from test_graphql_api import data
from test_notifications import notification_settings

COMMENT = "CAB-1234: approved in the change board, window 14:00–15:00 UTC"

RUN_COMMENT = """query($org: String!, $id: ID!) {
  organization(slug: $org) { run(id: $id) { status comment approval { approvals { by comment } } } }
}"""
APPROVE = """mutation($org: String!, $id: ID!, $comment: String) {
  approveRun(org: $org, runId: $id, comment: $comment) {
    __typename ... on Run { status comment } ... on InvalidInputError { code message field }
  }
}"""
DISCARD = """mutation($org: String!, $id: ID!, $comment: String) {
  discardRun(org: $org, runId: $id, comment: $comment) {
    __typename ... on Run { status comment } ... on InvalidInputError { code message field }
  }
}"""


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Any:
    return notification_settings(database_url, tmp_path)


@pytest.fixture
def receiver() -> Any:
    with webhook_receiver() as found:
        yield found


async def waiting_run(ctx: Context, client: httpx.AsyncClient, tenant: Tenant, stack: str) -> str:
    await make_stack(ctx, tenant, {"slug": stack, "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, tenant.org, stack, "apply")
    assert await plan_run(ctx, CREATE_ONE) == {run_id: "awaiting_approval"}
    return run_id


async def audit_details(client: httpx.AsyncClient, tenant: Tenant, action: str) -> list[dict[str, Any]]:
    response = await client.get(f"/api/v1/orgs/{tenant.org}/audit?action={action}", headers=tenant.headers)
    assert response.status_code == 200, response.text
    return [entry["details"] for entry in response.json()["entries"]]


async def listen(client: httpx.AsyncClient, tenant: Tenant, receiver: Receiver, events: list[str]) -> None:
    body = {"name": "ops", "url": receiver.url, "events": events}
    response = await client.post(
        f"/api/v1/orgs/{tenant.org}/notifications", json=body, headers=tenant.headers
    )
    assert response.status_code == 201, response.text


async def test_an_approval_comment_is_on_the_run_in_the_audit_and_in_the_notification(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context, receiver: Receiver
) -> None:
    run_id = await waiting_run(ctx, client, tenant, "network")
    await listen(client, tenant, receiver, ["run.canceled"])
    response = await client.post(
        f"/api/v1/orgs/{tenant.org}/runs/{run_id}/approve",
        content=json.dumps({"acknowledged": [], "comment": f"  {COMMENT}\n"}),
        headers=tenant.headers,
    )
    assert response.status_code == 200, response.text
    # Stored trimmed, beside the approval.
    assert (response.json()["status"], response.json()["comment"]) == ("apply_queued", COMMENT)
    got = await client.get(f"/api/v1/orgs/{tenant.org}/runs/{run_id}", headers=tenant.headers)
    assert got.json()["comment"] == COMMENT
    run = (await data(client, tenant, RUN_COMMENT, org=tenant.org, id=run_id))["organization"]["run"]
    assert run["comment"] == COMMENT
    [details] = await audit_details(client, tenant, "run.approve")
    assert details == {"number": 1, "acknowledged": [], "comment": COMMENT}
    # The run's next notification (here: its apply canceled) still says why it was approved.
    canceled = await client.post(f"/api/v1/orgs/{tenant.org}/runs/{run_id}/cancel", headers=tenant.headers)
    assert canceled.status_code == 200, canceled.text
    await until(lambda: len(receiver.received) >= 1, 20, "the run.canceled delivery")
    assert receiver.received[0].json["run"]["comment"] == COMMENT


async def test_a_discard_comment_reaches_graphql_the_audit_and_both_notification_formats(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context, receiver: Receiver
) -> None:
    run_id = await waiting_run(ctx, client, tenant, "network")
    for format in ("json", "slack"):
        body = {
            "name": format,
            "url": f"{receiver.url}/{format}",
            "events": ["run.discarded"],
            "format": format,
        }
        created = await client.post(
            f"/api/v1/orgs/{tenant.org}/notifications", json=body, headers=tenant.headers
        )
        assert created.status_code == 201, created.text
    result = (await data(client, tenant, DISCARD, org=tenant.org, id=run_id, comment="Wrong branch"))[
        "discardRun"
    ]
    assert result == {"__typename": "Run", "status": "DISCARDED", "comment": "Wrong branch"}
    [details] = await audit_details(client, tenant, "run.discard")
    assert details == {"number": 1, "comment": "Wrong branch"}
    await until(lambda: len(receiver.received) >= 2, 20, "the two deliveries")
    by_path = {r.path: r.json for r in receiver.received}
    assert by_path["/hook/json"]["run"]["comment"] == "Wrong branch"
    assert "> “Wrong branch”" in by_path["/hook/slack"]["text"]


async def test_without_a_comment_nothing_is_recorded_and_a_blank_one_is_none(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    run_id = await waiting_run(ctx, client, tenant, "network")
    result = (await data(client, tenant, APPROVE, org=tenant.org, id=run_id, comment="   "))["approveRun"]
    assert result == {"__typename": "Run", "status": "APPLY_QUEUED", "comment": None}
    [details] = await audit_details(client, tenant, "run.approve")
    assert "comment" not in details


@pytest.mark.parametrize(
    ("comment", "message"),
    [
        ("x" * (MAX_RUN_COMMENT + 1), f"'comment' must be at most {MAX_RUN_COMMENT} characters."),
        (42, "'comment' must be a string"),
        (["ok"], "'comment' must be a string"),
    ],
)
async def test_a_bad_comment_is_a_422_naming_the_field_and_the_run_still_waits(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context, comment: Any, message: str
) -> None:
    run_id = await waiting_run(ctx, client, tenant, "network")
    for action in ("approve", "discard"):
        response = await client.post(
            f"/api/v1/orgs/{tenant.org}/runs/{run_id}/{action}",
            content=json.dumps({"comment": comment}),
            headers=tenant.headers,
        )
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert (error["code"], error["field"]) == ("invalid_request", "comment")
        assert error["message"].startswith(message), error["message"]
    assert await status_of(ctx, run_id) == "awaiting_approval"
    assert await audit_details(client, tenant, "run.approve,run.discard") == []


async def test_graphql_refuses_a_too_long_comment_as_a_typed_error(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    run_id = await waiting_run(ctx, client, tenant, "network")
    long = "x" * (MAX_RUN_COMMENT + 1)
    for mutation, name in ((APPROVE, "approveRun"), (DISCARD, "discardRun")):
        result = (await data(client, tenant, mutation, org=tenant.org, id=run_id, comment=long))[name]
        assert result["__typename"] == "InvalidInputError"
        assert (result["code"], result["field"]) == ("invalid_request", "comment")
        assert result["message"] == f"'comment' must be at most {MAX_RUN_COMMENT} characters."
    assert await status_of(ctx, run_id) == "awaiting_approval"


async def test_each_of_several_approvals_keeps_its_own_comment(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context
) -> None:
    """A run its approval policies give two approvals: the first one's comment is on its entry
    and in its audit row; the run's `comment` is the deciding approval's."""
    run_id = await waiting_run(ctx, client, tenant, "network")
    async with ctx.db.transaction() as session:
        await session.execute(update(Run).where(Run.id == run_id).values(approvals_required=2))
    first = await data(client, tenant, APPROVE, org=tenant.org, id=run_id, comment="looks fine")
    assert first["approveRun"] == {"__typename": "Run", "status": "AWAITING_APPROVAL", "comment": None}
    run = (await data(client, tenant, RUN_COMMENT, org=tenant.org, id=run_id))["organization"]["run"]
    assert run["approval"]["approvals"] == [{"by": tenant.email, "comment": "looks fine"}]
    [details] = await audit_details(client, tenant, "run.approve")
    assert details["comment"] == "looks fine" and details["approvals"] == "1 of 2"
