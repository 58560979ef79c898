"""Runs of one stack queue in arrival order and never two hold the lock, on both databases,
even when transactions race."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select, update

from conftest import Tenant, make_stack
from firstlume.db.models import Run
from firstlume.domain.errors import StackLocked
from firstlume.domain.runs import HOLDS_LOCK, RunStatus
from firstlume.services import dispatch
from firstlume.services.context import Context
from firstlume.services.transitions import change_status
from support.runs import start
from support.statements import StatementCounter


@pytest.fixture
async def stack(ctx: Context, tenant: Tenant) -> str:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///nowhere"})
    return "net"


async def _statuses(ctx: Context) -> list[tuple[int, str]]:
    async with ctx.db.transaction() as session:
        return [
            tuple(r)
            for r in (await session.execute(select(Run.number, Run.status).order_by(Run.number))).all()
        ]  # type: ignore[misc]


async def test_three_runs_queue_in_arrival_order(ctx: Context, tenant: Tenant, stack: str) -> None:
    ids = [await start(ctx, tenant.token, tenant.org, stack, t) for t in ("plan", "apply", "drift")]
    assert await _statuses(ctx) == [(1, "queued"), (2, "queued"), (3, "queued")]

    claimed = await dispatch.claim_plans(ctx)
    assert [c.run_id for c in claimed] == [ids[0]]
    # The stack is locked: nothing else starts, however often the scheduler looks.
    assert await dispatch.claim_plans(ctx) == []
    assert await _statuses(ctx) == [(1, "planning"), (2, "queued"), (3, "queued")]

    async with ctx.unit() as unit:
        run = await unit.session.get(Run, ids[0])
        assert run is not None
        await change_status(unit, run, RunStatus.PLANNED)
    assert [c.run_id for c in await dispatch.claim_plans(ctx)] == [ids[1]]
    assert await _statuses(ctx) == [(1, "planned"), (2, "planning"), (3, "queued")]


async def test_concurrent_starts_get_distinct_consecutive_numbers(
    ctx: Context, tenant: Tenant, stack: str
) -> None:
    await asyncio.gather(*(start(ctx, tenant.token, tenant.org, stack, "plan") for _ in range(8)))
    numbers = [n for n, _ in await _statuses(ctx)]
    assert numbers == list(range(1, 9))


async def test_racing_schedulers_start_one_run_per_stack(ctx: Context, tenant: Tenant, stack: str) -> None:
    for run_type in ("plan", "apply", "destroy"):
        await start(ctx, tenant.token, tenant.org, stack, run_type)
    # Several claimers at once, each in its own transaction and connection.
    results = await asyncio.gather(*(dispatch.claim_plans(ctx) for _ in range(6)))
    launched = [launch for result in results for launch in result]
    assert len(launched) == 1
    statuses = await _statuses(ctx)
    assert statuses == [(1, "planning"), (2, "queued"), (3, "queued")]


async def test_database_refuses_a_second_lock_holder_even_past_the_code(
    ctx: Context, tenant: Tenant, stack: str
) -> None:
    """Two transactions that both read 'queued' and both try to take the lock: the database's
    partial unique index lets exactly one commit."""
    ids = [await start(ctx, tenant.token, tenant.org, stack, "plan") for _ in range(2)]
    barrier = asyncio.Barrier(2)

    async def take_lock(run_id: str) -> str:
        try:
            async with ctx.unit() as unit:
                run = await unit.session.get(Run, run_id)
                assert run is not None and run.status == "queued"
                await barrier.wait() if not ctx.db.is_sqlite else None
                await change_status(unit, run, RunStatus.PLANNING)
            return "won"
        except StackLocked:
            return "locked"

    outcomes = sorted(await asyncio.gather(*(take_lock(i) for i in ids)))
    assert outcomes == ["locked", "won"]
    holders = [s for _, s in await _statuses(ctx) if s in {h.value for h in HOLDS_LOCK}]
    assert holders == ["planning"]


async def test_raw_update_cannot_break_the_one_lock_rule(ctx: Context, tenant: Tenant, stack: str) -> None:
    ids = [await start(ctx, tenant.token, tenant.org, stack, "plan") for _ in range(2)]
    async with ctx.db.transaction() as session:
        await session.execute(update(Run).where(Run.id == ids[0]).values(status="applying"))
    from sqlalchemy.exc import IntegrityError

    with pytest.raises(IntegrityError):
        async with ctx.db.transaction() as session:
            await session.execute(update(Run).where(Run.id == ids[1]).values(status="awaiting_approval"))
    assert await _statuses(ctx) == [(1, "applying"), (2, "queued")]


async def test_only_a_run_taking_the_lock_changes_status_inside_a_savepoint(
    ctx: Context, tenant: Tenant, stack: str
) -> None:
    """Its refusal by the one-lock index must leave the caller's transaction usable; any other
    move (a plan's end, an apply's) cannot break that index and saves the savepoint's round trips."""
    run_id = await start(ctx, tenant.token, tenant.org, stack, "apply")
    counter = StatementCounter(ctx.db)
    try:
        for target in (RunStatus.PLANNING, RunStatus.APPLY_QUEUED, RunStatus.APPLYING, RunStatus.APPLIED):
            async with ctx.unit() as unit:
                run = await unit.session.get(Run, run_id)
                assert run is not None
                with counter.counting() as statements:
                    await change_status(unit, run, target)
                savepoints = [s for s in statements if s.upper().startswith("SAVEPOINT")]
                assert len(savepoints) == (1 if target == RunStatus.PLANNING else 0), (target, statements)
    finally:
        counter.close()
    assert await _statuses(ctx) == [(1, "applied")]
