"""Drift schedules: two control planes on one database queue exactly one drift run per due slot
per stack, never a second one while the stack's drift run waits, and the loop follows its clock."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from conftest import Tenant, make_stack
from firstlume.db.engine import Database
from firstlume.db.models import Run, Stack
from firstlume.db.models_drift import DriftSlot
from firstlume.domain.runs import RunStatus, RunType, TriggerKind
from firstlume.pubsub import PubSub
from firstlume.services import accounts, catalog, runs
from firstlume.services.commands import CancelRun, PatchSettings, StartRun
from firstlume.services.context import Context
from firstlume.services.drift.loop import DriftScheduler, seconds_to_next_minute
from firstlume.services.drift.schedule import latest_slot
from firstlume.services.inherited import patch_settings
from firstlume.services.reads.settings import Scope

START = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def replica(ctx: Context) -> AsyncIterator[Context]:
    """A second control plane: its own engine (connections) on the same database."""
    pubsub = PubSub("memory://")
    await pubsub.connect()
    other = Context(
        settings=ctx.settings, db=Database(ctx.settings.database_url), keyring=ctx.keyring, pubsub=pubsub
    )
    yield other
    await other.db.dispose()
    await pubsub.disconnect()


async def set_schedule(ctx: Context, tenant: Tenant, schedule: str | None, stack: str | None = None) -> None:
    async with ctx.unit() as unit:
        actor = await accounts.authenticate(unit.session, tenant.token)
        org = await accounts.org_for(unit.session, actor, tenant.org)
        scope: Scope = org
        if stack is not None:
            scope = await catalog.stack_by_slug(unit.session, org, stack)
        await patch_settings(unit.session, scope, PatchSettings(drift_schedule=schedule))


async def drift_runs(ctx: Context) -> list[Run]:
    async with ctx.db.read() as session:
        return list(
            await session.scalars(
                select(Run).where(Run.type == RunType.DRIFT).order_by(Run.created_at, Run.id)
            )
        )


async def cancel_all(ctx: Context, tenant: Tenant, run_ids: list[str]) -> None:
    async with ctx.unit() as unit:
        actor = await accounts.authenticate(unit.session, tenant.token)
        org = await accounts.org_for(unit.session, actor, tenant.org)
        for run_id in run_ids:
            await runs.cancel_run(unit, actor, org, run_id, CancelRun())


async def test_two_control_planes_queue_one_drift_run_per_minute_per_stack(
    ctx: Context, replica: Context, tenant: Tenant
) -> None:
    for slug in ("network", "dns"):
        await make_stack(ctx, tenant, {"slug": slug, "repository": "file:///repo"})
    await set_schedule(ctx, tenant, "* * * * *")
    clock = Clock(START)
    first, second = DriftScheduler(ctx, clock=clock), DriftScheduler(replica, clock=clock)
    minutes = 5
    for minute in range(minutes):
        # Both replicas pass at the same moment, several times within the minute.
        for second_of_minute in (0, 1, 30):
            clock.now = START + timedelta(minutes=minute, seconds=second_of_minute)
            await asyncio.gather(first.tick(), second.tick(), first.tick())
        queued = [run for run in await drift_runs(ctx) if run.status == RunStatus.QUEUED]
        assert sorted(r.stack_id for r in queued) == sorted({r.stack_id for r in queued}) and len(queued) == 2
        # The run is done (here: canceled) before the next slot, so the next one is not skipped.
        await cancel_all(ctx, tenant, [r.id for r in queued])

    all_runs = await drift_runs(ctx)
    assert len(all_runs) == 2 * minutes
    assert Counter(r.stack_id for r in all_runs) == Counter({r.stack_id: minutes for r in all_runs})
    assert {r.trigger_kind for r in all_runs} == {TriggerKind.SCHEDULE}
    assert {r.trigger_actor for r in all_runs} == {"schedule"}
    assert sorted(first.queued + second.queued) == sorted(r.id for r in all_runs)
    async with ctx.db.read() as session:
        slots = list(await session.scalars(select(DriftSlot)))
    assert len(slots) == 2 * minutes
    assert {s.slot_at for s in slots} == {START + timedelta(minutes=m) for m in range(minutes)}


async def test_a_stack_whose_drift_run_waits_gets_no_second_one(
    ctx: Context, replica: Context, tenant: Tenant
) -> None:
    await make_stack(ctx, tenant, {"slug": "network", "repository": "file:///repo"})
    await set_schedule(ctx, tenant, "*/5 * * * *", stack="network")
    clock = Clock(START + timedelta(seconds=3))
    first, second = DriftScheduler(ctx, clock=clock), DriftScheduler(replica, clock=clock)
    await asyncio.gather(first.tick(), second.tick())
    [waiting] = await drift_runs(ctx)
    assert waiting.status == RunStatus.QUEUED
    for minutes in (5, 10):
        clock.now = START + timedelta(minutes=minutes, seconds=1)
        assert await asyncio.gather(first.tick(), second.tick()) == [[], []]
    assert [r.id for r in await drift_runs(ctx)] == [waiting.id]
    async with ctx.db.read() as session:
        slots = list(await session.scalars(select(DriftSlot).order_by(DriftSlot.slot_at)))
    assert [(s.slot_at.minute, s.run_id) for s in slots] == [(0, waiting.id), (5, None), (10, None)]

    # A drift run started by hand counts too.
    await cancel_all(ctx, tenant, [waiting.id])
    async with ctx.unit() as unit:
        actor = await accounts.authenticate(unit.session, tenant.token)
        stack = await unit.session.scalar(select(Stack).where(Stack.slug == "network"))
        assert stack is not None
        manual = await runs.start_run(unit, actor, stack, StartRun(type=RunType.DRIFT))
    clock.now = START + timedelta(minutes=15)
    assert await first.tick() == []
    assert [r.id for r in await drift_runs(ctx)] == [waiting.id, manual.id]


async def test_only_stacks_whose_effective_schedule_is_due_get_a_run(ctx: Context, tenant: Tenant) -> None:
    for slug in ("hourly", "daily", "none"):
        await make_stack(ctx, tenant, {"slug": slug, "repository": "file:///repo"})
    await set_schedule(ctx, tenant, "0 * * * *", stack="hourly")
    await set_schedule(ctx, tenant, "30 6 * * *", stack="daily")
    clock = Clock(START)  # 09:00
    scheduler = DriftScheduler(ctx, clock=clock)
    [hourly] = await scheduler.tick()
    clock.now = START + timedelta(minutes=30)  # 09:30: nothing is due
    assert await scheduler.tick() == []
    async with ctx.db.read() as session:
        stack_of = {r.id: r.stack_id for r in await session.scalars(select(Run))}
        slugs = {s.id: s.slug for s in await session.scalars(select(Stack))}
    assert slugs[stack_of[hourly]] == "hourly"


def test_slots_and_sleeps_follow_the_cron_schedule() -> None:
    assert latest_slot("* * * * *", START + timedelta(seconds=59, microseconds=5)) == START
    assert latest_slot("* * * * *", START) == START
    assert latest_slot("0 6 * * *", START) == START.replace(hour=6)
    assert latest_slot("*/15 * * * *", START - timedelta(seconds=1)) == START - timedelta(minutes=15)
    assert seconds_to_next_minute(START + timedelta(seconds=45)) == 15
    assert seconds_to_next_minute(START) == 60


async def test_the_loop_passes_once_a_minute_of_its_clock(ctx: Context, tenant: Tenant) -> None:
    await make_stack(ctx, tenant, {"slug": "network", "repository": "file:///repo"})
    await set_schedule(ctx, tenant, "* * * * *")
    clock = Clock(START + timedelta(seconds=20))
    slept: list[float] = []
    done = asyncio.Event()

    async def sleep(seconds: float) -> None:
        # Time passes only when the loop sleeps: three minutes of it, then the test ends the loop.
        slept.append(seconds)
        clock.now += timedelta(seconds=seconds)
        if len(slept) == 3:
            done.set()
            await asyncio.Event().wait()
        await asyncio.sleep(0)
        if scheduler.queued:
            await cancel_all(
                ctx, tenant, [r.id for r in await drift_runs(ctx) if r.status == RunStatus.QUEUED]
            )

    scheduler = DriftScheduler(ctx, clock=clock, sleep=sleep)
    await scheduler.start()
    await asyncio.wait_for(done.wait(), 30)
    await scheduler.stop()
    assert slept == [40, 60, 60]
    assert len(scheduler.queued) == 3
    assert len(await drift_runs(ctx)) == 3
