"""Runs one engine command: output streamed line by line as it comes, an interrupt like Ctrl-C
on cancellation, and no engine left behind when the executor dies."""

from __future__ import annotations

import asyncio
import ctypes
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path

LineHandler = Callable[[str], None]

_PR_SET_PDEATHSIG = 1
_STREAM_LIMIT = 16 * 1024 * 1024  # apply -json lines carry whole diagnostics
_STOP_GRACE_SECONDS = 120.0  # the engine's own interrupt handling: let it save the state


class EngineNotFound(Exception):
    pass


def _die_with_parent() -> None:
    """Runs in the engine's process before exec. The engine would outlive a killed executor and
    keep the state locked: ask the kernel to kill it when its parent dies. (What the engine
    started is ended by its process group, below, or by the launcher, which ends the executor's
    whole session.)"""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


async def run_process(
    command: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    on_stdout: LineHandler | None,
    on_stderr: LineHandler,
) -> tuple[int, str]:
    """Runs `command`; returns its exit code and, when `on_stdout` is None, its whole stdout.

    The handlers are plain functions: whatever they do with a line (buffer it, parse it) must not
    wait on anything, so the engine's pipes are drained as fast as it writes them."""
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            limit=_STREAM_LIMIT,
            # A process group of its own, so that it can be interrupted on its own, inside the
            # executor's session, so that the launcher ends it and all it started with the executor.
            process_group=0,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
    except FileNotFoundError:
        raise EngineNotFound(command[0]) from None
    stdout, stderr = process.stdout, process.stderr
    assert stdout is not None and stderr is not None
    captured: list[bytes] = []

    async def pump_stdout() -> None:
        if on_stdout is None:
            captured.append(await stdout.read())
            return
        async for line in _lines(stdout):
            on_stdout(line)

    async def pump_stderr() -> None:
        async for line in _lines(stderr):
            on_stderr(line)

    try:
        await asyncio.gather(pump_stdout(), pump_stderr())
        code = await process.wait()
    except BaseException:
        await _stop(process)
        raise
    finally:
        # Whatever the engine started and left (a provisioner's `sh -c`, a provider of an
        # engine that was killed) ends with it.
        _kill_group(process.pid)
    return code, b"".join(captured).decode("utf-8", errors="replace")


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def _lines(stream: asyncio.StreamReader) -> AsyncIterator[str]:
    while True:
        try:
            raw = await stream.readline()
        except ValueError:  # a line longer than the limit: take what is there
            raw = await stream.read(_STREAM_LIMIT)
        if not raw:
            return
        line = raw.decode("utf-8", errors="replace")
        yield line if line.endswith("\n") else line + "\n"


async def _stop(process: asyncio.subprocess.Process) -> None:
    """Interrupts the engine like Ctrl-C (it then finishes writing the state), kills it if it
    does not stop in time."""
    if process.returncode is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGINT)
        await asyncio.wait_for(asyncio.shield(process.wait()), timeout=_STOP_GRACE_SECONDS)
    except (TimeoutError, ProcessLookupError):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    except asyncio.CancelledError:
        os.killpg(process.pid, signal.SIGKILL)
        raise
