"""A change that makes a run startable wakes this process's scheduler as soon as it commits,
without waiting for its event to go through the outbox relay and the broker: the start of every
run waits for that pass. A plan whose apply needs no approval hands over to its apply with no
pass at all: its result claims the apply, which is launched once the result commits."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import httpx
import pytest
from starlette.applications import Starlette

from conftest import Tenant, make_stack
from firstlume.domain.claims import Claim
from firstlume.launchers.base import ExecutorDied, PhaseLaunch, PhaseRef
from firstlume.protocol.events import RunUpdated
from firstlume.pubsub import run_channel
from firstlume.scheduler.loop import Scheduler
from firstlume.services import accounts, catalog, dispatch, outbox, runs
from firstlume.services.commands import StartRun
from firstlume.services.context import Context
from support.executor_api import ExecutorReports
from support.launchers import QuietLauncher
from support.runs import CREATE_ONE, start, status_of


class PassWatchingLauncher(QuietLauncher):
    """Records launches and counts the scheduler's passes (each ends with a health check)."""

    def __init__(self) -> None:
        self.launched: list[tuple[str, str]] = []
        self.tokens: list[str] = []
        self.passes = 0
        self.pass_ended = asyncio.Event()
        self.launch_seen = asyncio.Event()

    async def launch(self, launch: PhaseLaunch) -> None:
        self.launched.append((launch.run_id, launch.phase))
        self.tokens.append(launch.token)
        self.launch_seen.set()

    async def check_health(self, active: list[PhaseRef]) -> list[ExecutorDied]:
        self.passes += 1
        self.pass_ended.set()
        return []


async def test_a_started_run_is_launched_by_this_process_without_the_relay(
    ctx: Context, tenant: Tenant
) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    # No relay runs (ctx.relay is None), so the run's event is never published, and the interval
    # is far longer than the test: only the wake after commit can start the next pass.
    ctx.settings = ctx.settings.model_copy(update={"scheduler_interval": 3600.0})
    launcher = PassWatchingLauncher()
    scheduler = Scheduler(ctx, launcher)  # type: ignore[arg-type]
    ctx = replace(ctx, scheduler=scheduler)  # as the app gives the services its port
    await scheduler.start()
    try:
        await asyncio.wait_for(launcher.pass_ended.wait(), timeout=10)  # the first pass: nothing queued
        assert launcher.launched == []
        run_id = await start(ctx, tenant.token, tenant.org, "net", "plan")
        await asyncio.wait_for(launcher.launch_seen.wait(), timeout=10)
    finally:
        await scheduler.stop()
    assert launcher.launched == [(run_id, "plan")]
    assert await status_of(ctx, run_id) == "planning"


async def test_only_a_committed_change_for_the_scheduler_wakes_it(ctx: Context, tenant: Tenant) -> None:
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    wakes: list[str] = []

    class Woken:
        launching = False

        def wake(self, claims: frozenset[Claim], changes: tuple[tuple[str, str], ...]) -> None:
            wakes.append("woken")

        def launch_claimed(self, launches: list[PhaseLaunch]) -> None:
            raise AssertionError("nothing is handed over here")

    ctx = replace(ctx, scheduler=Woken())

    with pytest.raises(RuntimeError, match="changed my mind"):
        async with ctx.unit() as unit:
            actor = await accounts.authenticate(unit.session, tenant.token)
            org = await accounts.org_for(unit.session, actor, tenant.org)
            stack = await catalog.stack_by_slug(unit.session, org, "net")
            await runs.start_run(unit, actor, stack, StartRun(type="plan"))
            raise RuntimeError("changed my mind")
    assert wakes == []  # rolled back: nothing became startable

    run_id = await start(ctx, tenant.token, tenant.org, "net", "plan")
    assert wakes == ["woken"]

    # An event for live views only (the run's commit or configuration) is not the scheduler's.
    async with ctx.unit() as unit:
        await outbox.record(unit, RunUpdated(run_id=run_id), [run_channel(run_id)])
    assert wakes == ["woken"]


async def test_a_plan_needing_no_approval_launches_its_apply_with_its_result(
    app: Starlette, client: httpx.AsyncClient, tenant: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctx = app.state.ctx
    ctx.settings = ctx.settings.model_copy(update={"scheduler_interval": 3600.0})
    applies_claimed: list[int] = []
    claim_applies = dispatch.claim_applies

    async def counted(ctx: Context, limit: int | None = None) -> list[PhaseLaunch]:
        launches = await claim_applies(ctx, limit)
        applies_claimed.append(len(launches))
        return launches

    monkeypatch.setattr(dispatch, "claim_applies", counted)
    await make_stack(ctx, tenant, {"slug": "net", "repository": "file:///repo"})
    settings = await client.patch(
        "/api/v1/orgs/acme/settings", headers=tenant.headers, content='{"require_approval": false}'
    )
    assert settings.status_code == 200, settings.text
    launcher = PassWatchingLauncher()
    scheduler = Scheduler(ctx, launcher)  # type: ignore[arg-type]
    app.state.ctx = ctx = replace(ctx, scheduler=scheduler)  # as the app gives the services its port
    await scheduler.start()
    try:
        await asyncio.wait_for(launcher.pass_ended.wait(), timeout=10)  # the first pass, at the interval
        run_id = await start(ctx, tenant.token, tenant.org, "net", "apply")
        await asyncio.wait_for(launcher.launch_seen.wait(), timeout=10)
        assert launcher.launched == [(run_id, "plan")]
        launcher.launch_seen.clear()
        applies_claimed.clear()
        plan = ExecutorReports(client, launcher.tokens[0])
        await plan.plan(CREATE_ONE)
        assert await plan.finish() == "applying"  # the result's answer: its apply is claimed
        await asyncio.wait_for(launcher.launch_seen.wait(), timeout=10)
        assert launcher.launched == [(run_id, "plan"), (run_id, "apply")]
        # Neither the result's commit nor its event woke a pass that claimed applies.
        assert applies_claimed == []
        # The apply's token is good: the apply's executor gets its spec.
        spec = await client.get(
            "/api/v1/executor/spec", headers={"Authorization": f"Bearer {launcher.tokens[1]}"}
        )
        assert spec.status_code == 200, spec.text
        assert spec.json()["phase"] == "apply"
    finally:
        await scheduler.stop()
    history = await client.get(f"/api/v1/orgs/acme/runs/{run_id}", headers=tenant.headers)
    assert history.json()["status"] == "applying"
