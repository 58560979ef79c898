"""Changes of a real plan through the API, and approval with confirm_destructive."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from conftest import Tenant, make_stack
from firstlume.db.models import Organization, Run, RunStatusChange
from firstlume.services.context import Context
from support.runs import plan_run, start, status_of
from support.scenarios import MAIN_AFTER, MAIN_BEFORE, SECRET_NEW, SECRET_OLD, two_step_plan
from support.snapshot import snapshot
from support.terraform import requires_terraform

pytestmark = requires_terraform
O = "/api/v1/orgs/acme"
DESTRUCTIVE = ["terraform_data.gone", "terraform_data.repl"]


@pytest.fixture(scope="module")
def main_plan(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("approval")
    return two_step_plan(tmp / "stack", tmp, MAIN_BEFORE, MAIN_AFTER)


async def awaiting_run(ctx: Context, tenant: Tenant, plan: dict[str, Any], *, confirm: bool) -> str:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    async with ctx.unit() as unit:
        from firstlume.services import accounts

        actor = await accounts.authenticate(unit.session, tenant.token)
        org = await accounts.org_for(unit.session, actor, tenant.org)
        await unit.session.execute(
            update(Organization).where(Organization.id == org.id).values(confirm_destructive=confirm)
        )
    run_id = await start(ctx, tenant.token, tenant.org, "net", "apply")
    assert await plan_run(ctx, plan) == {run_id: "awaiting_approval"}
    return run_id


async def test_changes_are_grouped_ordered_counted_and_summarised(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context, main_plan: dict[str, Any]
) -> None:
    run_id = await awaiting_run(ctx, tenant, main_plan, confirm=False)
    response = await client.get(f"{O}/runs/{run_id}/changes", headers=tenant.headers)
    assert response.status_code == 200
    body = response.json()
    assert body["summary"] == {"delete": 1, "replace": 1, "update": 2, "create": 2}
    assert body["summary_text"] == "1 delete · 1 replace · 2 update · 2 create"
    assert [(g["action"], g["title"], g["count"]) for g in body["groups"]] == [
        ("delete", "Will be deleted", 1),
        ("replace", "Will be replaced", 1),
        ("update", "Will be updated", 2),
        ("create", "Will be created", 2),
    ]
    by_address = {c["address"]: c for g in body["groups"] for c in g["changes"]}
    assert [c["address"] for c in body["groups"][2]["changes"]] == [
        "terraform_data.upd1",
        "terraform_data.upd2",
    ]
    repl = by_address["terraform_data.repl"]
    assert repl["type"] == "terraform_data" and repl["unit"] == "."
    assert repl["replaced_because"] == ["triggers_replace"]
    assert [a["name"] for a in repl["attributes"] if a["forces_replacement"]] == ["triggers_replace"]
    assert [s["action"] for s in repl["stages"]] == ["delete", "create"]
    upd1 = {a["name"]: a for a in by_address["terraform_data.upd1"]["attributes"]}
    assert (upd1["input"]["before"], upd1["input"]["after"]) == ("a", "b")
    assert upd1["output"]["after"] == "(known after apply)"
    upd2 = {a["name"]: a for a in by_address["terraform_data.upd2"]["attributes"]}
    assert upd2["input"]["after"] == {"name": "y", "secret": "(sensitive value changed)"}
    assert {a["name"]: a["after"] for a in by_address["terraform_data.new1"]["attributes"]}[
        "input"
    ] == "(sensitive)"
    assert "terraform_data.same" not in by_address

    run = (await client.get(f"{O}/runs/{run_id}", headers=tenant.headers)).json()
    assert run["summary_text"] == "1 delete · 1 replace · 2 update · 2 create"
    assert run["approval"]["required"] is True
    assert run["configuration"]["settings"]["require_approval"] == {"value": True, "origin": "default"}
    assert [(s["name"], s["status"]) for s in run["steps"]] == [("approval", "running")]

    # The secrets are in the raw plan, but in no response and nowhere in the database in clear.
    assert SECRET_NEW in json.dumps(main_plan) and SECRET_OLD in json.dumps(main_plan)
    for text in (response.text, json.dumps(run), repr(await snapshot(ctx))):
        assert SECRET_NEW not in text and SECRET_OLD not in text


async def test_approve_refuses_missing_acknowledgement_and_lists_it(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context, main_plan: dict[str, Any]
) -> None:
    run_id = await awaiting_run(ctx, tenant, main_plan, confirm=True)
    before = await snapshot(ctx)
    for acknowledged, missing in [
        ([], DESTRUCTIVE),
        (["terraform_data.gone"], ["terraform_data.repl"]),
        (["terraform_data.repl", "terraform_data.upd1"], ["terraform_data.gone"]),
    ]:
        response = await client.post(
            f"{O}/runs/{run_id}/approve",
            headers=tenant.headers,
            content=json.dumps({"acknowledged": acknowledged}),
        )
        assert response.status_code == 409
        error = response.json()["error"]
        assert error["code"] == "acknowledgement_required"
        assert error["missing"] == missing
        assert all(address in error["message"] for address in missing)
    assert await snapshot(ctx) == before
    assert await status_of(ctx, run_id) == "awaiting_approval"


async def test_approve_with_every_destructive_address_records_them_and_the_approver(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context, main_plan: dict[str, Any]
) -> None:
    run_id = await awaiting_run(ctx, tenant, main_plan, confirm=True)
    response = await client.post(
        f"{O}/runs/{run_id}/approve",
        headers=tenant.headers,
        content=json.dumps({"acknowledged": ["terraform_data.repl", "terraform_data.gone"]}),
    )
    assert response.status_code == 200, response.text
    run = response.json()
    assert run["status"] == "apply_queued"
    assert run["approval"]["approved_by"] == tenant.email
    assert run["approval"]["approved_at"] is not None
    assert run["approval"]["confirm_destructive"] is True
    assert sorted(run["approval"]["acknowledged"]) == DESTRUCTIVE
    assert run["configuration"]["settings"]["confirm_destructive"] == {
        "value": True,
        "origin": "organization",
    }
    changes = (await client.get(f"{O}/runs/{run_id}/changes", headers=tenant.headers)).json()
    assert {c["state"] for g in changes["groups"] for c in g["changes"]} == {"pending"}
    async with ctx.db.transaction() as session:
        history = (
            await session.execute(
                select(RunStatusChange.from_status, RunStatusChange.to_status, RunStatusChange.actor)
                .where(RunStatusChange.run_id == run_id)
                .order_by(RunStatusChange.id)
            )
        ).all()
        stored = await session.get(Run, run_id)
    assert [tuple(h) for h in history] == [
        (None, "queued", tenant.email),
        ("queued", "planning", "scheduler"),
        ("planning", "awaiting_approval", "executor"),
        ("awaiting_approval", "apply_queued", tenant.email),
    ]
    assert stored is not None and sorted(stored.acknowledged) == DESTRUCTIVE
    second = await client.post(
        f"{O}/runs/{run_id}/approve", headers=tenant.headers, content='{"acknowledged": []}'
    )
    assert second.status_code == 409 and second.json()["error"]["code"] == "invalid_status"


async def test_approval_without_confirm_destructive_needs_no_acknowledgement(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context, main_plan: dict[str, Any]
) -> None:
    run_id = await awaiting_run(ctx, tenant, main_plan, confirm=False)
    response = await client.post(
        f"{O}/runs/{run_id}/approve", headers=tenant.headers, content='{"acknowledged": []}'
    )
    assert response.status_code == 200 and response.json()["status"] == "apply_queued"
    assert response.json()["approval"]["acknowledged"] == []


async def test_discard_ends_a_run_awaiting_approval(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context, main_plan: dict[str, Any]
) -> None:
    run_id = await awaiting_run(ctx, tenant, main_plan, confirm=True)
    response = await client.post(f"{O}/runs/{run_id}/discard", headers=tenant.headers)
    assert response.status_code == 200 and response.json()["status"] == "discarded"
    assert response.json()["finished_at"] is not None
    cancel = await client.post(f"{O}/runs/{run_id}/cancel", headers=tenant.headers)
    assert cancel.status_code == 409


async def test_require_approval_off_goes_straight_to_apply_queued(
    client: httpx.AsyncClient, tenant: Tenant, ctx: Context, main_plan: dict[str, Any]
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo", "folder": "prod"})
    response = await client.patch(
        f"{O}/folders/prod/settings", headers=tenant.headers, content='{"require_approval": false}'
    )
    assert response.status_code == 200
    run_id = await start(ctx, tenant.token, tenant.org, "net", "apply")
    assert await plan_run(ctx, main_plan) == {run_id: "apply_queued"}
    run = (await client.get(f"{O}/runs/{run_id}", headers=tenant.headers)).json()
    assert run["approval"]["required"] is False
    assert run["configuration"]["settings"]["require_approval"] == {"value": False, "origin": "folder:prod"}
    assert [(s["name"], s["status"]) for s in run["steps"]] == [("approval", "skipped")]
