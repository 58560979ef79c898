"""The embedded default's sandbox for executors: bubblewrap (Debian's `bubblewrap` package).

Inside, the filesystem is the machine's as the control plane's user sees it (a local state file
or a file:// repository works as without the sandbox), except that:
- the data dir (database, key file, executor logs) is empty and an SQLite database elsewhere is
  an empty file; only the demo repository is put back, read-only;
- the work root is empty but for the executor's own work dir: no other run's dir exists;
- Python and Firstlume are read-only: a run cannot change the control plane's code;
- /proc is the sandbox's own PID namespace: the control plane and other runs' processes do not
  exist, and when the sandbox ends, every process in it ends too.
The network is the machine's: the executor reaches the control plane, Terraform its providers,
and so could a run reach a database that accepts connections without a password.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger("firstlume.launcher.local")

BWRAP = "/usr/bin/bwrap"


def _base(binary: str) -> list[str]:
    return [
        binary,
        "--bind", "/", "/",
        "--dev", "/dev",
        "--proc", "/proc",
        "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
    ]  # fmt: skip


def works(binary: str = BWRAP) -> str | None:
    """None when bubblewrap can make a sandbox here; otherwise why not (not installed, or user
    namespaces are not allowed to this user)."""
    if not Path(binary).exists():
        return f"{binary} is not installed"
    try:
        done = subprocess.run(
            [*_base(binary), "true"], capture_output=True, timeout=30, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{binary} could not run: {exc}"
    if done.returncode != 0:
        return f"{binary} could not make a sandbox: {done.stderr.decode(errors='replace').strip()}"
    return None


def installation() -> list[Path]:
    """Where Python and Firstlume live."""
    package = Path(__file__).resolve().parent.parent
    places = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), package}
    return sorted(p for p in places if p != Path("/"))


def sandboxed(
    command: list[str], *, work_dir: Path, hidden_dirs: Iterable[Path], hidden_files: Iterable[Path],
    shown_dirs: Iterable[Path] = (), binary: str = BWRAP,
) -> list[str]:  # fmt: skip
    """`command` run inside the sandbox, with `work_dir` writable at its own path."""
    args = _base(binary)
    for place in installation():
        args += ["--ro-bind", str(place), str(place)]
    for directory in hidden_dirs:
        args += ["--tmpfs", str(directory)]
    for directory in shown_dirs:
        if directory.is_dir():
            args += ["--ro-bind", str(directory), str(directory)]
    for file in hidden_files:
        if file.exists():
            args += ["--ro-bind", "/dev/null", str(file)]
    args += ["--bind", str(work_dir), str(work_dir), "--chdir", str(work_dir), "--", *command]
    return args


def installation_inside(directory: Path) -> bool:
    """Whether Python or Firstlume lives inside `directory`: hiding it would hide the executor."""
    return any(place.is_relative_to(directory) for place in installation())
