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
# States of a process that has exited: zombie, dead.
_EXITED = frozenset({"Z", "X", "x"})


def _fields(stat: str) -> tuple[str, int, int]:
    """The state, process group and session of a /proc/<pid>/stat line (the command name, in
    parentheses, may itself hold spaces and parentheses)."""
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[0], int(fields[2]), int(fields[3])


def session_members(session: int, *, living: bool = False) -> list[int]:
    """The processes of `session`; with `living`, not those that have exited and wait only to be
    reaped (zombies: a signal cannot reach them, and they run nothing)."""
    # Plain os calls rather than pathlib: a scan reads every process's stat line, and one runs
    # after every phase.
    members = []
    for name in os.listdir(PROC):
        if not name.isdigit():
            continue
        try:
            with open(f"{PROC}/{name}/stat", "rb") as stat:
                state, _, sid = _fields(stat.read().decode("utf-8", "replace"))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if sid == session and not (living and state in _EXITED):
            members.append(int(name))
    return members


def kill_session(session: int, rounds: int = 5) -> None:
    """SIGKILL to every process of `session` (a member may fork while the first round is sent:
    a few rounds, until none is left alive). Blocking: the event loop calls it in a thread."""
    for _ in range(rounds):
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(session, signal.SIGKILL)
        members = [pid for pid in session_members(session, living=True) if pid != os.getpid()]
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
