"""Approvers by person or group, and forbid_self_approval: enforced on approve and discard, read
when the plan finished and recorded on the run with their origins; GraphQL tells the viewer
whether they may approve and why not."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import select

from conftest import Tenant
from firstlume.db.models import Organization
from firstlume.domain.runs import RunType, TriggerKind
from firstlume.services import accounts, catalog, runs
from firstlume.services.commands import StartRun
from firstlume.services.context import Context
from firstlume.services.runs import Trigger
from support.runs import plan_run, start, status_of
from test_graphql_api import synthetic_plan

O = "/api/v1/orgs/acme"
AWAITING = "awaiting_approval"


async def member(ctx: Context, email: str) -> dict[str, str]:
    async with ctx.unit() as unit:
        token = await accounts.create_token(unit.session, "acme", email)
    return {"Authorization": f"Bearer {token}"}


async def setup(client: httpx.AsyncClient, ctx: Context, tenant: Tenant) -> dict[str, dict[str, str]]:
    """ada (admin, no group) puts approvers ["group:sre"] and forbid_self_approval on folder prod;
    bob is an operator outside sre, sam and tom are operators in it, rita a reader in it."""
    h = tenant.headers
    assert (await client.post(f"{O}/folders", headers=h, json={"path": "prod"})).status_code == 201
    created = await client.post(
        f"{O}/stacks", headers=h, json={"slug": "web", "repository": "file:///r", "folder": "prod"}
    )
    assert created.status_code == 201, created.text
    patched = await client.patch(
        f"{O}/folders/prod/settings",
        headers=h,
        json={"approvers": ["group:sre"], "forbid_self_approval": True, "require_approval": True},
    )
    assert patched.status_code == 200, patched.text
    for email, role, groups in [
        ("bob@example.com", "operator", []),
        ("sam@example.com", "operator", ["sre"]),
        ("tom@example.com", "operator", ["sre", "dba"]),
        ("rita@example.com", "reader", ["sre"]),
    ]:
        put = await client.put(f"{O}/members/{email}", headers=h, json={"role": role, "groups": groups})
        assert put.status_code == 200 and put.json() == {
            "email": email,
            "role": role,
            "groups": sorted(groups),
        }
    return {name: await member(ctx, f"{name}@example.com") for name in ("bob", "sam", "tom", "rita")}


async def awaiting(ctx: Context, token: str) -> str:
    run_id = await start(ctx, token, "acme", "web", "apply")
    assert await plan_run(ctx, synthetic_plan()) == {run_id: AWAITING}
    return run_id


async def push_run(ctx: Context, author: str) -> str:
    async with ctx.unit() as unit:
        org = await unit.session.scalar(select(Organization).where(Organization.slug == "acme"))
        stack = await catalog.stack_by_slug(unit.session, org, "web")
        trigger = Trigger(kind=TriggerKind.PUSH, by=f"git:{author}", commit="a" * 40)
        run = await runs.start_run(unit, None, stack, StartRun(type=RunType.APPLY), trigger=trigger)
        run_id = run.id
    assert await plan_run(ctx, synthetic_plan()) == {run_id: AWAITING}
    return run_id


async def decide(
    client: httpx.AsyncClient, headers: dict[str, str], run_id: str, what: str = "approve"
) -> httpx.Response:
    return await client.post(f"{O}/runs/{run_id}/{what}", headers=headers, content="{}")


VIEWER = """query($id: ID!) { organization(slug: "acme") { run(id: $id) {
  approval { approvers forbidSelfApproval viewerCanApprove viewerCannotApproveReason }
  configuration { settings { approvers { value origin } forbidSelfApproval { value origin } } } } } }"""


async def viewer(client: httpx.AsyncClient, headers: dict[str, str], run_id: str) -> dict[str, Any]:
    response = await client.post(
        "/graphql", headers=headers, json={"query": VIEWER, "variables": {"id": run_id}}
    )
    body = response.json()
    assert not body.get("errors"), body
    return body["data"]["organization"]["run"]  # type: ignore[no-any-return]


async def test_only_the_group_approves_and_the_run_records_the_rules_with_origins(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    people = await setup(client, ctx, tenant)
    run_id = await awaiting(ctx, tenant.token)  # started by ada

    run = (await client.get(f"{O}/runs/{run_id}", headers=tenant.headers)).json()
    assert run["configuration"]["settings"]["approvers"] == {"value": ["group:sre"], "origin": "folder:prod"}
    assert run["configuration"]["settings"]["forbid_self_approval"] == {
        "value": True,
        "origin": "folder:prod",
    }
    assert run["approval"]["approvers"] == ["group:sre"]

    for who in (people["bob"], tenant.headers):  # an operator outside sre, an admin outside sre
        for what in ("approve", "discard"):
            refused = await decide(client, who, run_id, what)
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"]["code"] == "not_an_approver"
            assert "group:sre" in refused.json()["error"]["message"]
            assert await status_of(ctx, run_id) == AWAITING
    # A reader in the group still lacks the operator role.
    reader = await decide(client, people["rita"], run_id)
    assert reader.status_code == 403 and reader.json()["error"]["code"] == "forbidden"
    assert await status_of(ctx, run_id) == AWAITING

    bob_view = await viewer(client, people["bob"], run_id)
    assert bob_view["approval"]["viewerCanApprove"] is False
    assert "group:sre" in bob_view["approval"]["viewerCannotApproveReason"]
    assert bob_view["configuration"]["settings"]["approvers"] == {
        "value": ["group:sre"],
        "origin": "folder:prod",
    }
    assert bob_view["configuration"]["settings"]["forbidSelfApproval"] == {
        "value": True,
        "origin": "folder:prod",
    }
    sam_view = await viewer(client, people["sam"], run_id)
    assert sam_view["approval"] == {
        "approvers": ["group:sre"],
        "forbidSelfApproval": True,
        "viewerCanApprove": True,
        "viewerCannotApproveReason": None,
    }

    approved = await decide(client, people["sam"], run_id)
    assert approved.status_code == 200, approved.text
    assert approved.json()["status"] == "apply_queued"


async def test_forbid_self_approval_refuses_the_starter_and_the_commit_author(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    people = await setup(client, ctx, tenant)
    sam_token = people["sam"]["Authorization"].removeprefix("Bearer ")
    own = await awaiting(ctx, sam_token)
    refused = await decide(client, people["sam"], own)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "self_approval_forbidden"
    assert await status_of(ctx, own) == AWAITING
    view = await viewer(client, people["sam"], own)
    assert view["approval"]["viewerCanApprove"] is False
    assert "you started this run" in view["approval"]["viewerCannotApproveReason"]
    # Discarding is not approving: the starter, an approver, may withdraw the run.
    assert (await decide(client, people["sam"], own, "discard")).json()["status"] == "discarded"

    pushed = await push_run(ctx, "tom@example.com")
    by_author = await decide(client, people["tom"], pushed)
    assert by_author.status_code == 403 and by_author.json()["error"]["code"] == "self_approval_forbidden"
    assert "commit" in by_author.json()["error"]["message"]
    assert await status_of(ctx, pushed) == AWAITING
    assert (await decide(client, people["sam"], pushed)).json()["status"] == "apply_queued"


async def test_without_approvers_any_operator_decides(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    people = await setup(client, ctx, tenant)
    cleared = await client.patch(
        f"{O}/folders/prod/settings",
        headers=tenant.headers,
        json={"approvers": None, "forbid_self_approval": None},
    )
    assert cleared.status_code == 200
    run_id = await awaiting(ctx, tenant.token)
    run = (await client.get(f"{O}/runs/{run_id}", headers=tenant.headers)).json()
    assert run["configuration"]["settings"]["approvers"] == {"value": None, "origin": "default"}
    assert run["configuration"]["settings"]["forbid_self_approval"] == {"value": False, "origin": "default"}
    assert (await decide(client, people["bob"], run_id, "discard")).json()["status"] == "discarded"
    other = await awaiting(ctx, tenant.token)
    assert (await decide(client, tenant.headers, other)).json()["status"] == "apply_queued"
