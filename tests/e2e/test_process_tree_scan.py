"""The scan that ends an executor's process tree (launchers/process_tree.py), on real processes:
it finds every member of a session and tells an exited member waiting to be reaped (a zombie) from
a living one: ending a session waits only for the living, since no signal reaches a zombie (a scan
that counted them went round all its rounds after every phase)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from firstlume.launchers.process_tree import kill_session, session_members
from support.waiting import wait_until

# A session leader that starts one child which exits at once and is never reaped (its parent
# sleeps instead of waiting), and one that lives until killed.
LEADER = """
import os, subprocess, sys, time
if os.fork() == 0:
    os._exit(0)
living = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print(living.pid, flush=True)
time.sleep(600)
"""


def _state(pid: int) -> str:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()[0]


@contextmanager
def session_with_a_zombie() -> Iterator[tuple[subprocess.Popen[str], int, int]]:
    leader = subprocess.Popen(
        [sys.executable, "-c", LEADER], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert leader.stdout is not None
        living = int(leader.stdout.readline())
        zombies: list[int] = []

        def zombie_found() -> bool:
            zombies[:] = [
                pid
                for pid in session_members(leader.pid)
                if pid not in (leader.pid, living) and _state(pid) == "Z"
            ]
            return bool(zombies)

        wait_until(zombie_found, 15, "the unreaped child to become a zombie")
        yield leader, living, zombies[0]
    finally:
        for pid in session_members(leader.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        leader.wait(timeout=15)
        if leader.stdout is not None:
            leader.stdout.close()


def test_a_scan_finds_the_whole_session_and_tells_zombies_from_the_living() -> None:
    with session_with_a_zombie() as (leader, living, zombie):
        members = set(session_members(leader.pid))
        assert {leader.pid, living, zombie} <= members
        alive = set(session_members(leader.pid, living=True))
        assert {leader.pid, living} <= alive
        assert zombie not in alive
        assert os.getpid() not in members  # another session's processes are not its members


def test_ending_a_session_kills_its_living_members() -> None:
    with session_with_a_zombie() as (leader, _, _):
        kill_session(leader.pid)
        assert leader.wait(timeout=15) == -signal.SIGKILL
        wait_until(lambda: not session_members(leader.pid, living=True), 15, "every living member to end")
