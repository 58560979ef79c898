"""The contract every launcher keeps: launch a phase, report executors that died, clean up.

Only the scheduler calls a launcher (scheduler/loop.py). The API never does: it changes the
database, and the scheduler, hearing of the change or reading it, makes the executors follow.
Every method may be called by several control-plane replicas for the same phase or run, so
each is idempotent, and none may log or expose a phase token."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class PhaseLaunch:
    """Everything an executor needs to find its work; the rest it fetches over HTTP."""

    run_id: str
    phase: str  # "plan" | "apply"
    attempt: int
    token: str  # valid for this run phase only; a launcher must never log it or put it in clear in a spec
    control_plane_url: str
    org_slug: str
    stack_slug: str


@dataclass(frozen=True)
class PhaseRef:
    run_id: str
    phase: str
    attempt: int


@dataclass(frozen=True)
class ExecutorDied:
    """An executor ended without reporting its result. `reason` becomes the run's error."""

    ref: PhaseRef
    reason: str


# Called by a launcher as soon as it learns that an executor died.
DeathCallback = Callable[[ExecutorDied], Awaitable[None]]


class Launcher(Protocol):
    async def start(self, on_death: DeathCallback) -> None:
        """Begin watching executors; called once by the scheduler."""

    async def launch(self, launch: PhaseLaunch) -> None:
        """Start the executor for one phase. Must be safe to call once per (run, phase, attempt)."""

    async def check_health(self, active: list[PhaseRef]) -> list[ExecutorDied]:
        """Given the phases the database says are running, report the ones whose executor is gone.

        Called periodically and after a restart, so a failure that happened while the control
        plane was down is still found."""

    async def cleanup(self, ref: PhaseRef) -> None:
        """Remove whatever the phase left behind (process, Job, Secret). Idempotent."""

    async def cancel(self, run_id: str) -> None:
        """Remove any executor or Job a canceled run left (a finished plan's Job, a racing
        launch). Called by the scheduler when it hears of the cancellation or finds it in the
        database, possibly more than once and on every replica. Idempotent."""

    async def close(self) -> list[ExecutorDied]:
        """Stop watching; called at shutdown. Returns the executors that stop with the control
        plane (a local subprocess does; a Kubernetes Job goes on), so their runs can fail now
        rather than at the heartbeat timeout."""
