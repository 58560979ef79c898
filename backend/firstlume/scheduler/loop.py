"""The loop inside the control plane. It holds no state of its own that matters: every decision
is read from the database, so a restarted or second process picks up exactly where the data says.

Each pass: clean up after canceled runs, claim queued phases until none is left and launch them,
fail runs whose heartbeat stopped, and ask the launcher which executors died. A pass starts at
once when an event says there is work (a run started, approved, ended or canceled), and at the
latest every FIRSTLUME_SCHEDULER_INTERVAL seconds (a background service: background.py). The scheduler is the only caller of the
launcher: the API changes the database, and the scheduler makes the executors follow (a plan's
result that claims its own apply hands the launch to the scheduler: launch_claimed). The services
reach it through its port (services/ports.SchedulerPort), which the app gives to the Context it
builds after the scheduler; the scheduler's own context has none, and it wakes itself when its
own changes (a phase it failed) free a stack.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime, timedelta
from typing import cast

from firstlume import metrics, retry
from firstlume.background import BackgroundService
from firstlume.db.types import utcnow
from firstlume.domain.claims import APPLIES, BOTH, PLANS, Claim
from firstlume.domain.runs import RunStatus
from firstlume.launchers.base import ExecutorDied, Launcher, PhaseLaunch, PhaseRef
from firstlume.protocol.events import Event, RunStatusChanged, scheduler_claims
from firstlume.pubsub import SCHEDULER_CHANNEL
from firstlume.services import dispatch
from firstlume.services.context import Context
from firstlume.services.storage import storage_failure
from firstlume.tasks import cancel_and_wait

log = logging.getLogger("firstlume.scheduler")

# Launches of one batch that may be in flight at once (each may be a Kubernetes API round trip).
LAUNCH_CONCURRENCY = 16
# Batches claimed in one pass before heartbeats and health get their turn; the pass after
# follows at once.
MAX_BATCHES_PER_PASS = 50
# How often the database is read for canceled runs whose event this process may have missed,
# and how far back the first reading looks (Jobs of finished phases live an hour by default).
CANCEL_RECONCILE_SECONDS = 30.0
CANCEL_LOOKBACK = timedelta(hours=1)
# Slack for clocks of other replicas and for commits that land after a reading.
CANCEL_MARGIN = timedelta(seconds=60)
# How long a change this process woke its own pass for is remembered, waiting for its event to
# come back through the relay (which publishes within a second while the broker is up).
WOKEN_MEMORY_SECONDS = 300.0


class Scheduler(BackgroundService):
    def __init__(
        self,
        ctx: Context,
        launcher: Launcher,
        *,
        cancel_reconcile_seconds: float = CANCEL_RECONCILE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        serving_since: Callable[[], datetime | None] | None = None,
    ) -> None:
        super().__init__("scheduler", interval=ctx.settings.scheduler_interval, log=log)
        self.ctx = ctx
        # When the server first answered a request (None: not yet): heartbeats can arrive only
        # from then, and a start-up (launcher, connections, binding) can take longer than the
        # heartbeat timeout on a busy machine.
        self._serving_since = serving_since
        self.launcher = launcher
        # The claims the events heard since the last pass call for (domain/claims.py).
        self._claims: set[Claim] = set()
        self._listener: asyncio.Task[None] | None = None
        self._checked_at: float | None = None
        self._limit = asyncio.Semaphore(LAUNCH_CONCURRENCY)
        self._clock = clock
        self._reconcile_every = cancel_reconcile_seconds
        self._reconciled_at: float | None = None
        self._canceled_since = utcnow() - CANCEL_LOOKBACK
        # Canceled runs heard of but not yet cleaned up, and those cleaned up (with when).
        self._to_clean: set[str] = set()
        self._cleaned: dict[str, float] = {}
        self._up_since: datetime | None = None
        # Silent executors being stopped: their death is the heartbeat timeout's doing.
        self._silenced: set[PhaseRef] = set()
        # Executor deaths the database could not store yet, retried at every pass.
        self._unrecorded: dict[PhaseRef, ExecutorDied] = {}
        # Changes (run id, status) this process committed and passed for at once (wake), with
        # when: their events, heard again through the relay and the broker, start no second
        # pass. That pass found nothing to claim, and cost a transaction just as the executor
        # launched by the first asked for its spec.
        self._passed_for: dict[tuple[str, str], float] = {}
        # Launches of phases claimed outside a pass (launch_claimed), until they are done.
        self._handed_over: set[asyncio.Task[None]] = set()
        self._launching = False
        # Whether the last pass's claims were refused for storage (logged once, not every pass).
        self._claims_refused = False

    @property
    def launching(self) -> bool:
        """Whether it launches phases claimed outside its passes (from start to stop)."""
        return self._launching

    async def start(self) -> None:
        # Heartbeats could not reach a control plane that was down: none is missed before then.
        self._up_since = utcnow()
        await self.launcher.start(self._on_death)
        self._launching = True
        await super().start()
        self._listener = asyncio.create_task(self._listen(), name="firstlume-scheduler-wake")

    async def stop(self) -> None:
        # A plan's result arriving from now on leaves its apply queued for the next scheduler.
        self._launching = False
        await super().stop()
        await cancel_and_wait(self._listener)
        # A launch already committed ends first: dropped, its run would wait for the heartbeat
        # timeout; ended, the launcher's close stops its executor like every other.
        if self._handed_over:
            await asyncio.wait(list(self._handed_over))
        for died in await self.launcher.close() or []:
            await dispatch.on_executor_died(self.ctx, died)

    def wake(self, claims: Iterable[Claim] = BOTH, changes: Iterable[tuple[str, str]] = ()) -> None:
        """Starts a pass now for the `claims`; `changes` (run id, status) are the committed
        changes that call for it, whose events then need no pass of their own (notice). No
        claims (the change's phase was claimed with it): no pass."""
        now = self._clock()
        for change in changes:
            self._passed_for[change] = now
        claims = frozenset(claims)
        if not claims:
            return
        self._claims.update(claims)
        self.kick()

    def launch_claimed(self, launches: list[PhaseLaunch]) -> None:
        """Launches phases claimed and committed outside a pass (services/dispatch.py
        hand_over_apply), as a pass launches what it claims."""
        for launch in launches:
            metrics.CLAIMED.labels(phase=str(launch.phase)).inc()
            task = asyncio.create_task(self._launch(launch), name="firstlume-hand-over")
            self._handed_over.add(task)
            task.add_done_callback(self._handed_over.discard)

    async def _on_death(self, died: ExecutorDied) -> None:
        if died.ref in self._silenced:
            # Stopped because it fell silent: that is the reason the run shows.
            died = dataclasses.replace(died, reason=self._silence_reason())
        try:
            failed = await dispatch.on_executor_died(self.ctx, died)
        except Exception as error:
            # The database cannot store it now (its disk is full, say): kept, and tried again
            # at every pass, so the run ends failed with this reason once it can be stored.
            log.warning("could not record that %s died (%s); trying again", died.ref, error)
            self._unrecorded[died.ref] = self._blamed(died, error)
            return
        self._unrecorded.pop(died.ref, None)
        self._silenced.discard(died.ref)
        if failed:
            log.warning("run %s failed: %s", died.ref.run_id, died.reason)
        await self.launcher.cleanup(died.ref)
        if failed:
            # Its stack's lock is free. An executor that reported its result before it ended
            # changed nothing here: its report woke the scheduler already.
            self.wake()

    def notice(self, event: Event) -> None:
        """An event of the scheduler channel: there may be work, and a canceled run to clean up."""
        if isinstance(event, RunStatusChanged):
            if event.status == RunStatus.CANCELED:
                self._to_clean.add(event.run_id)
            if self._passed_for.pop((event.run_id, str(event.status)), None) is not None:
                return  # this process committed it, and its pass began after that commit
        self.wake(scheduler_claims(event))

    def _forget_old_wakes(self, now: float) -> None:
        """Changes whose event never came back (the broker was down) are not kept for ever."""
        horizon = now - WOKEN_MEMORY_SECONDS
        self._passed_for = {change: at for change, at in self._passed_for.items() if at >= horizon}

    async def _listen(self) -> None:
        # Starting, approving, ending or canceling a run publishes on this channel, so the next
        # pass happens at once rather than at the next tick. While the subscription is down,
        # passes follow the interval.
        async for attempt in retry.BROKER_RECONNECT.retrying(
            Exception, log=log, what="the scheduler's wake-up subscription"
        ):
            with attempt:
                async with self.ctx.pubsub.subscribe(SCHEDULER_CHANNEL) as events:
                    async for event in events:
                        self.notice(event)

    async def run_pass(self) -> None:
        # Events wake a pass for their work (a run to start, a lock freed), which claims what
        # they call for; the executors' health is checked, and both kinds claimed, at the
        # interval's pace only: a run's every step wakes a pass, and each would otherwise pay
        # two more reads.
        now = self._clock()
        health = self._checked_at is None or now - self._checked_at >= self.interval
        claims = BOTH if health or not self._claims else frozenset(self._claims)
        self._claims.clear()
        try:
            await self.tick(health=health, claims=claims)
        finally:
            if health:
                self._checked_at = now
                self._forget_old_wakes(now)

    async def tick(self, *, health: bool = True, claims: Iterable[Claim] = BOTH) -> None:
        """One pass: deaths not yet stored, canceled runs' leftovers, queued phases of the kinds
        `claims` names; with `health`, silent executors and the launcher's view of the running
        phases too."""
        for died in list(self._unrecorded.values()):
            await self._on_death(died)
        await self.clean_up_canceled()
        try:
            await self.dispatch(claims)
        except Exception as error:
            storage = storage_failure(error)
            if storage is None:
                raise
            # Nothing can be claimed while the database stores nothing (a full disk; PostgreSQL
            # that only reads refuses even the claim's row locks), but the passes go on at their
            # pace: silent executors are still found and stopped, and what could not be stored is
            # stored at the first pass after the storage is back, not after a failed pass's backoff.
            self.ctx.storage.failed(storage)
            if not self._claims_refused:
                log.warning("no phase can be claimed: %s", storage.message)
            self._claims_refused = True
        else:
            if self._claims_refused:
                log.warning("phases can be claimed again")
            self._claims_refused = False
        if health:
            await self.check_health()

    async def check_health(self) -> None:
        up_since = self._serving_since() if self._serving_since is not None else self._up_since
        for ref in [] if up_since is None else await dispatch.silent_phases(self.ctx, up_since=up_since):
            # A silent executor may still be running: it is stopped first, and only then does
            # the run fail and release its stack's lock, so the next run never finds Terraform
            # still holding the state.
            # Kept until its failure is stored: the launcher may report the stopped executor's
            # death a moment after the stop, and the run must not then fail as merely killed.
            self._silenced.add(ref)
            try:
                await self.launcher.cleanup(ref)
            except Exception:
                self._silenced.discard(ref)
                log.exception("stopping the silent executor of %s failed; its lock stays", ref)
                continue
            metrics.MISSED_HEARTBEATS.inc()
            reason = self._silence_reason()
            try:
                failed = await dispatch.fail_phase(self.ctx, ref, reason)
            except Exception as error:
                if storage_failure(error) is None:
                    self._silenced.discard(ref)
                    raise
                # Its executor is stopped; the run ends failed, storage named as the cause, at
                # the first pass that can store it (as an executor's death is).
                log.warning("could not fail the silent phase %s (%s); trying again", ref, error)
                self._unrecorded[ref] = self._blamed(ExecutorDied(ref, reason), error)
                continue
            self._silenced.discard(ref)
            if failed:
                self.wake()  # its stack's lock is free
        active = await dispatch.running_phases(self.ctx)
        for died in await self.launcher.check_health(active):
            await self._on_death(died)

    def _silence_reason(self) -> str:
        """Why a silent phase fails. When this process met a storage failure within the heartbeat
        timeout, that is most likely why the executor's heartbeats were not stored: said first."""
        reason = dispatch.silence_reason(self.ctx)
        storage = self.ctx.storage.recent(self.ctx.settings.heartbeat_timeout)
        return reason if storage is None else dispatch.blame_storage(storage, reason)

    def _blamed(self, died: ExecutorDied, error: BaseException) -> ExecutorDied:
        """`died`, whose failure the database could not store because of `error`: when that is a
        storage failure (a full disk), the phase's reports could not be stored either, and the
        run's error names it."""
        storage = storage_failure(error)
        if storage is None or storage.kind == "gone":
            return died  # a connection lost for a moment says nothing of the phase's reports
        self.ctx.storage.failed(storage)
        return dataclasses.replace(died, reason=dispatch.blame_storage(storage, died.reason))

    async def dispatch(self, claims: Iterable[Claim] = BOTH) -> int:
        """Claims and launches queued phases (plans, applies or both), batch after batch, until
        none is left."""
        kinds = frozenset(claims)
        launched = 0
        for _ in range(MAX_BATCHES_PER_PASS):
            # Both claims at once, each launching what it took as soon as it is committed: a
            # phase waits for its own claim only, not for the other kind's (usually empty) one.
            # A claim that fails ends the pass once the other's phases are launched: committed,
            # unlaunched, they would sit without an executor until the heartbeat timeout.
            outcomes = await asyncio.gather(
                self._claim_and_launch(dispatch.claim_plans) if PLANS in kinds else _none(),
                self._claim_and_launch(dispatch.claim_applies) if APPLIES in kinds else _none(),
                return_exceptions=True,
            )
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    raise outcome
            plans, applies = cast(tuple[int, int], tuple(outcomes))
            if not plans and not applies:
                return launched
            launched += plans + applies
            if plans < dispatch.CLAIM_BATCH and applies < dispatch.CLAIM_BATCH:
                # Batches that were not full took every phase startable when they were read; what
                # became startable since announced itself, and wakes the next pass. Claiming again
                # found nothing, at the moment the launched executors ask for their spec.
                return launched
        self.wake(kinds)  # more may be queued: the next pass follows at once
        return launched

    async def _claim_and_launch(self, claim: Callable[[Context], Awaitable[list[PhaseLaunch]]]) -> int:
        with metrics.timed(metrics.CLAIM_LATENCY):
            launches = await claim(self.ctx)
        for launch in launches:
            metrics.CLAIMED.labels(phase=str(launch.phase)).inc()
        await asyncio.gather(*(self._launch(launch) for launch in launches))
        return len(launches)

    async def _launch(self, launch: PhaseLaunch) -> None:
        ref = PhaseRef(launch.run_id, launch.phase, launch.attempt)
        async with self._limit:
            try:
                await self.launcher.launch(launch)
            except Exception as error:
                log.exception("launching %s failed", ref)
                if await dispatch.fail_phase(self.ctx, ref, f"The executor could not be started: {error}"):
                    self.wake()  # its stack's lock is free

    async def clean_up_canceled(self) -> None:
        """Asks the launcher to remove what canceled runs left (a finished plan's Job, a Job a
        racing launch created). Runs come from the events heard, and periodically from the
        database, for the events this process missed (another replica's, or while it was down)."""
        now = self._clock()
        if self._reconciled_at is None or now - self._reconciled_at >= self._reconcile_every:
            read_at = utcnow()
            self._to_clean |= set(await dispatch.canceled_since(self.ctx, self._canceled_since))
            self._canceled_since = read_at - CANCEL_MARGIN
            self._reconciled_at = now
            # A run canceled before the window is never read again: forget it.
            horizon = now - (CANCEL_LOOKBACK + 2 * CANCEL_MARGIN).total_seconds()
            self._cleaned = {run_id: at for run_id, at in self._cleaned.items() if at >= horizon}
        pending, self._to_clean = self._to_clean - set(self._cleaned), set()
        for run_id in sorted(pending):
            try:
                await self.launcher.cancel(run_id)
            except Exception:
                log.exception("cleaning up after canceled run %s failed; will retry", run_id)
                self._to_clean.add(run_id)
                continue
            self._cleaned[run_id] = now


async def _none() -> int:
    """A claim the pass does not make: it claimed nothing."""
    return 0
