"""Tests outside tests/e2e/ run in the test process only: every process a test starts is heard
here (Python's audit events), so a test that starts one (a server, an executor, terraform, git,
the CLI, a browser) fails with where it belongs, and `make test-fast` stays the in-process loop."""

from __future__ import annotations

import sys
from typing import Any

# The audit events of every way Python starts a process (asyncio's subprocesses included: they
# go through subprocess.Popen).
STARTS = frozenset(
    {"subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty", "os.system", "os.exec", "os.spawn"}
)

# The one exception: the tests' Git host (support/git_http.py) answers each request with `git
# http-backend`, a CGI that lives for that request and keeps nothing outside the test's tmp_path
# (the control plane itself reads Git in process, with libgit2).
ALLOWED = frozenset({"git"})

started: list[str] = []


def _heard(event: str, args: tuple[Any, ...]) -> None:
    if event not in STARTS:
        return
    command = args[1] if event == "subprocess.Popen" else args[:1]
    if (
        event == "subprocess.Popen"
        and isinstance(command, (list, tuple))
        and command
        and command[0] in ALLOWED
    ):
        return
    started.append(f"{event} {command!r}"[:200])


def listen() -> None:
    """Hears every process started from now on (an audit hook stays for the process's life)."""
    sys.addaudithook(_heard)
