"""What a scheduler pass does, and when (scheduler/loop.py): a pass woken by an event claims and
launches, and leaves the executors' health to the interval's pace; the two kinds of claim run at
once, so a phase never waits for the other kind's claim before it is launched."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from conftest import Tenant, make_stack
from firstlume.launchers.base import ExecutorDied, PhaseLaunch, PhaseRef
from firstlume.protocol.events import RunStatusChanged
from firstlume.scheduler.loop import Scheduler
from firstlume.services import dispatch
from firstlume.services.context import Context
from support.launchers import QuietLauncher
from support.runs import start

TIMEOUT = 10.0


class Seen:
    """What the test watches: counts that others change, and waits for a condition on them."""

    def __init__(self) -> None:
        self.passes = 0
        self.health_checks = 0
        self.launched: list[str] = []
        self._changed = asyncio.Condition()

    async def note(self, change: Callable[[], None]) -> None:
        async with self._changed:
            change()
            self._changed.notify_all()

    async def until(self, condition: Callable[[], bool]) -> None:
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(condition), TIMEOUT)


class Watched(QuietLauncher):
    def __init__(self, seen: Seen) -> None:
        self.seen = seen

    async def launch(self, launch: PhaseLaunch) -> None:
        await self.seen.note(lambda: self.seen.launched.append(launch.run_id))

    async def check_health(self, active: list[PhaseRef]) -> list[ExecutorDied]:
        def count() -> None:
            self.seen.health_checks += 1

        await self.seen.note(count)
        return []


def record_claims(seen: Seen, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kinds of claim the scheduler makes from now on, in order ("plans", "applies")."""
    claims: list[str] = []

    def counted(kind: str, claim: Callable[[Context], Any]) -> Callable[[Context], Any]:
        async def claiming(ctx: Context) -> list[PhaseLaunch]:
            await seen.note(lambda: claims.append(kind))
            return list(await claim(ctx))

        return claiming

    monkeypatch.setattr(dispatch, "claim_plans", counted("plans", dispatch.claim_plans))
    monkeypatch.setattr(dispatch, "claim_applies", counted("applies", dispatch.claim_applies))
    return claims


