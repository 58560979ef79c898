"""Find the executor processes of a run, as an operator would with ps."""

from __future__ import annotations

import os
from pathlib import Path


def executor_pids(run_id: str) -> list[int]:
    """By the run id in its environment, or, for a spare executor (started before its run and
    told the run on stdin), by its output file, which the local launcher names after the run."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
            output = os.readlink(proc / "fd" / "1")
        except OSError:
            continue
        # In a sandbox, bubblewrap's own processes carry the executor's command line too.
        if (
            b"executor" in cmdline
            and not cmdline[0].endswith(b"bwrap")
            and (
                f"FIRSTLUME_RUN_ID={run_id}".encode() in environ or Path(output).name.startswith(f"{run_id}-")
            )
        ):
            pids.append(int(proc.name))
    return pids


def the_one_executor(run_id: str, within: float = 30) -> int:
    """The pid of the run's one executor, once it is the only one: a phase's executor that has
    reported its result may still be exiting (slowly, on a loaded machine) when the next phase's
    has started."""
    from support.waiting import wait_until

    def alone() -> list[int] | None:
        pids = executor_pids(run_id)
        return pids if len(pids) == 1 else None

    return wait_until(alone, within, f"one executor left for run {run_id}")[0]
