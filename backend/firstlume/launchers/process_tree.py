"""Ending a local executor with everything it started.

An executor leads a session of its own; its engine gets a process group inside that session, and
whatever the engine runs (providers, `local-exec`'s `sh -c …`) stays in the session, even once
its parent is gone. Ending the session's members therefore ends the whole tree, whichever of them
died first. A program that starts a session of its own (`setsid`) leaves it: only a sandbox's
PID namespace (bubblewrap) or a Kubernetes pod contains those.
"""

from __future__ import annotations

import os
import signal
from contextlib import suppress
from pathlib import Path

PROC = Path("/proc")


def _ids(stat: str) -> tuple[int, int]:
    """The process group and session of a /proc/<pid>/stat line (the command name, in
    parentheses, may itself hold spaces and parentheses)."""
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[2]), int(fields[3])


def session_members(session: int) -> list[int]:
    members = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            _, sid = _ids((entry / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if sid == session:
            members.append(int(entry.name))
    return members


def kill_session(session: int, rounds: int = 5) -> None:
    """SIGKILL to every process of `session` (a member may fork while the first round is sent:
    a few rounds, until none is left)."""
    for _ in range(rounds):
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(session, signal.SIGKILL)
        members = [pid for pid in session_members(session) if pid != os.getpid()]
        if not members:
            return
        for pid in members:
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def command_name(pid: int) -> str:
    try:
        return (PROC / str(pid) / "comm").read_text().strip()
    except OSError:
        return ""
