"""Served control planes started through this test process's fork server (fork_server.py): the
same `firstlume serve` process as `python -m firstlume serve`, without paying the interpreter's
start and the server's imports for each one. `ForkedProcess` is the part of subprocess.Popen the
tests use (pid, poll, wait, terminate, kill, send_signal, returncode)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

FORK_SERVER = Path(__file__).with_name("fork_server.py")
# How often wait() looks for the exit code the fork server writes when the child has exited.
WAIT_STEP_SECONDS = 0.02


class ForkedProcess:
    def __init__(self, pid: int, status: Path) -> None:
        self.pid = pid
        self.args = ["firstlume", "serve"]
        self._status = status
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None and self._status.exists():
            self.returncode = int(self._status.read_text())
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            time.sleep(WAIT_STEP_SECONDS)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, number: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, number)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkServer:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._count = 0

    def _started(self) -> subprocess.Popen[bytes]:
        if self._process is not None and self._process.poll() is not None:
            raise RuntimeError(
                f"the fork server of the served control planes exited ({self._process.returncode})"
            )
        if self._process is None:
            self._process = subprocess.Popen(
                # -P: not its own folder on sys.path (support/secrets.py would hide the stdlib's).
                [sys.executable, "-P", str(FORK_SERVER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        return self._process

    def spawn(self, argv: list[str], env: dict[str, str], log_path: Path) -> ForkedProcess:
        """`firstlume <argv>` in `env`, its output appended to `log_path`."""
        with self._lock:
            process = self._started()
            assert process.stdin is not None and process.stdout is not None
            self._count += 1
            status = log_path.with_name(f".{log_path.name}.{os.getpid()}.{self._count}.exit")
            status.unlink(missing_ok=True)
            request = {
                "argv": argv,
                "env": env,
                "cwd": os.getcwd(),
                "log": str(log_path),
                "status": str(status),
            }
            process.stdin.write(json.dumps(request).encode() + b"\n")
            process.stdin.flush()
            answer = process.stdout.readline()
            if not answer:
                raise RuntimeError("the fork server of the served control planes exited")
            return ForkedProcess(int(json.loads(answer)["pid"]), status)


FORKS = ForkServer()
