"""Several control-plane processes on one database: every phase launched exactly once, never two
runs holding one stack's lock, work shared between replicas, and the queue drained in one pass."""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError

from conftest import Tenant, make_stack
from firstlume.db.engine import Database
from firstlume.db.models import Organization, Run, RunStatusChange
from firstlume.domain.runs import FINISHED, HOLDS_LOCK, RunStatus
from firstlume.launchers.base import ExecutorDied, PhaseLaunch, PhaseRef
from firstlume.pubsub import PubSub
from firstlume.scheduler.loop import Scheduler
from firstlume.services import dispatch
from firstlume.services.context import Context
from firstlume.services.outbox import OutboxRelay
from support.launchers import QuietLauncher
from support.runs import CREATE_ONE, report, start, status_of
from support.waiting import until


class InlineExecutorLauncher(QuietLauncher):
    """A launcher whose "executor" is a task in this process: it reports through the same
    services the executor HTTP routes call. Everything the schedulers decide is real."""

    def __init__(self, ctx: Context, launches: list[tuple[str, str, int, str]], name: str) -> None:
        self.ctx = ctx
        self.launches = launches
        self.name = name
        self.tasks: set[asyncio.Task[None]] = set()

    async def launch(self, launch: PhaseLaunch) -> None:
        self.launches.append((launch.run_id, launch.phase, launch.attempt, self.name))
        task = asyncio.create_task(self._execute(launch))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _execute(self, launch: PhaseLaunch) -> None:
        await asyncio.sleep(random.uniform(0, 0.02))  # executors take different times
        if launch.phase == "plan":
            body = {"plan_file_b64": "cGxhbg==", "plan_json": CREATE_ONE, "variables": []}
            await report(self.ctx, launch.token, "plan", body)
        await report(self.ctx, launch.token, "finish", {"status": "succeeded"})

    async def close(self) -> list[ExecutorDied]:
        for task in self.tasks:
            task.cancel()
        return []


async def _approval_off(ctx: Context, tenant: Tenant) -> None:
    """Apply runs go on to their apply phase by themselves."""
    async with ctx.unit() as unit:
        org = await unit.session.scalar(select(Organization).where(Organization.slug == tenant.org))
        assert org is not None
        org.require_approval = False


async def _process(ctx: Context, **settings: Any) -> Context:
    """A control-plane "process": its own engine and connection pool, its own pub/sub."""
    process_ctx = Context(
        settings=ctx.settings.model_copy(update=settings),
        db=Database(ctx.settings.database_url),
        keyring=ctx.keyring,
        pubsub=PubSub("memory://"),
    )
    await process_ctx.pubsub.connect()
    return process_ctx


async def _stop(schedulers: list[Scheduler]) -> None:
    for scheduler in schedulers:
        await scheduler.stop()
        await scheduler.ctx.pubsub.disconnect()
        await scheduler.ctx.db.dispose()


async def _woken_and_all_finished(ctx: Context, schedulers: list[Scheduler], count: int) -> bool:
    if await _all_finished(ctx, count):
        return True
    for scheduler in schedulers:
        scheduler.wake()
    return False


async def _all_finished(ctx: Context, expected: int) -> bool:
    async with ctx.db.transaction() as session:
        statuses = list(await session.scalars(select(Run.status)))
    return len(statuses) == expected and all(RunStatus(s) in FINISHED for s in statuses)


async def test_two_schedulers_launch_every_phase_once_and_keep_one_lock_per_stack(
    ctx: Context, tenant: Tenant
) -> None:
    stacks = [f"s{i}" for i in range(8)]
    for slug in stacks:
        await make_stack(ctx, tenant, {"slug": slug, "repository": "file:///repo"})
    await _approval_off(ctx, tenant)
    kinds = ["plan", "apply", "drift", "apply"]
    run_ids = [await start(ctx, tenant.token, tenant.org, slug, kind) for kind in kinds for slug in stacks]

    launches: list[tuple[str, str, int, str]] = []
    schedulers = []
    for name in ("A", "B"):
        process_ctx = await _process(ctx)
        schedulers.append(Scheduler(process_ctx, InlineExecutorLauncher(process_ctx, launches, name)))
    try:
        for scheduler in schedulers:
            await scheduler.start()
        await until(
            lambda: _woken_and_all_finished(ctx, schedulers, len(run_ids)), 120, "every run to finish"
        )
    finally:
        await _stop(schedulers)

    # Every phase launched exactly once.
    phases = Counter((run_id, phase) for run_id, phase, _, _ in launches)
    assert all(count == 1 for count in phases.values()), [k for k, c in phases.items() if c > 1]
    applies = [
        r for r, kind in zip(run_ids, [k for k in kinds for _ in stacks], strict=True) if kind == "apply"
    ]
    expected = {(r, "plan") for r in run_ids} | {(r, "apply") for r in applies}
    assert set(phases) == expected
    # Which scheduler launched what is left to the race: one claim batch can hold all of it.

    async with ctx.db.transaction() as session:
        runs = {r.id: r for r in await session.scalars(select(Run))}
        history = (
            (await session.execute(select(RunStatusChange).order_by(RunStatusChange.at, RunStatusChange.id)))
            .scalars()
            .all()
        )
    final = Counter(run.status for run in runs.values())
    assert final == {"planned": 8, "applied": 16, "drifted": 8}

    # Replaying the history in time order: never two lock holders on a stack, and runs took the
    # lock in arrival order.
    holders: dict[str, set[str]] = {}
    order: dict[str, list[int]] = {}
    lock = {s.value for s in HOLDS_LOCK}
    for change in history:
        run = runs[change.run_id]
        held = holders.setdefault(run.stack_id, set())
        if change.to_status in lock:
            held.add(run.id)
            if change.from_status == "queued":
                order.setdefault(run.stack_id, []).append(run.number)
        else:
            held.discard(run.id)
        assert len(held) <= 1, f"two lock holders on one stack: {held}"
    assert all(numbers == sorted(numbers) for numbers in order.values())
    assert sum(len(n) for n in order.values()) == len(run_ids)


