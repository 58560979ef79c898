"""A plan's changes are worked out on a thread and written slice by slice as they come
(services/plan_changes.py): every change lands once, in plan order, and a plan that turns out
malformed part-way leaves nothing behind."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import func, select

from conftest import Tenant, make_stack
from firstlume.db.models import ResourceChange
from firstlume.services.context import Context
from firstlume.services.plan_changes import SLICE, PlanChanges
from support.runs import start


def plan_of(count: int, broken_at: int | None = None) -> dict[str, Any]:
    changes = []
    for i in range(count):
        change: dict[str, Any] = {
            "address": f"terraform_data.r[{i}]",
            "mode": "managed",
            "type": "terraform_data",
            "change": {"actions": ["create"], "before": None, "after": {"input": f"v{i}"}},
        }
        if i == broken_at:
            del change["address"]  # no plan has a resource change without its address
        changes.append(change)
    return {"format_version": "1.2", "resource_changes": changes}


async def _run(ctx: Context, tenant: Tenant) -> str:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    return await start(ctx, tenant.token, tenant.org, "net", "plan")


async def test_every_change_of_several_slices_is_written_once_in_plan_order(
    ctx: Context, tenant: Tenant
) -> None:
    run_id = await _run(ctx, tenant)
    count = 2 * SLICE + 345
    computing = PlanChanges(run_id, plan_of(count), secrets=[])
    computing.start()
    async with ctx.unit() as unit:
        changes = await computing.write(unit.session)
    assert len(changes) == count
    async with ctx.db.read() as session:
        stored = (
            await session.execute(
                select(ResourceChange.position, ResourceChange.address)
                .where(ResourceChange.run_id == run_id)
                .order_by(ResourceChange.position)
            )
        ).all()
    assert [tuple(row) for row in stored] == [(i, f"terraform_data.r[{i}]") for i in range(count)]


async def test_a_plan_malformed_after_its_first_slices_leaves_no_change_behind(
    ctx: Context, tenant: Tenant
) -> None:
    run_id = await _run(ctx, tenant)
    computing = PlanChanges(run_id, plan_of(2 * SLICE + 10, broken_at=SLICE + 5), secrets=[])
    computing.start()
    with pytest.raises(KeyError):
        async with ctx.unit() as unit:
            await computing.write(unit.session)  # the first slice is written, then the error
    async with ctx.db.read() as session:
        count = await session.scalar(select(func.count()).where(ResourceChange.run_id == run_id))
    assert count == 0
