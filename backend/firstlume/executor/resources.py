"""Resource states, shipped in the background in batches, in the order they happened.

`add` only appends to memory, so the apply's output pipe is never held up by the network: the
sender wakes every `interval` seconds, or as soon as `max_batch` states wait, and posts them one
batch at a time. Each state is the resource's whole state (not a delta), so a batch that is
resent after a lost answer changes nothing the second time; a batch leaves memory only once the
control plane has accepted it.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Protocol

from firstlume.executor.client import ControlPlaneError, RequestRejected, Unauthorized
from firstlume.protocol.executor import MAX_RESOURCE_UPDATES, ResourceReport
from firstlume.tasks import cancel_and_wait


class ResourceSink(Protocol):
    async def report_resources(self, updates: list[ResourceReport]) -> None: ...


class ResourceShipper:
    def __init__(self, sink: ResourceSink, *, interval: float = 0.1, max_batch: int = 1000) -> None:
        self._sink = sink
        self._interval = interval
        self._max_batch = min(max_batch, MAX_RESOURCE_UPDATES)
        self._pending: list[ResourceReport] = []
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._refused: RequestRejected | None = None
        self.batches_sent = 0

    @property
    def pending(self) -> int:
        return len(self._pending)

    def add(self, update: ResourceReport) -> None:
        self._pending.append(update)
        if len(self._pending) >= self._max_batch:
            self._wake.set()

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="resource-shipper")

    async def stop(self) -> None:
        """Stops the timer and ships what is left; raises if it cannot be delivered."""
        await self._stop_timer()
        await self.flush()

    async def stop_with_rest(self) -> list[ResourceReport]:
        """Stops the timer and hands back what is left to ship, for the phase's result to carry
        (`POST /finish` with `resources`), when it fits in one batch; more is shipped here, and
        nothing handed back. Raises, as `flush` does, a refusal met before."""
        await self._stop_timer()
        async with self._lock:
            if len(self._pending) <= self._max_batch and self._refused is None:
                rest, self._pending = self._pending, []
                return rest
        await self.flush()
        return []

    async def _stop_timer(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    async def flush(self) -> None:
        """Ships every state added so far; raises if the control plane refused or is unreachable."""
        await self._ship()
        if self._refused is not None:
            raise self._refused

    async def _run(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout=self._interval)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self._ship()
            except Unauthorized:
                return  # the phase is over; the runner hears it from the heartbeat or the flush
            except ControlPlaneError as exc:
                # Kept in memory: the next tick or the final flush sends it again.
                print(f"firstlume executor: resource states not shipped yet: {exc}", file=sys.stderr)

    async def _ship(self) -> None:
        """Ships the states added before the call. What arrives meanwhile waits for the next
        tick (or the final flush): shipping on while Terraform reports would send a request per
        handful of resources, back to back, on the cores Terraform needs."""
        async with self._lock:
            remaining = len(self._pending)
            while remaining:
                batch = self._pending[: min(self._max_batch, remaining)]
                try:
                    await self._sink.report_resources(batch)
                except Unauthorized:
                    raise
                except RequestRejected as exc:
                    # Resending the same batch would be refused again: drop it, fail the phase.
                    self._refused = self._refused or exc
                del self._pending[: len(batch)]
                remaining -= len(batch)
                self.batches_sent += 1
