"""The loop inside the control plane. It holds no state of its own: every decision is read from
the database, so a restarted or second process picks up exactly where the data says."""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress

from firstlume.launchers.base import ExecutorDied, Launcher, PhaseLaunch, PhaseRef
from firstlume.pubsub import SCHEDULER_CHANNEL
from firstlume.services import dispatch
from firstlume.services.context import Context

log = logging.getLogger("firstlume.scheduler")


class Scheduler:
    def __init__(self, ctx: Context, launcher: Launcher) -> None:
        self.ctx = ctx
        self.launcher = launcher
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        await self.launcher.start(self._on_death)
        self._tasks.append(asyncio.create_task(self._loop(), name="firstlume-scheduler"))
        self._tasks.append(asyncio.create_task(self._listen(), name="firstlume-scheduler-wake"))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with suppress(asyncio.CancelledError, Exception):
                await task
        for died in await self.launcher.close() or []:
            await dispatch.on_executor_died(self.ctx, died)

    def wake(self) -> None:
        self._wake.set()

    async def _on_death(self, died: ExecutorDied) -> None:
        if await dispatch.on_executor_died(self.ctx, died):
            log.warning("run %s failed: %s", died.ref.run_id, died.reason)
        await self.launcher.cleanup(died.ref)
        self.wake()

    async def _listen(self) -> None:
        # Starting or approving a run publishes on this channel so dispatch happens at once
        # rather than at the next tick.
        while True:
            try:
                async with self.ctx.pubsub.subscribe(SCHEDULER_CHANNEL) as events:
                    async for _ in events:
                        self._wake.set()
            except asyncio.CancelledError:
                raise
            except Exception:  # the pub/sub connection dropped: fall back to ticks, then retry
                log.exception("scheduler wake-up subscription failed")
                await asyncio.sleep(self.ctx.settings.scheduler_interval)

    async def _loop(self) -> None:
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("scheduler tick failed")
            self._wake.clear()
            with suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self.ctx.settings.scheduler_interval)

    async def tick(self) -> None:
        for launch in await dispatch.claim_plans(self.ctx) + await dispatch.claim_applies(self.ctx):
            await self._launch(launch)
        for ref in await dispatch.expire_heartbeats(self.ctx):
            # A silent executor may still be running: stop it before the stack moves on.
            await self.launcher.cleanup(ref)
        active = await dispatch.running_phases(self.ctx)
        for died in await self.launcher.check_health(active):
            await self._on_death(died)

    async def _launch(self, launch: PhaseLaunch) -> None:
        ref = PhaseRef(launch.run_id, launch.phase, launch.attempt)
        try:
            await self.launcher.launch(launch)
        except Exception as error:
            log.exception("launching %s failed", ref)
            await dispatch.fail_phase(self.ctx, ref, f"The executor could not be started: {error}")
