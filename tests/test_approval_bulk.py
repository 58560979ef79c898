"""Approving a run, and ending its apply, move every planned change in a constant number of
statements: no ORM object per change, whether the plan has 4 changes or 5,000."""

from __future__ import annotations

import itertools
from typing import Any

import httpx
from sqlalchemy import insert, select, update

from conftest import Tenant, make_stack
from firstlume.db.models import ResourceChange, Run, RunStep
from firstlume.domain.runs import ResourceState, RunStatus, StepStatus
from firstlume.services.context import Context
from firstlume.services.transitions import change_status
from support.runs import start
from support.statements import StatementCounter

O = "/api/v1/orgs/acme"
PENDING = ResourceState.PENDING.value


def change_row(run_id: str, i: int, action: str) -> dict[str, Any]:
    stages = (
        [{"action": "delete", "state": None}, {"action": "create", "state": None}]
        if action == "replace"
        else []
    )
    return {
        "run_id": run_id, "position": i, "address": f"terraform_data.r{i}", "type": "terraform_data", "unit": ".",
        "action": action, "replaced_because": [], "attributes": [], "state": None, "error": None, "stages": stages,
    }  # fmt: skip


async def awaiting_run(ctx: Context, tenant: Tenant, slug: str, count: int) -> str:
    await make_stack(ctx, tenant, {"slug": slug, "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, tenant.org, slug, "apply")
    actions = itertools.cycle(["create", "update", "delete", "replace"])
    async with ctx.unit() as unit:
        await unit.session.execute(
            insert(ResourceChange),
            [change_row(run_id, i, a) for i, a in zip(range(count), actions, strict=False)],
        )
        await unit.session.execute(
            update(Run)
            .where(Run.id == run_id)
            .values(status=RunStatus.AWAITING_APPROVAL, has_plan=True, summary_create=count)
        )
        unit.session.add(RunStep(run_id=run_id, name="approval", position=0, status=StepStatus.RUNNING))
    return run_id


async def states_of(ctx: Context, run_id: str) -> set[tuple[Any, ...]]:
    async with ctx.db.transaction() as session:
        rows = await session.execute(
            select(ResourceChange.state, ResourceChange.stages).where(ResourceChange.run_id == run_id)
        )
        return {(state, tuple((s["action"], s["state"]) for s in stages)) for state, stages in rows}


async def test_approving_5000_changes_costs_the_statements_of_approving_4(
    client: httpx.AsyncClient,
    app_statements: StatementCounter,
    ctx: Context,
    tenant: Tenant,
    database_url: str,
) -> None:
    small_run = await awaiting_run(ctx, tenant, "small", 4)
    big_run = await awaiting_run(ctx, tenant, "big", 5000)
    # The token's first use is recorded (last_used_at, at most once a minute): not the approval's cost.
    assert (await client.get(f"{O}/stacks", headers=tenant.headers)).status_code == 200
    counts = []
    for run_id in (small_run, big_run):
        with app_statements.counting() as statements:
            response = await client.post(f"{O}/runs/{run_id}/approve", headers=tenant.headers, content="{}")
        assert response.status_code == 200 and response.json()["status"] == "apply_queued", response.text
        assert (
            sum(
                "resource_changes" in s.lower() and s.lstrip().upper().startswith("UPDATE")
                for s in statements
            )
            == 1
        )
        counts.append(len(statements))
    assert counts[0] == counts[1] <= 20, app_statements.statements
    assert await states_of(ctx, big_run) == {
        (PENDING, ()),
        (PENDING, (("delete", PENDING), ("create", PENDING))),
    }
    print(f"\n{database_url.split(':')[0]}: approve with 4 and with 5000 changes: {counts} SQL statements")


async def test_ending_an_apply_marks_5000_unstarted_changes_not_applied_in_one_statement(
    ctx: Context, tenant: Tenant
) -> None:
    run_id = await awaiting_run(ctx, tenant, "big", 5000)
    async with ctx.unit() as unit:
        await unit.session.execute(
            update(ResourceChange)
            .where(ResourceChange.run_id == run_id, ResourceChange.position < 10)
            .values(state=ResourceState.DONE)
        )
        # Pending, as approval leaves them, apart from the ten that were applied.
        await unit.session.execute(
            update(ResourceChange)
            .where(ResourceChange.run_id == run_id, ResourceChange.position >= 10)
            .values(state=ResourceState.PENDING)
        )
        await unit.session.execute(update(Run).where(Run.id == run_id).values(status=RunStatus.APPLYING))
    counter = StatementCounter(ctx.db)
    try:
        async with ctx.unit() as unit:
            run = await unit.session.get(Run, run_id)
            assert run is not None
            with counter.counting() as statements:
                await change_status(unit, run, RunStatus.FAILED, reason="test")
    finally:
        counter.close()
    # One SELECT counts the failed ones onto the run; one UPDATE for the 5000 unstarted (not_applied), one for any caught mid-change (failed).
    assert sum(s.strip().lower().startswith("update resource_changes") for s in statements) == 2, statements
    assert sum("resource_changes" in s.lower() for s in statements) == 3, statements
    # 14: the arrow also reads the organization's notification destinations (run.failed), once,
    # and the changes caught mid-apply get their own UPDATE; none of it grows with the changes.
    assert len(statements) <= 14, statements
    async with ctx.db.transaction() as session:
        states = list(
            await session.scalars(select(ResourceChange.state).where(ResourceChange.run_id == run_id))
        )
    assert states.count(ResourceState.DONE) == 10 and states.count(ResourceState.NOT_APPLIED) == 4990