class GatedLauncher(InlineExecutorLauncher):
    """The first scheduler to launch is held inside its launch until another scheduler has
    launched too: a replica busy with one batch, while the queue still holds more."""

    def __init__(
        self, ctx: Context, launches: list[tuple[str, str, int, str]], name: str, gate: dict[str, Any]
    ) -> None:
        super().__init__(ctx, launches, name)
        self.gate = gate

    async def launch(self, launch: PhaseLaunch) -> None:
        self.gate.setdefault("first", self.name)
        if self.gate["first"] == self.name:
            await asyncio.wait_for(self.gate["other_launched"].wait(), timeout=30)
        else:
            self.gate["other_launched"].set()
        await super().launch(launch)


async def test_a_second_scheduler_takes_the_work_a_busy_one_has_not_claimed(
    ctx: Context, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dispatch, "CLAIM_BATCH", 3)
    stacks = [f"s{i}" for i in range(8)]
    for slug in stacks:
        await make_stack(ctx, tenant, {"slug": slug, "repository": "file:///repo"})
    run_ids = [await start(ctx, tenant.token, tenant.org, slug, "plan") for slug in stacks]
    launches: list[tuple[str, str, int, str]] = []
    gate: dict[str, Any] = {"other_launched": asyncio.Event()}
    schedulers = []
    for name in ("A", "B"):
        process_ctx = await _process(ctx)
        schedulers.append(Scheduler(process_ctx, GatedLauncher(process_ctx, launches, name, gate)))
    try:
        for scheduler in schedulers:
            await scheduler.start()
        await until(lambda: _woken_and_all_finished(ctx, schedulers, len(run_ids)), 60, "every run to finish")
    finally:
        await _stop(schedulers)
    by_scheduler = Counter(name for *_, name in launches)
    assert set(by_scheduler) == {"A", "B"}, by_scheduler
    assert sorted(run_id for run_id, *_ in launches) == sorted(run_ids)  # each launched once


async def test_one_pass_claims_until_the_queue_is_empty(
    ctx: Context, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dispatch, "CLAIM_BATCH", 3)
    for i in range(10):
        await make_stack(ctx, tenant, {"slug": f"s{i}", "repository": "file:///repo"})
        await start(ctx, tenant.token, tenant.org, f"s{i}", "plan")
    await start(ctx, tenant.token, tenant.org, "s0", "plan")  # waits for s0's first run
    launches: list[tuple[str, str, int, str]] = []
    scheduler = Scheduler(ctx, RecordingLauncher(launches))
    await scheduler.tick()
    assert len(launches) == 10 == len({run_id for run_id, *_ in launches})
    async with ctx.db.transaction() as session:
        statuses = Counter(await session.scalars(select(Run.status)))
    assert statuses == {"planning": 10, "queued": 1}


