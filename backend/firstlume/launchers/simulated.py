"""A load-testing launcher (FIRSTLUME_LAUNCHER=simulated): phases run by simulated executors.

Not for real stacks: no Terraform runs and nothing is applied. bench/fleet.py uses it to measure
the control plane under a fleet of phases: every phase speaks the real executor protocol over
HTTP (executor/simulated.py, on the executor's own client), so the control plane's side is the one
production runs.

One simulator process per control plane runs every phase this launcher launches, each an asyncio
task (executor/simulated.py says why not a process per phase). Launches go to it as JSON lines on
its stdin; it answers one line per ended phase. A phase that ended without reporting a result
(exit code 2), and every phase of a simulator that died, is reported to the scheduler as a dead
executor, as the local launcher does for its processes. When the control plane stops, the
simulator's stdin closes and its phases go on to their end, reaching the control plane's public
URL (another replica behind it, in a fleet).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from firstlume.executor import simulated
from firstlume.launchers.base import DeathCallback, ExecutorDied, PhaseLaunch, PhaseRef

log = logging.getLogger("firstlume.launcher.simulated")


@dataclass(frozen=True)
class SimulatedWorkload:
    """Each simulated apply: `resources` changes, `log_lines` lines at `lines_per_second`;
    `record_dir`, where each phase writes what it sent (None: nowhere)."""

    resources: int
    log_lines: int
    lines_per_second: float
    record_dir: Path | None
    log_dir: Path


class SimulatedLauncher:
    def __init__(self, workload: SimulatedWorkload) -> None:
        self.workload = workload
        self._process: asyncio.subprocess.Process | None = None
        self._running: set[PhaseRef] = set()
        self._on_death: DeathCallback | None = None
        self._reader: asyncio.Task[None] | None = None
        self._writing = asyncio.Lock()

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FIRSTLUME_")}
        env[simulated.RESOURCES_VAR] = str(self.workload.resources)
        env[simulated.LOG_LINES_VAR] = str(self.workload.log_lines)
        env[simulated.LINES_PER_SECOND_VAR] = str(self.workload.lines_per_second)
        if self.workload.record_dir is not None:
            env[simulated.RECORD_DIR_VAR] = str(self.workload.record_dir)
        return env

    async def start(self, on_death: DeathCallback) -> None:
        log.warning(
            "FIRSTLUME_LAUNCHER=simulated: phases are run by simulated executors (no Terraform, "
            "nothing applied); a load-testing tool only"
        )
        self._on_death = on_death
        self.workload.log_dir.mkdir(parents=True, exist_ok=True)
        output = (self.workload.log_dir / "simulator.log").open("ab")
        try:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "firstlume.executor.simulated",
                env=self._environment(), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=output, start_new_session=True, limit=1 << 20,
            )  # fmt: skip
        finally:
            output.close()
        self._reader = asyncio.create_task(self._read_endings(), name="simulated-executors")

    async def launch(self, launch: PhaseLaunch) -> None:
        ref = PhaseRef(launch.run_id, launch.phase, launch.attempt)
        process = self._process
        if ref in self._running or process is None or process.stdin is None:
            return
        told = {
            "FIRSTLUME_CONTROL_PLANE_URL": launch.control_plane_url,
            "FIRSTLUME_EXECUTOR_TOKEN": launch.token,
            "FIRSTLUME_RUN_ID": launch.run_id,
            "FIRSTLUME_PHASE": launch.phase,
            "FIRSTLUME_ATTEMPT": str(launch.attempt),
        }
        self._running.add(ref)
        async with self._writing:
            process.stdin.write(json.dumps(told).encode() + b"\n")
            await process.stdin.drain()

    async def _read_endings(self) -> None:
        process = self._process
        assert process is not None and process.stdout is not None
        while line := await process.stdout.readline():
            ended = json.loads(line)
            ref = PhaseRef(ended["run_id"], ended["phase"], int(ended["attempt"]))
            self._running.discard(ref)
            if ended["exit_code"] == 2:
                await self._died(ref, "The simulated executor ended without reporting a result.")
        code = await process.wait()
        for ref in list(self._running):
            self._running.discard(ref)
            await self._died(ref, f"The simulator process exited with code {code} before the phase ended.")

    async def _died(self, ref: PhaseRef, reason: str) -> None:
        if self._on_death is not None:
            try:
                await self._on_death(ExecutorDied(ref, reason))
            except Exception:
                log.exception("reporting the end of simulated executor %s failed", ref)

    async def check_health(self, active: list[PhaseRef]) -> list[ExecutorDied]:
        return []  # ends are reported as they are read; other replicas' phases: the heartbeat timeout

    async def cleanup(self, ref: PhaseRef) -> None:
        """A simulated phase ends by itself (its token dies with the phase: a 401 stops it)."""

    async def cancel(self, run_id: str) -> None:
        """As cleanup: nothing outlives its phase's token."""

    async def close(self) -> list[ExecutorDied]:
        """The simulator's stdin closes: it takes no more phases and ends once its phases have
        (they go on against the public URL, as a Kubernetes Job does when its replica stops)."""
        process, self._process = self._process, None
        if process is not None and process.stdin is not None:
            with suppress(BrokenPipeError, ConnectionResetError):
                process.stdin.close()
        if self._reader is not None:
            self._reader.cancel()
            with suppress(asyncio.CancelledError):
                await self._reader
        return []
