"""The inherited settings of the platform (drift_schedule, approvers, forbid_self_approval) and
what started a run (a person, a push, the schedule): stored, resolved with origins, refused
with a sentence naming the field, and shown by REST and GraphQL."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import select

from conftest import Tenant, make_stack
from firstlume.db.models import Stack
from firstlume.domain.runs import RunType, TriggerKind
from firstlume.services import runs
from firstlume.services.commands import StartRun
from firstlume.services.context import Context, Unit
from firstlume.services.runs import Trigger
from support.runs import start
from support.snapshot import snapshot

O = "/api/v1/orgs/acme"
PLATFORM = ("drift_schedule", "approvers", "forbid_self_approval")


@pytest.fixture
async def stack(ctx: Context, tenant: Tenant) -> str:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo", "folder": "prod/eu"})
    return "net"


async def effective(client: httpx.AsyncClient, tenant: Tenant, path: str) -> dict[str, tuple[Any, str]]:
    body = (await client.get(f"{O}{path}/settings", headers=tenant.headers)).json()
    return {k: (v["value"], v["origin"]) for k, v in body["effective"].items() if k in PLATFORM}


async def test_platform_settings_default_inherit_and_resolve_with_origins(
    client: httpx.AsyncClient, tenant: Tenant, stack: str
) -> None:
    assert await effective(client, tenant, "/stacks/net") == {
        "drift_schedule": (None, "default"),
        "approvers": (None, "default"),
        "forbid_self_approval": (False, "default"),
    }
    patched = await client.patch(
        f"{O}/folders/prod/settings",
        headers=tenant.headers,
        json={
            "drift_schedule": "0  6 * * 1-5",
            "approvers": ["group:sre", "user:ada@example.com", "group:sre"],
        },
    )
    assert patched.status_code == 200, patched.text
    # Spaces are normalised; a principal given twice is kept once.
    assert patched.json()["explicit"]["drift_schedule"] == "0 6 * * 1-5"
    assert patched.json()["explicit"]["approvers"] == ["group:sre", "user:ada@example.com"]
    await client.patch(f"{O}/settings", headers=tenant.headers, json={"forbid_self_approval": True})
    await client.patch(
        f"{O}/stacks/net/settings", headers=tenant.headers, json={"drift_schedule": "*/5 * * * *"}
    )
    assert await effective(client, tenant, "/stacks/net") == {
        "drift_schedule": ("*/5 * * * *", "stack"),
        "approvers": (["group:sre", "user:ada@example.com"], "folder:prod"),
        "forbid_self_approval": (True, "organization"),
    }
    # null at the stack inherits the folder's schedule again.
    await client.patch(f"{O}/stacks/net/settings", headers=tenant.headers, json={"drift_schedule": None})
    assert (await effective(client, tenant, "/stacks/net"))["drift_schedule"] == (
        "0 6 * * 1-5",
        "folder:prod",
    )


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"drift_schedule": "every day"}, "drift_schedule", "cron schedule of five fields"),
        ({"drift_schedule": "0 6 * * * *"}, "drift_schedule", "cron schedule of five fields"),
        ({"drift_schedule": "61 * * * *"}, "drift_schedule", "cron schedule of five fields"),
        ({"drift_schedule": 5}, "drift_schedule", "must be a string"),
        ({"drift_schedule": "x" * 2_000_000}, "drift_schedule", "at most 200 characters"),
        ({"approvers": "group:sre"}, "approvers", "must be a list"),
        ({"approvers": ["sre"]}, "approvers", '"user:<email>" or "group:<name>"'),
        ({"approvers": ["user:nobody"]}, "approvers", '"user:<email>" or "group:<name>"'),
        ({"approvers": ["group:"]}, "approvers", '"user:<email>" or "group:<name>"'),
        ({"forbid_self_approval": "yes"}, "forbid_self_approval", "true, false or null"),
    ],
)
async def test_bad_platform_settings_are_refused_naming_the_field_and_change_nothing(
    client: httpx.AsyncClient,
    ctx: Context,
    tenant: Tenant,
    stack: str,
    body: dict[str, Any],
    field: str,
    words: str,
) -> None:
    before = await snapshot(ctx)
    response = await client.patch(f"{O}/stacks/net/settings", headers=tenant.headers, json=body)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_request", field)
    assert words in error["message"]
    assert await snapshot(ctx) == before


async def test_graphql_shows_and_updates_the_platform_settings(
    client: httpx.AsyncClient, tenant: Tenant, stack: str
) -> None:
    query = """mutation($org: String!) {
      updateSettings(org: $org, folder: "prod", input: {approvers: ["group:sre"], driftSchedule: "0 6 * * *"}) {
        __typename ... on Settings { explicit { driftSchedule approvers forbidSelfApproval } }
        ... on Error { code message }
      }
      bad: updateSettings(org: $org, input: {driftSchedule: "nope"}) {
        __typename ... on InvalidInputError { field message }
      }
    }"""
    body = (
        await client.post(
            "/graphql", json={"query": query, "variables": {"org": "acme"}}, headers=tenant.headers
        )
    ).json()
    assert "errors" not in body, body
    assert body["data"]["updateSettings"]["explicit"] == {
        "driftSchedule": "0 6 * * *", "approvers": ["group:sre"], "forbidSelfApproval": None,
    }  # fmt: skip
    assert body["data"]["bad"]["__typename"] == "InvalidInputError"
    assert body["data"]["bad"]["field"] == "driftSchedule"
    read = """query { organization(slug: "acme") { stack(slug: "net") { settings { effective {
      driftSchedule { value origin } approvers { value origin } forbidSelfApproval { value origin } } } } } }"""
    body = (await client.post("/graphql", json={"query": read}, headers=tenant.headers)).json()
    assert body["data"]["organization"]["stack"]["settings"]["effective"] == {
        "driftSchedule": {"value": "0 6 * * *", "origin": "folder:prod"},
        "approvers": {"value": ["group:sre"], "origin": "folder:prod"},
        "forbidSelfApproval": {"value": False, "origin": "default"},
    }


async def the_stack(unit: Unit) -> Stack:
    return (await unit.session.scalars(select(Stack))).one()


async def start_by_trigger(ctx: Context, trigger: Trigger, run_type: RunType = RunType.PLAN) -> str:
    async with ctx.unit() as unit:
        run = await runs.start_run(
            unit, None, await the_stack(unit), StartRun(type=run_type), trigger=trigger
        )
        return run.id


async def test_a_run_records_what_started_it_and_history_filters_by_trigger(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant, stack: str
) -> None:
    manual = await start(ctx, tenant.token, tenant.org, "net", "plan")
    pushed = await start_by_trigger(
        ctx, Trigger(TriggerKind.PUSH, by="git:grace@example.com", commit="a" * 40, delivery="d-1")
    )
    scheduled = await start_by_trigger(ctx, Trigger(TriggerKind.SCHEDULE, by="schedule"), RunType.DRIFT)

    def shown(run: dict[str, Any]) -> tuple[Any, ...]:
        return run["created_by"], run["trigger"]

    runs_by_id = {
        r["id"]: r for r in (await client.get(f"{O}/stacks/net/runs", headers=tenant.headers)).json()["runs"]
    }
    assert shown(runs_by_id[manual]) == (tenant.email, {"kind": "manual", "commit": None, "delivery": None})
    assert shown(runs_by_id[pushed]) == (
        "git:grace@example.com", {"kind": "push", "commit": "a" * 40, "delivery": "d-1"},
    )  # fmt: skip
    assert shown(runs_by_id[scheduled]) == (
        "schedule",
        {"kind": "schedule", "commit": None, "delivery": None},
    )

    only_push = (await client.get(f"{O}/stacks/net/runs?trigger=push", headers=tenant.headers)).json()
    assert [r["id"] for r in only_push["runs"]] == [pushed]
    both = (
        await client.get(f"{O}/stacks/net/runs?trigger=push&trigger=schedule", headers=tenant.headers)
    ).json()
    assert [r["id"] for r in both["runs"]] == [scheduled, pushed]
    refused = await client.get(f"{O}/stacks/net/runs?trigger=cron", headers=tenant.headers)
    assert refused.status_code == 422
    assert refused.json()["error"]["field"] == "trigger"

    query = """query { organization(slug: "acme") { stack(slug: "net") {
      runs(trigger: [PUSH]) { nodes { id createdBy trigger { kind commit delivery } } } } } }"""
    body = (await client.post("/graphql", json={"query": query}, headers=tenant.headers)).json()
    assert body["data"]["organization"]["stack"]["runs"]["nodes"] == [
        {"id": pushed, "createdBy": "git:grace@example.com",
         "trigger": {"kind": "PUSH", "commit": "a" * 40, "delivery": "d-1"}},
    ]  # fmt: skip


async def test_a_run_is_started_by_a_person_or_a_trigger_never_both(ctx: Context, stack: str) -> None:
    async with ctx.unit() as unit:
        with pytest.raises(ValueError):
            await runs.start_run(unit, None, await the_stack(unit), StartRun(type=RunType.PLAN))
