"""The embedded default: each phase's executor is a subprocess of the control plane."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from contextlib import suppress
from pathlib import Path

from firstlume.launchers.base import DeathCallback, ExecutorDied, PhaseLaunch, PhaseRef

log = logging.getLogger("firstlume.launcher.local")


def exit_reason(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"The executor process was killed ({name}) before it reported a result."
    return f"The executor process exited with code {returncode} before it reported a result."


# How long executors get to wind down when the control plane stops.
STOP_GRACE_SECONDS = 10.0


def _kill_group(pid: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class LocalLauncher:
    def __init__(self, log_dir: Path, extra_env: dict[str, str] | None = None) -> None:
        self.log_dir = log_dir
        self.extra_env = extra_env or {}
        self._processes: dict[PhaseRef, asyncio.subprocess.Process] = {}
        self._watchers: set[asyncio.Task[None]] = set()
        self._on_death: DeathCallback | None = None

    async def start(self, on_death: DeathCallback) -> None:
        self._on_death = on_death
        self.log_dir.mkdir(parents=True, exist_ok=True)

    async def launch(self, launch: PhaseLaunch) -> None:
        ref = PhaseRef(launch.run_id, launch.phase, launch.attempt)
        if ref in self._processes:
            return
        env = {
            **os.environ,
            **self.extra_env,
            "FIRSTLUME_CONTROL_PLANE_URL": launch.control_plane_url,
            "FIRSTLUME_EXECUTOR_TOKEN": launch.token,
            "FIRSTLUME_RUN_ID": launch.run_id,
            "FIRSTLUME_PHASE": launch.phase,
            "FIRSTLUME_ATTEMPT": str(launch.attempt),
        }
        # The control plane's own secrets are not the executor's business.
        for name in ("FIRSTLUME_ENCRYPTION_KEYS", "FIRSTLUME_DATABASE_URL"):
            env.pop(name, None)
        output = (self.log_dir / f"{launch.run_id}-{launch.phase}-{launch.attempt}.log").open("ab")
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "firstlume", "executor",
                env=env, stdin=asyncio.subprocess.DEVNULL, stdout=output, stderr=output,
                start_new_session=True,
            )  # fmt: skip
        finally:
            output.close()
        self._processes[ref] = process
        task = asyncio.create_task(self._watch(ref, process))
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)

    async def _watch(self, ref: PhaseRef, process: asyncio.subprocess.Process) -> None:
        returncode = await process.wait()
        self._processes.pop(ref, None)
        # An executor that died leaves its engine running, holding the state lock: end the
        # whole process group it leads.
        _kill_group(process.pid)
        # The callback fails the run only if it is still in this phase and attempt: an executor
        # that reported its result and then exited changes nothing.
        if self._on_death is not None:
            try:
                await self._on_death(ExecutorDied(ref, exit_reason(returncode)))
            except Exception:
                log.exception("reporting the end of executor %s failed", ref)

    async def check_health(self, active: list[PhaseRef]) -> list[ExecutorDied]:
        # Exits are reported by the watchers as they happen. Phases this process did not launch
        # (another replica's, or from before a restart) are left to the heartbeat timeout.
        return []

    async def cleanup(self, ref: PhaseRef) -> None:
        process = self._processes.get(ref)
        if process is not None and process.returncode is None:
            _kill_group(process.pid)

    async def cancel(self, run_id: str) -> None:
        for ref in [r for r in self._processes if r.run_id == run_id]:
            await self.cleanup(ref)

    async def close(self) -> list[ExecutorDied]:
        """Executors are children of this process and stop with it: each gets SIGTERM first, so
        it can interrupt its engine the way Terraform expects (an apply killed outright can leave
        the state half-written), then SIGKILL for whatever is left of its process group."""
        for task in list(self._watchers):
            task.cancel()
        stopping = {ref: process for ref, process in self._processes.items() if process.returncode is None}
        for process in stopping.values():
            with suppress(ProcessLookupError):
                process.terminate()
        if stopping:
            await asyncio.wait(
                [asyncio.create_task(process.wait()) for process in stopping.values()],
                timeout=STOP_GRACE_SECONDS,
            )
        for process in stopping.values():
            _kill_group(process.pid)
        self._processes.clear()
        return [
            ExecutorDied(
                ref, "The control plane stopped, and its local executor with it, before the phase ended."
            )
            for ref in stopping
        ]
