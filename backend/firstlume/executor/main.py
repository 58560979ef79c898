"""Entry point of `firstlume executor`: configuration from the environment, one phase, exit code."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from firstlume.domain.runs import PhaseResult
from firstlume.executor.client import ExecutorClient
from firstlume.executor.phase import PHASE_VAR, PhaseRunner

URL_VAR = "FIRSTLUME_CONTROL_PLANE_URL"
TOKEN_VAR = "FIRSTLUME_EXECUTOR_TOKEN"
WORK_DIR_VAR = "FIRSTLUME_WORK_DIR"


# Imported on first use during a phase; a spare executor imports them while it waits.
_USED_LATER = ("httpcore", "h11", "anyio._backends._asyncio", "anyio.streams.tls", "anyio.to_thread")


def run_when_told(stdin: TextIO = sys.stdin) -> int:
    """`firstlume executor --spare`: started ahead of need, with everything a phase imports
    already imported, it waits for its phase's variables (the protocol's environment, one JSON
    object on one line of stdin), then runs like `firstlume executor`. A launcher that goes
    away first closes stdin, and the spare exits without a word."""
    for module in _USED_LATER:
        importlib.import_module(module)
    line = stdin.readline()
    if not line.strip():
        return 0
    told = json.loads(line)
    os.environ.update({str(k): str(v) for k, v in told.items()})
    return run_from_env(os.environ)


# How long a thread may hold the GIL while another waits for it (seconds; Python's default is
# 0.005). The checkout's thread calls libgit2 through cffi, which lets go of the GIL around
# every call and takes it back after: each time the event loop held it meanwhile (answers to
# parse, reports to send), the thread waited up to the whole interval. A clone of a small
# repository took 30-40 ms in an executor where it takes 11 ms alone.
GIL_SWITCH_INTERVAL = 0.0005


def run_from_env(environ: Mapping[str, str] = os.environ) -> int:
    """Runs the phase the token is for. Exit code: 0 succeeded, 1 failed (reported to the
    control plane), 2 nothing could be reported (bad configuration, dead token, unreachable)."""
    sys.setswitchinterval(GIL_SWITCH_INTERVAL)
    missing = [name for name in (URL_VAR, TOKEN_VAR) if not environ.get(name)]
    if missing:
        print(f"firstlume executor: missing environment variable {', '.join(missing)}", file=sys.stderr)
        return 2
    label = "run {} {} attempt {}".format(
        environ.get("FIRSTLUME_RUN_ID", "?"),
        environ.get(PHASE_VAR, "?"),
        environ.get("FIRSTLUME_ATTEMPT", "?"),
    )
    given = environ.get(WORK_DIR_VAR)
    work_dir = Path(given) if given else Path(tempfile.mkdtemp(prefix="firstlume-executor-"))
    work_dir.mkdir(parents=True, exist_ok=True)
    try:
        return asyncio.run(_run(environ[URL_VAR], environ[TOKEN_VAR], work_dir, environ, label))
    finally:
        if not given:
            shutil.rmtree(work_dir, ignore_errors=True)


async def _run(url: str, token: str, work_dir: Path, environ: Mapping[str, str], label: str) -> int:
    async with ExecutorClient(url, token) as client:
        runner = PhaseRunner(client, work_dir, base_env=environ)
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGTERM, runner.terminate, "the executor was terminated (SIGTERM)")
        except (NotImplementedError, RuntimeError):
            pass  # not in the main thread, or a platform without signals
        outcome = await runner.run()
    result = outcome.status or "not reported"
    detail = f": {outcome.error}" if outcome.error and outcome.status != PhaseResult.SUCCEEDED else ""
    print(f"firstlume executor: {label}: {result}{detail}", file=sys.stderr)
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(run_from_env())
