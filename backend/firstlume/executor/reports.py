"""Reports that need no answer (steps, commit, configuration, state backends), sent in the
background in the order the phase made them, together: `POST /reports` carries every report made
while the previous request was out (a step's end and the next one's start, say) in one request,
which the control plane records in one transaction.

The phase goes on with its work meanwhile, so a round trip to the control plane is not on the
engine's critical path, and the control plane's work per report is shared by all of a request's
(one token check, one lock, one commit): on two cores that work slowed the engine beside it. A
refusal is kept and raised by `flush`, which the phase calls before it reports its result:
nothing is lost, and the result is never reported before a step's end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from firstlume.domain.runs import StepStatus
from firstlume.executor.client import ControlPlaneError
from firstlume.protocol.executor import MAX_REPORTS, Report, StepEntry
from firstlume.tasks import cancel_and_wait


class ReportSink(Protocol):
    async def report(self, reports: list[Report]) -> None: ...


def ends_step(report: Report) -> bool:
    return isinstance(report, StepEntry) and report.status != StepStatus.RUNNING


class OrderedReports:
    """`before_step_end` runs before a request that ends a step (the phase ships the step's log
    with it), so a finished step always shows its whole log."""

    def __init__(
        self,
        sink: ReportSink,
        *,
        before_step_end: Callable[[], Awaitable[None]] | None = None,
        max_batch: int = MAX_REPORTS,
    ) -> None:
        self._sink = sink
        self._before_step_end = before_step_end
        self._max_batch = max_batch
        self._pending: list[Report] = []
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._failure: ControlPlaneError | None = None
        self.requests_sent = 0

    def send(self, report: Report) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="ordered-reports")
        self._pending.append(report)
        self._idle.clear()
        self._wake.set()

    async def flush(self) -> None:
        """Waits until every report so far is delivered; raises the first refusal, if any."""
        if self._task is not None:
            await self._idle.wait()
        if self._failure is not None:
            raise self._failure

    async def stop(self) -> None:
        """Delivers what is queued, stops the sender, and raises the first refusal, if any."""
        try:
            await self.flush()
        finally:
            await self.abandon()

    async def abandon(self) -> None:
        """Drops what is queued: the phase is over for the control plane."""
        await cancel_and_wait(self._task)
        self._task = None
        self._pending.clear()
        self._idle.set()

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._pending:
                batch = self._pending[: self._max_batch]
                del self._pending[: len(batch)]
                await self._deliver(batch)
            self._idle.set()

    async def _deliver(self, batch: list[Report]) -> None:
        if self._failure is not None:
            return  # later reports would build on the refused one (a step's end on its start)
        try:
            if self._before_step_end is not None and any(ends_step(r) for r in batch):
                await self._before_step_end()
            await self._sink.report(batch)
            self.requests_sent += 1
        except ControlPlaneError as exc:
            self._failure = exc
        except Exception as exc:
            self._failure = ControlPlaneError(f"a report failed unexpectedly: {type(exc).__name__}: {exc}")
