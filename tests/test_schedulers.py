"""Several control-plane processes on one database: every phase launched exactly once, and
never two runs holding one stack's lock."""

from __future__ import annotations

import asyncio
import random
from collections import Counter

from sqlalchemy import select

from conftest import Tenant, make_stack
from firstlume.db.engine import Database
from firstlume.db.models import Run, RunStatusChange
from firstlume.domain.runs import FINISHED, HOLDS_LOCK, RunStatus
from firstlume.launchers.base import DeathCallback, ExecutorDied, PhaseLaunch, PhaseRef
from firstlume.pubsub import PubSub
from firstlume.scheduler.loop import Scheduler
from firstlume.services.context import Context
from support.runs import report, start

CREATE_ONE = {
    "format_version": "1.2",
    "resource_changes": [
        {
            "address": "terraform_data.a",
            "mode": "managed",
            "type": "terraform_data",
            "name": "a",
            "change": {"actions": ["create"], "before": None, "after": {"input": "x"}, "after_unknown": {}},
        }
    ],
}


class InlineExecutorLauncher:
    """A launcher whose "executor" is a task in this process: it reports through the same
    services the executor HTTP routes call. Everything the schedulers decide is real."""

    def __init__(self, ctx: Context, launches: list[tuple[str, str, int, str]], name: str) -> None:
        self.ctx = ctx
        self.launches = launches
        self.name = name
        self.tasks: set[asyncio.Task[None]] = set()

    async def start(self, on_death: DeathCallback) -> None:
        return None

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

    async def check_health(self, active: list[PhaseRef]) -> list[ExecutorDied]:
        return []

    async def cleanup(self, ref: PhaseRef) -> None:
        return None

    async def cancel(self, run_id: str) -> None:
        return None

    async def close(self) -> list[ExecutorDied]:
        for task in self.tasks:
            task.cancel()
        return []


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
    # Approval off: apply runs go on to their apply phase by themselves.
    async with ctx.unit() as unit:
        from firstlume.db.models import Organization

        org = await unit.session.scalar(select(Organization).where(Organization.slug == tenant.org))
        assert org is not None
        org.require_approval = False
    kinds = ["plan", "apply", "drift", "apply"]
    run_ids = [await start(ctx, tenant.token, tenant.org, slug, kind) for kind in kinds for slug in stacks]

    launches: list[tuple[str, str, int, str]] = []
    schedulers = []
    for name in ("A", "B"):
        # Each "process" has its own engine and connection pool.
        process_ctx = Context(
            settings=ctx.settings,
            db=Database(ctx.settings.database_url),
            keyring=ctx.keyring,
            pubsub=PubSub("memory://"),
        )
        await process_ctx.pubsub.connect()
        scheduler = Scheduler(process_ctx, InlineExecutorLauncher(process_ctx, launches, name))
        schedulers.append(scheduler)
    try:
        for scheduler in schedulers:
            await scheduler.start()
        async with asyncio.timeout(120):
            while not await _all_finished(ctx, len(run_ids)):
                for scheduler in schedulers:
                    scheduler.wake()
                await asyncio.sleep(0.05)
    finally:
        for scheduler in schedulers:
            await scheduler.stop()
            await scheduler.ctx.pubsub.disconnect()
            await scheduler.ctx.db.dispose()

    # Every phase launched exactly once.
    phases = Counter((run_id, phase) for run_id, phase, _, _ in launches)
    assert all(count == 1 for count in phases.values()), [k for k, c in phases.items() if c > 1]
    applies = [
        r for r, kind in zip(run_ids, [k for k in kinds for _ in stacks], strict=True) if kind == "apply"
    ]
    expected = {(r, "plan") for r in run_ids} | {(r, "apply") for r in applies}
    assert set(phases) == expected
    assert {name for *_, name in launches} == {"A", "B"}  # both really took part

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
