"""An apply whose managed state moved since its plan: Firstlume refuses it before Terraform
starts (docs/runs-and-approval.txt, "Apply runs what was planned"), and the run shows where it
stopped: its apply step failed, with the reason as the run's error."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy import update

from conftest import Tenant, make_stack
from firstlume.db.models import Run
from firstlume.services import dispatch, phases
from firstlume.services.context import Context
from firstlume.services.state.serials import StateMoved
from support.runs import CREATE_ONE, plan_run, start
from test_state_api import state_doc

O = "/api/v1/orgs/acme"


async def test_a_stale_plan_fails_the_run_at_its_apply_step(
    client: httpx.AsyncClient, ctx: Context, tenant: Tenant
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///nowhere"})
    run_id = await start(ctx, tenant.token, "acme", "net", "apply")
    assert await plan_run(ctx, CREATE_ONE) == {run_id: "awaiting_approval"}
    # The plan ran against the managed state, which had no version yet (serial 0).
    async with ctx.db.transaction() as session:
        await session.execute(
            update(Run)
            .where(Run.id == run_id)
            .values(state_backends=[{"unit": ".", "backend": "firstlume"}], planned_state_serials={".": 0})
        )
    # Somebody writes the state between the plan and the apply.
    written = await client.post(f"{O}/stacks/net/state", content=state_doc(1), headers=tenant.headers)
    assert written.status_code == 200, written.text
    approved = await client.post(
        f"{O}/runs/{run_id}/approve", json={"acknowledged": []}, headers=tenant.headers
    )
    assert approved.status_code == 200, approved.text

    [launch] = await dispatch.claim_applies(ctx)
    with pytest.raises(StateMoved):
        await phases.spec(ctx, launch.token)

    run = (await client.get(f"{O}/runs/{run_id}", headers=tenant.headers)).json()
    assert run["status"] == "failed"
    assert run["error"] == "state changed since the plan (serial 0 → 1): plan again"
    # (This executor-less plan reported no steps of its own: approval is the lifecycle's.)
    assert [(step["name"], step["status"]) for step in run["steps"]] == [
        ("approval", "done"),
        ("apply", "failed"),
    ]
