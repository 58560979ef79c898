"""The embedded default: each phase's executor is a subprocess of the control plane.

Terraform code runs arbitrary programs, so an executor gets nothing of the control plane's:
- an environment of its own: the phase's URL and token (told on stdin to a spare), PATH, HOME,
  locale, proxy and CA settings, and the names listed in FIRSTLUME_EXECUTOR_ENV; never the
  database URL, the keys or the data dir;
- a work dir outside the data dir (FIRSTLUME_EXECUTOR_WORK_DIR), removed when it ends, however it
  ends, and at start-up if a crash left it;
- where bubblewrap works, a sandbox (launchers/sandbox.py) in which the data dir, other runs'
  work dirs and every process outside it do not exist;
- an end of the whole process tree it started (launchers/process_tree.py) on every exit path.

Starting Python and importing an executor takes longer than most of what a small phase does,
so spare executors are started ahead (`firstlume executor --spare`): a launch hands the oldest
the phase's variables on stdin. Spares are made while no executor runs, up to three by default (FIRSTLUME_EXECUTOR_SPARES): a run's plan
and its apply take one each and a third is there for the next run. Starting one costs about
0.4 s of CPU, which on two cores slowed the phase it overlapped by about as much (P1, median
POST to `applied`: 1.77 s with a spare started at each launch, 1.32 s without). While executors
run, a launch that takes the last spare starts one more, so a busy control plane finds one ready.
Without a live spare, a launch starts an executor from scratch, as before.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import tempfile
import uuid
from collections import deque
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from firstlume.launchers import sandbox
from firstlume.launchers.base import DeathCallback, ExecutorDied, PhaseLaunch, PhaseRef
from firstlume.launchers.process_tree import command_name, kill_session, session_members
from firstlume.launchers.work_dirs import WorkDir, WorkDirs

log = logging.getLogger("firstlume.launcher.local")

# What an executor gets of the control plane's environment besides FIRSTLUME_EXECUTOR_ENV.
PASSED_ENV = frozenset(
    {"PATH", "LANG", "LANGUAGE", "TZ", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR", "GIT_SSL_CAINFO"}
    | {
        p + v
        for p in ("HTTP", "HTTPS", "NO", "ALL", "http", "https", "no", "all")
        for v in ("_PROXY", "_proxy")
    }
)
PASSED_PREFIXES = ("LC_",)
WORK_DIR_VAR = "FIRSTLUME_WORK_DIR"
# Executors started ahead of launches while none runs (FIRSTLUME_EXECUTOR_SPARES), and at most
# this many while some run (the module docstring says why).
SPARES_IDLE = 3
SPARES_BUSY = 1


def exit_reason(returncode: int, *, sandboxed: bool = False) -> str:
    if sandboxed and 128 < returncode < 128 + 65:
        returncode = 128 - returncode  # bubblewrap exits 128+N for a command killed by signal N
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"The executor process was killed ({name}) before it reported a result."
    return f"The executor process exited with code {returncode} before it reported a result."


# How long executors get to wind down when the control plane stops.
STOP_GRACE_SECONDS = 10.0


async def _end_tree(pid: int) -> None:
    """The executor leads a session: every process it started is in it (process_tree.py). The
    scan of /proc runs in a thread: on the event loop it held up the requests of the phase that
    starts as this one ends (the apply's spec, as the plan's executor exits)."""
    await asyncio.to_thread(kill_session, pid)


def _terminate(pid: int) -> None:
    """SIGTERM to the executor, so it interrupts its engine the way Terraform expects; in a
    sandbox, to the executor inside rather than to bubblewrap, which would just die."""
    for member in session_members(pid):
        with suppress(ProcessLookupError, PermissionError):
            if command_name(member) != "bwrap" and os.getpgid(member) == pid:
                os.kill(member, signal.SIGTERM)


@dataclass
class _Executor:
    process: asyncio.subprocess.Process
    work_dir: WorkDir


@dataclass
class _Spare(_Executor):
    log_path: Path


@dataclass(frozen=True)
class Isolation:
    """Where executors work and what they may see."""

    work_root: Path
    hidden_dirs: tuple[Path, ...] = ()  # not there in the sandbox (the data dir)
    hidden_files: tuple[Path, ...] = ()  # empty in the sandbox (an SQLite database elsewhere)
    shown_dirs: tuple[Path, ...] = ()  # put back, read-only, inside a hidden one (the demo repository)
    sandbox: str = "auto"  # "auto" | "bubblewrap" | "off"
    passed_env: tuple[str, ...] = ()


class LocalLauncher:
    def __init__(
        self,
        log_dir: Path,
        extra_env: dict[str, str] | None = None,
        isolation: Isolation | None = None,
        spares: int = SPARES_IDLE,
    ) -> None:
        self.log_dir = log_dir
        self.spares_idle = spares
        self.extra_env = extra_env or {}
        self.isolation = isolation or Isolation(
            work_root=Path(tempfile.gettempdir()) / f"firstlume-executors-{os.getuid()}"
        )
        self.work_dirs = WorkDirs(self.isolation.work_root)
        self.sandboxed = False
        self._processes: dict[PhaseRef, _Executor] = {}
        self._watchers: set[asyncio.Task[None]] = set()
        self._on_death: DeathCallback | None = None
        self._spares: deque[_Spare] = deque()
        self._spare_starting: asyncio.Task[None] | None = None
        self._closing = False

    async def start(self, on_death: DeathCallback) -> None:
        self._on_death = on_death
        self._closing = False
        self.log_dir.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(self.work_dirs.prepare)
        self.sandboxed = await asyncio.to_thread(self._choose_sandbox)
        self._start_spare()

    def _choose_sandbox(self) -> bool:
        wanted = self.isolation.sandbox
        if wanted == "off":
            log.warning("executors run without a sandbox (FIRSTLUME_EXECUTOR_SANDBOX=off)")
            return False
        why_not = sandbox.works()
        hidden = [d for d in self.isolation.hidden_dirs if sandbox.installation_inside(d.resolve())]
        if why_not is None and hidden:
            why_not = f"Python or Firstlume is installed inside {hidden[0]}, which the sandbox hides"
        if why_not is None:
            log.info("executors run in a bubblewrap sandbox")
            return True
        if wanted == "bubblewrap":
            raise RuntimeError(f"FIRSTLUME_EXECUTOR_SANDBOX=bubblewrap, but {why_not}")
        log.warning(
            "executors run without a sandbox (%s): they see the machine as this user does; see README",
            why_not,
        )
        return False

    def _base_env(self, work_dir: Path) -> dict[str, str]:
        """Only what an executor needs: never the control plane's settings or secrets."""
        names = set(self.isolation.passed_env)
        env = {
            name: value
            for name, value in os.environ.items()
            if (name in PASSED_ENV or name in names or name.startswith(PASSED_PREFIXES))
            and not name.startswith("FIRSTLUME_")
        }
        env.setdefault("PATH", os.defpath)
        home = work_dir / "home"
        home.mkdir(exist_ok=True)
        env["HOME"] = str(home)  # not the control plane's: no dotfiles, no credentials of its user
        env.update(self.extra_env)
        env[WORK_DIR_VAR] = str(work_dir)
        return env

    async def _spawn(self, name: str, log_path: Path, told: dict[str, str] | None) -> _Executor:
        """Starts an executor in a work dir of its own; a spare (told None) waits on stdin."""
        work = await asyncio.to_thread(self.work_dirs.create, name)
        env = {**self._base_env(work.path), **(told or {})}
        command = [sys.executable, "-m", "firstlume", "executor", *(["--spare"] if told is None else [])]
        if self.sandboxed:
            command = sandbox.sandboxed(
                command,
                work_dir=work.path,
                hidden_dirs=(*self.isolation.hidden_dirs, self.isolation.work_root, self.log_dir),
                hidden_files=self.isolation.hidden_files,
                shown_dirs=self.isolation.shown_dirs,
            )
        output = log_path.open("ab")
        try:
            process = await asyncio.create_subprocess_exec(
                *command, env=env, cwd=work.path,
                stdin=asyncio.subprocess.PIPE if told is None else asyncio.subprocess.DEVNULL,
                stdout=output, stderr=output, start_new_session=True, pass_fds=(work.lock_fd,),
            )  # fmt: skip
        except BaseException:
            work.remove()
            raise
        finally:
            output.close()
        return _Executor(process, work)

    def _spares_wanted(self) -> int:
        return min(SPARES_BUSY, self.spares_idle) if self._processes else self.spares_idle

    def _start_spare(self) -> None:
        if self._closing or len(self._spares) >= self._spares_wanted():
            return
        if self._spare_starting is None or self._spare_starting.done():
            self._spare_starting = asyncio.create_task(self._prepare_spare(), name="executor-spare")

    async def _prepare_spare(self) -> None:
        while len(self._spares) < self._spares_wanted():
            log_path = self.log_dir / f"spare-{uuid.uuid4().hex}.log"
            try:
                started = await self._spawn("spare", log_path, None)
            except OSError:
                log.exception("starting a spare executor failed; phases start from scratch")
                return
            self._spares.append(_Spare(started.process, started.work_dir, log_path))

    async def _hand_to_spare(self, told: dict[str, str], log_path: Path) -> _Executor | None:
        """The spare runs the phase told; None when there is no live spare to tell."""
        if not self._spares:
            return None
        spare = self._spares.popleft()  # the oldest: the likeliest to have finished importing
        if spare.process.returncode is not None or spare.process.stdin is None:
            await self._discard(spare)
            return None
        # The spare keeps writing to its file, which now bears the phase's name.
        os.replace(spare.log_path, log_path)
        try:
            spare.process.stdin.write(json.dumps(told).encode() + b"\n")
            await spare.process.stdin.drain()
            spare.process.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            await self._discard(spare)
            return None
        return spare

    async def _discard(self, executor: _Executor) -> None:
        await _end_tree(executor.process.pid)
        if executor.process.returncode is None:
            await executor.process.wait()
        await asyncio.to_thread(executor.work_dir.remove)

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
        executor = await self._hand_to_spare(told, log_path)
        if executor is None:
            executor = await self._spawn(f"{launch.run_id}-{launch.phase}", log_path, told)
        self._processes[ref] = executor
        self._start_spare()
        task = asyncio.create_task(self._watch(ref, executor))
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)

    async def _watch(self, ref: PhaseRef, executor: _Executor) -> None:
        try:
            returncode = await executor.process.wait()
        finally:
            # An executor that died leaves its engine and its provisioners running, holding the
            # state lock, and its work dir with the plan file: end the whole tree, remove the dir.
            await _end_tree(executor.process.pid)
            await asyncio.to_thread(executor.work_dir.remove)
        self._processes.pop(ref, None)
        self._start_spare()  # the last executor ended: the spares fill up, while nothing else runs
        # The callback fails the run only if it is still in this phase and attempt: an executor
        # that reported its result and then exited changes nothing.
        if self._on_death is not None:
            try:
                await self._on_death(ExecutorDied(ref, exit_reason(returncode, sandboxed=self.sandboxed)))
            except Exception:
                log.exception("reporting the end of executor %s failed", ref)

    async def check_health(self, active: list[PhaseRef]) -> list[ExecutorDied]:
        # Exits are reported by the watchers as they happen. Phases this process did not launch
        # (another replica's, or from before a restart) are left to the heartbeat timeout.
        return []

    async def cleanup(self, ref: PhaseRef) -> None:
        executor = self._processes.get(ref)
        if executor is not None and executor.process.returncode is None:
            await _end_tree(executor.process.pid)  # the watcher then removes the work dir
            # Returns once the executor is gone: whoever fails its run next releases the lock.
            with suppress(TimeoutError):
                await asyncio.wait_for(executor.process.wait(), 30)

    async def cancel(self, run_id: str) -> None:
        for ref in [r for r in self._processes if r.run_id == run_id]:
            await self.cleanup(ref)

    async def _stop_spare(self) -> None:
        if self._spare_starting is not None:
            self._spare_starting.cancel()
            with suppress(asyncio.CancelledError):
                await self._spare_starting
        while self._spares:
            spare = self._spares.popleft()
            await self._discard(spare)
            spare.log_path.unlink(missing_ok=True)

    async def close(self) -> list[ExecutorDied]:
        """Executors are children of this process and stop with it: each gets SIGTERM first, so
        it can interrupt its engine the way Terraform expects (an apply killed outright can leave
        the state half-written), then SIGKILL for whatever is left of its process group."""
        self._closing = True  # executors that end now start no spare
        await self._stop_spare()
        watchers = list(self._watchers)
        stopping = {
            ref: executor for ref, executor in self._processes.items() if executor.process.returncode is None
        }
        for executor in stopping.values():
            _terminate(executor.process.pid)
        if stopping:
            await asyncio.wait(
                [asyncio.create_task(executor.process.wait()) for executor in stopping.values()],
                timeout=STOP_GRACE_SECONDS,
            )
        for executor in stopping.values():
            await _end_tree(executor.process.pid)
        # The watchers end each tree and remove each work dir.
        for task in watchers:
            task.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
        self._processes.clear()
        return [
            ExecutorDied(
                ref, "The control plane stopped, and its local executor with it, before the phase ended."
            )
            for ref in stopping
        ]
