"""The one shape of every loop of the control plane (scheduler, outbox relay, notification
sender, drift scheduler, Git poll, token watch): a service that makes a pass, pauses, and makes
the next, until it is stopped.

- `run_pass()` is the service's work. The next pass follows `next_pass_in()` seconds later, or
  at once when something calls `kick()` (a commit that left it work).
- Error policy: a pass that raises is logged (with its traceback when a run of failures starts or
  its error changes, then one line each), counted in firstlume_background_failed_passes_total,
  and the next pass waits at least retry.SERVICE_PASS's backoff (a kick still starts it at once:
  it brings work, most often from a commit, which says the database answers again). The loop
  goes on; it never dies of an error. Only `stop()` ends it.
- `stop()` is prompt: a pause ends at once and a pass in progress is cancelled, unless the
  service has a `stop_grace` (the outbox relay): its pass may end, and it makes a last one first.
- Its last good pass: firstlume_background_last_pass_timestamp_seconds{service}, and `health()`
  for /readyz.
"""

from __future__ import annotations

import asyncio
import logging
import time
from abc import ABC, abstractmethod
from contextlib import suppress

from firstlume import metrics, retry


class BackgroundService(ABC):
    def __init__(self, name: str, *, interval: float, log: logging.Logger, stop_grace: float = 0.0) -> None:
        self.name = name
        self.interval = interval
        self.log = log
        # Seconds a stop waits for the pass in progress and a last one (0: it cancels the pass).
        self.stop_grace = stop_grace
        self.failures = 0  # passes failed in a row
        self._kicked = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._last_pass: float | None = None
        self._last_error = ""
        self._passed_metric = metrics.BACKGROUND_LAST_PASS.labels(service=name)
        self._failed_metric = metrics.BACKGROUND_FAILED_PASSES.labels(service=name)

    @abstractmethod
    async def run_pass(self) -> None:
        """One pass of the service's work."""

    def next_pass_in(self) -> float:
        """Seconds from the end of a pass to the next one, unless kicked."""
        return self.interval

    async def pause(self, seconds: float) -> None:
        """Waits `seconds`, or until kicked (a stop kicks)."""
        with suppress(TimeoutError):
            await asyncio.wait_for(self._kicked.wait(), seconds)

    def kick(self) -> None:
        """Makes the next pass now (or right after the one in progress)."""
        self._kicked.set()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    @property
    def stopping(self) -> bool:
        return self._stopping

    async def start(self) -> None:
        if self.running:
            return
        self._stopping = False
        self._task = asyncio.create_task(self._run(), name=f"firstlume-{self.name}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping = True
        self._kicked.set()
        if self.stop_grace:
            done, _ = await asyncio.wait({task}, timeout=self.stop_grace)
            if not done:
                self.log.warning(
                    "%s did not end its last pass within %gs; stopped", self.name, self.stop_grace
                )
        task.cancel()
        with suppress(asyncio.CancelledError):
            await task

    def health(self) -> dict[str, object]:
        age = None if self._last_pass is None else round(time.monotonic() - self._last_pass, 3)
        return {"up": self.running, "last_pass_age_s": age, "failed_passes_in_a_row": self.failures}

    async def _run(self) -> None:
        task = asyncio.current_task()
        assert task is not None
        while True:
            last = self._stopping  # the last pass of a stop with a grace
            self._kicked.clear()
            try:
                await self.run_pass()
            except asyncio.CancelledError as error:
                if self._stopping or task.cancelling():
                    raise
                self._failed(error)  # cancelled by something inside the pass, not by a stop
            except Exception as error:
                if task.cancelling():
                    return  # a database driver turned the stop's cancellation into an error
                self._failed(error)
            else:
                self._passed()
            if last or task.cancelling() or (self._stopping and not self.stop_grace):
                return
            delay = self.next_pass_in()
            if self.failures:
                delay = max(delay, retry.SERVICE_PASS.delay(self.failures))
            await self.pause(delay)

    def _passed(self) -> None:
        if self.failures:
            self.log.warning("%s works again after %d failed passes", self.name, self.failures)
        self.failures = 0
        self._last_error = ""
        self._last_pass = time.monotonic()
        self._passed_metric.set_to_current_time()

    def _failed(self, error: BaseException) -> None:
        self.failures += 1
        self._failed_metric.inc()
        kind = type(error).__name__
        if kind != self._last_error:
            self.log.error("%s: a pass failed; trying again", self.name, exc_info=error)
        else:
            self.log.warning("%s: %d passes in a row failed: %s: %s", self.name, self.failures, kind, error)
        self._last_error = kind
