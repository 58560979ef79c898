"""The embedded default: each phase's executor is a subprocess of the control plane.

Starting Python and importing an executor takes longer than most of what a small phase does,
so one spare executor is always started ahead (`firstlume executor --spare`): a launch hands it
the phase's variables on stdin, and starts the next spare. Without a live spare, a launch starts
an executor from scratch, as before.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import uuid
from contextlib import suppress
from dataclasses import dataclass
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


@dataclass
class _Spare:
    process: asyncio.subprocess.Process
    log_path: Path


class LocalLauncher:
    def __init__(self, log_dir: Path, extra_env: dict[str, str] | None = None) -> None:
        self.log_dir = log_dir
        self.extra_env = extra_env or {}
        self._processes: dict[PhaseRef, asyncio.subprocess.Process] = {}
        self._watchers: set[asyncio.Task[None]] = set()
        self._on_death: DeathCallback | None = None
        self._spare: _Spare | None = None
        self._spare_starting: asyncio.Task[None] | None = None

    async def start(self, on_death: DeathCallback) -> None:
        self._on_death = on_death
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._start_spare()

    def _base_env(self) -> dict[str, str]:
        env = {**os.environ, **self.extra_env}
        # The control plane's own secrets are not the executor's business.
        for name in ("FIRSTLUME_ENCRYPTION_KEYS", "FIRSTLUME_DATABASE_URL"):
            env.pop(name, None)
        return env

    async def _spawn(self, log_path: Path, env: dict[str, str], *, spare: bool) -> asyncio.subprocess.Process:
        output = log_path.open("ab")
        try:
            return await asyncio.create_subprocess_exec(
                sys.executable, "-m", "firstlume", "executor", *(["--spare"] if spare else []),
                env=env, stdin=asyncio.subprocess.PIPE if spare else asyncio.subprocess.DEVNULL,
                stdout=output, stderr=output, start_new_session=True,
            )  # fmt: skip
        finally:
            output.close()

    def _start_spare(self) -> None:
        if self._spare_starting is None or self._spare_starting.done():
            self._spare_starting = asyncio.create_task(self._prepare_spare(), name="executor-spare")

    async def _prepare_spare(self) -> None:
        log_path = self.log_dir / f"spare-{uuid.uuid4().hex}.log"
        try:
            process = await self._spawn(log_path, self._base_env(), spare=True)
        except OSError:
            log.exception("starting a spare executor failed; phases start from scratch")
            return
        self._spare = _Spare(process, log_path)

    async def _hand_to_spare(self, told: dict[str, str], log_path: Path) -> asyncio.subprocess.Process | None:
        """The spare runs the phase told; None when there is no live spare to tell."""
        spare, self._spare = self._spare, None
        if spare is None or spare.process.returncode is not None or spare.process.stdin is None:
            return None
        # The spare keeps writing to its file, which now bears the phase's name.
        os.replace(spare.log_path, log_path)
        try:
            spare.process.stdin.write(json.dumps(told).encode() + b"\n")
            await spare.process.stdin.drain()
            spare.process.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            return None
        return spare.process

    async def launch(self, launch: PhaseLaunch) -> None:
        ref = PhaseRef(launch.run_id, launch.phase, launch.attempt)
        if ref in self._processes:
            return
        told = {
            "FIRSTLUME_CONTROL_PLANE_URL": launch.control_plane_url,
            "FIRSTLUME_EXECUTOR_TOKEN": launch.token,
            "FIRSTLUME_RUN_ID": launch.run_id,
            "FIRSTLUME_PHASE": launch.phase,
            "FIRSTLUME_ATTEMPT": str(launch.attempt),
        }
        log_path = self.log_dir / f"{launch.run_id}-{launch.phase}-{launch.attempt}.log"
        process = await self._hand_to_spare(told, log_path)
        if process is None:
            process = await self._spawn(log_path, {**self._base_env(), **told}, spare=False)
        self._start_spare()
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
            # Returns once the executor is gone: whoever fails its run next releases the lock.
            with suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), 30)

    async def cancel(self, run_id: str) -> None:
        for ref in [r for r in self._processes if r.run_id == run_id]:
            await self.cleanup(ref)

    async def _stop_spare(self) -> None:
        if self._spare_starting is not None:
            self._spare_starting.cancel()
            with suppress(asyncio.CancelledError):
                await self._spare_starting
        spare, self._spare = self._spare, None
        if spare is not None and spare.process.returncode is None:
            _kill_group(spare.process.pid)
            await spare.process.wait()
        if spare is not None:
            spare.log_path.unlink(missing_ok=True)

    async def close(self) -> list[ExecutorDied]:
        """Executors are children of this process and stop with it: each gets SIGTERM first, so
        it can interrupt its engine the way Terraform expects (an apply killed outright can leave
        the state half-written), then SIGKILL for whatever is left of its process group."""
        await self._stop_spare()
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
