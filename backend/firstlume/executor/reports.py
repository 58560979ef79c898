"""Reports that need no answer (steps, commit, configuration, state backends), sent in the
background one after another, in the order the phase made them.

The phase goes on with its work meanwhile, so a round trip to the control plane is not on the
engine's critical path. A refusal is kept and raised by `flush`, which the phase calls before it
reports its result: nothing is lost, and the result is never reported before a step's end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from firstlume.executor.client import ControlPlaneError

Report = Callable[[], Awaitable[None]]


class OrderedReports:
    def __init__(self) -> None:
        self._queue: asyncio.Queue[Report] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._failure: ControlPlaneError | None = None

    def send(self, report: Report) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="ordered-reports")
        self._queue.put_nowait(report)

    async def flush(self) -> None:
        """Waits until every report so far is delivered; raises the first refusal, if any."""
        if self._task is not None:
            await self._queue.join()
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
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    async def _run(self) -> None:
        while True:
            report = await self._queue.get()
            try:
                if self._failure is None:
                    await report()
            except ControlPlaneError as exc:
                # Later reports would build on this one (a step's end on its start): skip them.
                self._failure = exc
            except Exception as exc:
                self._failure = ControlPlaneError(
                    f"a report failed unexpectedly: {type(exc).__name__}: {exc}"
                )
            finally:
                self._queue.task_done()
