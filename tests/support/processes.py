"""Find the executor processes of a run, as an operator would with ps."""

from __future__ import annotations

from pathlib import Path


def executor_pids(run_id: str) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"executor" in cmdline and f"FIRSTLUME_RUN_ID={run_id}".encode() in environ:
            pids.append(int(proc.name))
    return pids
