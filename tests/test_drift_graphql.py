"""Drift and notifications through GraphQL: the overview's status, since and addresses follow the
stack's drift runs (driven through the executor's services), the stack's drift history, and
destinations created, tested and refused through mutations."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import Tenant, make_stack, settings_env
from firstlume.services.context import Context
from firstlume.settings import Settings
from support.runs import plan_run, start
from support.webhooks import Receiver, webhook_receiver

NO_CHANGES: dict[str, Any] = {"format_version": "1.2", "resource_changes": []}


def drifted_plan(*names: str) -> dict[str, Any]:
    return {
        "format_version": "1.2",
        "resource_changes": [
            {
                "address": f"terraform_data.{name}",
                "mode": "managed",
                "type": "terraform_data",
                "name": name,
                "change": {
                    "actions": ["update"],
                    "before": {"input": "a"},
                    "after": {"input": "b"},
                    "after_unknown": {},
                },
            }
            for name in names
        ],
    }


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    env = settings_env(
        database_url, tmp_path / "data", FIRSTLUME_SCHEDULER="off", FIRSTLUME_ALLOW_PRIVATE_WEBHOOKS="true"
    )
    return Settings.from_env(env)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with webhook_receiver() as found:
        yield found


async def gql(client: httpx.AsyncClient, tenant: Tenant, query: str, **variables: Any) -> dict[str, Any]:
    response = await client.post(
        "/graphql",
        json={"query": query, "variables": {"org": tenant.org, **variables}},
        headers=tenant.headers,
    )
    body = response.json()
    assert response.status_code == 200 and "errors" not in body, body
    return body["data"]  # type: ignore[no-any-return]


OVERVIEW = """
query($org: String!) { organization(slug: $org) {
  drift { stackSlug status since lastRun { id number status } drifted { address action } }
  stack(slug: "net") { driftHistory(first: 10) { status run { id status trigger { kind } } drifted { address } } }
} }
"""


async def drift_check(ctx: Context, tenant: Tenant, plan: dict[str, Any]) -> str:
    run_id = await start(ctx, tenant.token, tenant.org, "net", "drift")
    assert (await plan_run(ctx, plan)) == {
        run_id: "no_changes" if not plan["resource_changes"] else "drifted"
    }
    return run_id


async def test_the_overview_follows_the_drift_runs(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    await make_stack(ctx, tenant, {"slug": "web", "repository": "file:///repo"})
    data = await gql(client, tenant, OVERVIEW)
    assert [(d["stackSlug"], d["status"], d["since"]) for d in data["organization"]["drift"]] == [
        ("net", "UNKNOWN", None),
        ("web", "UNKNOWN", None),
    ]

    clean = await drift_check(ctx, tenant, NO_CHANGES)
    first_drift = await drift_check(ctx, tenant, drifted_plan("a", "b"))
    latest = await drift_check(ctx, tenant, drifted_plan("b"))
    data = await gql(client, tenant, OVERVIEW)
    net = data["organization"]["drift"][0]
    assert net["status"] == "DRIFTED" and net["lastRun"]["id"] == latest
    assert net["drifted"] == [{"address": "terraform_data.b", "action": "update"}]
    history = data["organization"]["stack"]["driftHistory"]
    assert [(h["run"]["id"], h["status"], [d["address"] for d in h["drifted"]]) for h in history] == [
        (latest, "DRIFTED", ["terraform_data.b"]),
        (first_drift, "DRIFTED", ["terraform_data.a", "terraform_data.b"]),
        (clean, "IN_SYNC", []),
    ]
    rest = await client.get(f"/api/v1/orgs/{tenant.org}/stacks/net/drift", headers=tenant.headers)
    finished = {r["id"]: r["finished_at"] for r in rest.json()["runs"]}
    overview = (await client.get(f"/api/v1/orgs/{tenant.org}/drift", headers=tenant.headers)).json()
    # Drifted since the first drifted run of the streak, not the latest.
    assert overview["stacks"][0]["since"] == finished[first_drift]

    back = await drift_check(ctx, tenant, NO_CHANGES)
    overview = (await client.get(f"/api/v1/orgs/{tenant.org}/drift", headers=tenant.headers)).json()
    line = overview["stacks"][0]
    assert line["status"] == "in_sync" and line["drifted"] == [] and line["last_run"]["id"] == back
    rest = await client.get(f"/api/v1/orgs/{tenant.org}/stacks/net/drift", headers=tenant.headers)
    assert line["since"] == rest.json()["runs"][0]["finished_at"]
    assert overview["stacks"][1]["status"] == "unknown"


CREATE = """
mutation($org: String!, $input: NotificationInput!) { createNotification(org: $org, input: $input) {
  __typename
  ... on NotificationDestination { id name events format hasSecret stack }
  ... on InvalidInputError { message field }
  ... on NotFoundError { message }
} }
"""
TEST = """
mutation($org: String!, $id: ID!) { testNotification(org: $org, id: $id) {
  __typename ... on NotificationDelivery { id status event attempts { number statusCode error } }
} }
"""
LIST = """
query($org: String!) { organization(slug: $org) { notifications {
  id name hasSecret deliveries(first: 5) { id status test attempts { statusCode } }
} } }
"""


async def test_destinations_through_mutations(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, receiver: Receiver
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    refused = await gql(
        client, tenant, CREATE, input={"name": "x", "url": receiver.url, "events": ["run.exploded"]}
    )
    assert refused["createNotification"]["__typename"] == "InvalidInputError"
    assert refused["createNotification"]["field"] == "events"
    refused = await gql(
        client, tenant, CREATE, input={"name": "x", "url": "gopher://x", "events": ["run.failed"]}
    )
    assert refused["createNotification"]["field"] == "url"
    created = await gql(
        client,
        tenant,
        CREATE,
        input={
            "name": "ops",
            "url": receiver.url,
            "events": ["run.failed"],
            "secret": "s3cr3t",
            "stack": "net",
        },
    )
    destination = created["createNotification"]
    assert destination["hasSecret"] is True and destination["stack"] == "net"
    tested = await gql(client, tenant, TEST, id=destination["id"])
    assert tested["testNotification"]["status"] == "DELIVERED"
    assert tested["testNotification"]["attempts"] == [{"number": 1, "statusCode": 200, "error": None}]
    assert receiver.received[0].signed_with("s3cr3t")
    listed = await gql(client, tenant, LIST)
    [only] = listed["organization"]["notifications"]
    assert only["deliveries"] == [
        {
            "id": tested["testNotification"]["id"],
            "status": "DELIVERED",
            "test": True,
            "attempts": [{"statusCode": 200}],
        }
    ]
    assert "s3cr3t" not in str(listed)


UPDATE = """
mutation($org: String!, $id: ID!, $input: NotificationPatchInput!) {
  updateNotification(org: $org, id: $id, input: $input) {
    __typename
    ... on NotificationDestination { name events hasSecret format }
    ... on InvalidInputError { field }
  }
}
"""
DELETE = """
mutation($org: String!, $id: ID!) { deleteNotification(org: $org, id: $id) {
  __typename ... on DeletedNotification { id } ... on NotFoundError { message }
} }
"""


async def test_destinations_are_changed_and_deleted(
    client: httpx.AsyncClient, tenant: Tenant, receiver: Receiver
) -> None:
    created = await gql(
        client,
        tenant,
        CREATE,
        input={"name": "ops", "url": receiver.url, "events": ["run.failed"], "secret": "x1"},
    )
    destination_id = created["createNotification"]["id"]
    changed = await gql(
        client,
        tenant,
        UPDATE,
        id=destination_id,
        input={"name": "ops-2", "events": ["run.applied", "run.drifted"], "secret": None, "format": "slack"},
    )
    assert changed["updateNotification"] == {
        "__typename": "NotificationDestination",
        "name": "ops-2",
        "events": ["run.applied", "run.drifted"],
        "hasSecret": False,
        "format": "slack",
    }
    refused = await gql(client, tenant, UPDATE, id=destination_id, input={"url": "ftp://x"})
    assert refused["updateNotification"] == {"__typename": "InvalidInputError", "field": "url"}
    deleted = await gql(client, tenant, DELETE, id=destination_id)
    assert deleted["deleteNotification"] == {"__typename": "DeletedNotification", "id": destination_id}
    again = await gql(client, tenant, DELETE, id=destination_id)
    assert again["deleteNotification"]["__typename"] == "NotFoundError"
    assert (await gql(client, tenant, LIST))["organization"]["notifications"] == []