async def test_passes_woken_by_events_check_health_only_at_the_intervals_pace(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The scheduler's clock is the test's: the health check is due again once it moved an interval.
    now = [1000.0]
    interval = 3600.0  # far longer than the test: every pass after the first is woken by wake()
    ctx.settings = ctx.settings.model_copy(update={"scheduler_interval": interval})
    seen = Seen()
    scheduler = Scheduler(ctx, Watched(seen), clock=lambda: now[0])  # type: ignore[arg-type]
    claim_plans = dispatch.claim_plans

    async def counted(ctx: Context) -> list[PhaseLaunch]:
        def count() -> None:
            seen.passes += 1

        await seen.note(count)
        return await claim_plans(ctx)

    monkeypatch.setattr(dispatch, "claim_plans", counted)
    await scheduler.start()
    try:
        await seen.until(lambda: seen.health_checks == 1)  # the first pass checks
        for _ in range(4):
            woken = seen.passes + 1
            scheduler.wake()
            await seen.until(lambda: seen.passes >= woken)  # noqa: B023  (awaited here, in the loop)
        assert seen.health_checks == 1
        now[0] += interval
        scheduler.wake()
        await seen.until(lambda: seen.health_checks == 2)
    finally:
        await scheduler.stop()
    # A pass called directly (as tests and tools do) does all of its work.
    await scheduler.tick()
    assert seen.health_checks == 3


async def test_a_plan_is_launched_while_the_applies_claim_is_still_running(
    ctx: Context, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, tenant.org, "net", "plan")
    may_claim_applies = asyncio.Event()
    claim_applies = dispatch.claim_applies

    async def held_applies(ctx: Context) -> list[PhaseLaunch]:
        await may_claim_applies.wait()
        return await claim_applies(ctx)

    monkeypatch.setattr(dispatch, "claim_applies", held_applies)
    seen = Seen()
    passing = asyncio.create_task(Scheduler(ctx, Watched(seen)).dispatch())  # type: ignore[arg-type]
    await seen.until(lambda: seen.launched == [run_id])
    assert not passing.done()  # launched while the applies' claim has not even begun
    may_claim_applies.set()
    assert await asyncio.wait_for(passing, TIMEOUT) == 1


async def test_a_pass_woken_by_a_change_claims_only_the_kind_it_can_make_startable(
    ctx: Context, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A run queued can only start a plan (no relay here: the start's wake is the only one); the
    # interval's passes, and a wake that names no change, claim both kinds.
    now = [1000.0]
    interval = 3600.0
    ctx.settings = ctx.settings.model_copy(update={"scheduler_interval": interval})
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    seen = Seen()
    claims = record_claims(seen, monkeypatch)
    scheduler = Scheduler(ctx, Watched(seen), clock=lambda: now[0])  # type: ignore[arg-type]
    ctx = replace(ctx, scheduler=scheduler)  # as the app gives the services its port
    await scheduler.start()
    try:
        await seen.until(lambda: seen.health_checks == 1)
        assert sorted(claims) == ["applies", "plans"]  # the first pass, at the interval's pace
        claims.clear()
        run_id = await start(ctx, tenant.token, tenant.org, "net", "plan")
        await seen.until(lambda: seen.launched == [run_id])
        assert claims == ["plans"]  # the start's own wake: no applies' claim beside it
        claims.clear()
        scheduler.wake()  # a wake that says nothing of its cause claims both
        await seen.until(lambda: len(claims) >= 2)
        assert sorted(claims[:2]) == ["applies", "plans"]
        claims.clear()
        # Another replica's run approved (heard through the pub/sub): applies only.
        approved = RunStatusChanged(
            run_id="r", org_id="o", status="apply_queued", from_status="awaiting_approval"
        )
        scheduler.notice(approved)
        await seen.until(lambda: claims == ["applies"])
        scheduler.wake(frozenset({"plans"}))  # a pass after it: had it claimed plans, they'd be before
        await seen.until(lambda: "plans" in claims)
        assert claims == ["applies", "plans"]
    finally:
        await scheduler.stop()


async def test_the_event_of_a_change_this_process_passed_for_starts_no_second_pass(
    ctx: Context, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A change this process commits wakes its scheduler at once; the same change's event comes
    # back later through the relay and the broker, and would start a pass that finds nothing.
    ctx.settings = ctx.settings.model_copy(update={"scheduler_interval": 3600.0})
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    seen = Seen()
    claims = record_claims(seen, monkeypatch)
    scheduler = Scheduler(ctx, Watched(seen))  # type: ignore[arg-type]
    ctx = replace(ctx, scheduler=scheduler)  # as the app gives the services its port
    await scheduler.start()
    try:
        await seen.until(lambda: seen.health_checks == 1)
        claims.clear()
        run_id = await start(ctx, tenant.token, tenant.org, "net", "plan")
        await seen.until(lambda: seen.launched == [run_id])
        assert claims == ["plans"]  # the wake at commit
        claims.clear()
        # The start's own event, heard back, then another replica's approval (applies only): a
        # pass for the echo would claim plans, in that pass or one of its own.
        scheduler.notice(RunStatusChanged(run_id=run_id, org_id="o", status="queued"))
        scheduler.notice(
            RunStatusChanged(run_id="r", org_id="o", status="apply_queued", from_status="awaiting_approval")
        )
        await seen.until(lambda: claims == ["applies"])
        scheduler.wake(frozenset({"applies"}))  # a pass after: everything before it has claimed
        await seen.until(lambda: len(claims) == 2)
        assert claims == ["applies", "applies"]
        # A change this process did not pass for (another replica's run queued) still wakes one,
        # and so does the echo heard a second time (delivery is at least once).
        claims.clear()
        scheduler.notice(RunStatusChanged(run_id="other", org_id="o", status="queued"))
        await seen.until(lambda: claims == ["plans"])
        scheduler.notice(RunStatusChanged(run_id=run_id, org_id="o", status="queued"))
        await seen.until(lambda: claims == ["plans", "plans"])
    finally:
        await scheduler.stop()