async def test_a_pass_whose_batches_were_not_full_claims_once(
    ctx: Context, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Claiming again would find nothing, while the executors just launched ask for their spec.
    for slug in ("a", "b"):
        await make_stack(ctx, tenant, {"slug": slug, "repository": "file:///repo"})
        await start(ctx, tenant.token, tenant.org, slug, "plan")
    claims: list[str] = []
    claim_plans, claim_applies = dispatch.claim_plans, dispatch.claim_applies

    async def counted_plans(ctx: Context) -> list[PhaseLaunch]:
        claims.append("plans")
        return await claim_plans(ctx)

    async def counted_applies(ctx: Context) -> list[PhaseLaunch]:
        claims.append("applies")
        return await claim_applies(ctx)

    monkeypatch.setattr(dispatch, "claim_plans", counted_plans)
    monkeypatch.setattr(dispatch, "claim_applies", counted_applies)
    launches: list[tuple[str, str, int, str]] = []

    assert await Scheduler(ctx, RecordingLauncher(launches)).dispatch() == 2

    assert claims == ["plans", "applies"]


async def test_plans_claimed_before_the_applies_claim_failed_are_still_launched(
    ctx: Context, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The database ended the connection between the two claims: the plan's claim is committed,
    # so its executor starts, and the failure still ends the pass.
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    run_id = await start(ctx, tenant.token, tenant.org, "net", "plan")

    async def failing_applies(ctx: Context) -> list[PhaseLaunch]:
        raise DBAPIError("SELECT", None, ConnectionError("the connection ended"))

    monkeypatch.setattr(dispatch, "claim_applies", failing_applies)
    launches: list[tuple[str, str, int, str]] = []

    with pytest.raises(DBAPIError):
        await Scheduler(ctx, RecordingLauncher(launches)).dispatch()

    assert [(r, phase) for r, phase, *_ in launches] == [(run_id, "plan")]
    assert await status_of(ctx, run_id) == "planning"


class RecordingLauncher(InlineExecutorLauncher):
    """Records launches; its executors never report."""

    def __init__(self, launches: list[tuple[str, str, int, str]]) -> None:
        super().__init__(None, launches, "A")  # type: ignore[arg-type]

    async def launch(self, launch: PhaseLaunch) -> None:
        self.launches.append((launch.run_id, launch.phase, launch.attempt, self.name))


class StartsARunWhileFinishingAPass(RecordingLauncher):
    """Its health check, the end of a pass, starts a run: as if a user had, at that moment."""

    def __init__(self, launches: list[tuple[str, str, int, str]], start_run: Any) -> None:
        super().__init__(launches)
        self.start_run = start_run
        self.both_launched = asyncio.Event()
        self.heard = asyncio.Event()

    async def launch(self, launch: PhaseLaunch) -> None:
        await super().launch(launch)
        if len(self.launches) == 2:
            self.both_launched.set()

    async def check_health(self, active: list[PhaseRef]) -> list[ExecutorDied]:
        if self.start_run is not None:
            start_run, self.start_run = self.start_run, None
            await start_run()
            # The wake-up event is heard before this pass ends: the race the loop must survive.
            await asyncio.wait_for(self.heard.wait(), timeout=10)
        return []


async def test_a_run_started_during_a_pass_is_launched_without_waiting_for_the_interval(
    ctx: Context, tenant: Tenant, relay: OutboxRelay
) -> None:
    for slug in ("first", "second"):
        await make_stack(ctx, tenant, {"slug": slug, "repository": "file:///repo"})
    launches: list[tuple[str, str, int, str]] = []
    second: list[str] = []

    async def start_second() -> None:
        second.append(await start(ctx, tenant.token, tenant.org, "second", "plan"))

    # An interval far longer than the test: only the wake-up event can start the next pass.
    process_ctx = await _process(ctx, scheduler_interval=3600.0)
    process_ctx.pubsub = ctx.pubsub  # hears the events the services publish
    launcher = StartsARunWhileFinishingAPass(launches, start_second)
    scheduler = Scheduler(process_ctx, launcher)
    launcher.heard = scheduler._kicked  # the base service's wake-up (background.py)
    await scheduler.start()
    try:
        first = await start(ctx, tenant.token, tenant.org, "first", "plan")
        await asyncio.wait_for(launcher.both_launched.wait(), timeout=20)
    finally:
        await scheduler.stop()
        await process_ctx.db.dispose()
    assert [run_id for run_id, *_ in launches] == [first, *second]
    assert await status_of(ctx, second[0]) == "planning"


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_concurrent_claims_skip_each_others_rows_instead_of_waiting(
    ctx: Context, tenant: Tenant
) -> None:
    """PostgreSQL: a scheduler in the middle of a claim holds its candidates' row locks; another
    one takes the next runs at once (FOR UPDATE SKIP LOCKED), never the same ones."""
    for i in range(6):
        await make_stack(ctx, tenant, {"slug": f"s{i}", "repository": "file:///repo"})
        await start(ctx, tenant.token, tenant.org, f"s{i}", "plan")
    other = await _process(ctx)
    try:
        async with ctx.db.transaction() as session:
            held = set(await session.scalars(dispatch.STARTABLE_PLANS, {"limit": 3}))
            assert len(held) == 3
            async with asyncio.timeout(10):  # waiting on the held rows would time out here
                claimed = await dispatch.claim_plans(other)
            assert len(claimed) == 3 and held.isdisjoint(launch.run_id for launch in claimed)
        assert await dispatch.claim_plans(other) != []  # released: the held ones are claimable again
    finally:
        await other.pubsub.disconnect()
        await other.db.dispose()
