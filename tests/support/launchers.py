"""A launcher that does nothing, for scheduler tests to override the one or two methods they
watch (a launch recorded, a pass's end noticed, a cleanup that fails)."""

from __future__ import annotations

from firstlume.launchers.base import DeathCallback, ExecutorDied, PhaseLaunch, PhaseRef


class QuietLauncher:
    """Launches nothing, finds no executor dead, removes nothing."""

    async def start(self, on_death: DeathCallback) -> None:
        return None

    async def launch(self, launch: PhaseLaunch) -> None:
        return None

    async def check_health(self, active: list[PhaseRef]) -> list[ExecutorDied]:
        return []

    async def cleanup(self, ref: PhaseRef) -> None:
        return None

    async def cancel(self, run_id: str) -> None:
        return None

    async def close(self) -> list[ExecutorDied]:
        return []
