"""Heartbeats on a timer, so the scheduler knows this phase is alive."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Protocol

from firstlume.executor.client import ControlPlaneError, Unauthorized
from firstlume.tasks import cancel_and_wait


class HeartbeatSink(Protocol):
    async def heartbeat(self) -> None: ...


class Heartbeat:
    """Sends a heartbeat every `interval` seconds until stopped. The first goes one interval
    after the start: the control plane counts the phase's claim and its spec request as signs of
    life, and a beat at once would only add a request to the busiest moment of the phase.

    A failed heartbeat is only reported on stderr: the next one may get through, and the
    control plane tolerates gaps up to its timeout. A 401 means the phase is over for the
    control plane (the token is dead): heartbeats stop and `on_unauthorized` is called.
    """

    def __init__(
        self,
        sink: HeartbeatSink,
        interval: float,
        *,
        on_unauthorized: Callable[[], None] | None = None,
    ) -> None:
        if interval <= 0:
            raise ValueError(f"heartbeat interval must be positive, got {interval}")
        self._sink = sink
        self._interval = interval
        self._on_unauthorized = on_unauthorized
        self._task: asyncio.Task[None] | None = None
        self.sent = 0
        self.unauthorized = False

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="heartbeat")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def __aenter__(self) -> Heartbeat:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_beat = loop.time() + self._interval
        await asyncio.sleep(self._interval)
        while True:
            try:
                await self._sink.heartbeat()
                self.sent += 1
            except Unauthorized:
                self.unauthorized = True
                if self._on_unauthorized is not None:
                    self._on_unauthorized()
                return
            except ControlPlaneError as exc:
                print(f"firstlume executor: heartbeat failed: {exc}", file=sys.stderr)
            next_beat = max(next_beat + self._interval, loop.time())
            await asyncio.sleep(next_beat - loop.time())
