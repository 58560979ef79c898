"""Each local executor's working directory: outside the data dir, removed when the executor ends,
and, at start-up, whatever a crash left behind is removed too.

A work dir holds the checkout, the providers, `*.auto.tfvars.json` and the plan file (variable
values in clear). Each has a lock file beside it, held (shared) by the launcher and by the
executor, which inherits the descriptor: while either lives the directory is in use. A directory
whose lock nobody holds is a leftover, whichever control plane (or replica) made it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("firstlume.launcher.local")

LOCK_SUFFIX = ".lock"


@dataclass
class WorkDir:
    path: Path
    lock_fd: int

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        Path(str(self.path) + LOCK_SUFFIX).unlink(missing_ok=True)
        self.release()

    def release(self) -> None:
        if self.lock_fd >= 0:
            os.close(self.lock_fd)
            self.lock_fd = -1


class WorkDirs:
    def __init__(self, root: Path) -> None:
        self.root = root

    def prepare(self) -> int:
        """Creates the root (only this user may enter it) and removes leftovers; returns how many."""
        self.root.mkdir(parents=True, exist_ok=True)
        if self.root.stat().st_uid != os.getuid():
            raise RuntimeError(
                f"the executors' work root {self.root} belongs to another user: "
                "set FIRSTLUME_EXECUTOR_WORK_DIR to a directory of this user's"
            )
        os.chmod(self.root, 0o700)
        removed = 0
        for entry in list(self.root.iterdir()):
            if entry.name.endswith(LOCK_SUFFIX):
                if not entry.with_name(entry.name[: -len(LOCK_SUFFIX)]).exists():
                    removed += self._remove_if_unused(entry.with_name(entry.name[: -len(LOCK_SUFFIX)]))
                continue
            removed += self._remove_if_unused(entry)
        if removed:
            log.warning("removed %d executor work dir(s) left by a previous crash", removed)
        return removed

    def _remove_if_unused(self, path: Path) -> int:
        lock_path = Path(str(path) + LOCK_SUFFIX)
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return 0
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return 0  # an executor (or its launcher) still works in it
        if not _still_at(fd, lock_path):
            os.close(fd)
            return 0  # another start-up removed it meanwhile (and perhaps a launcher made it anew)
        existed = path.exists()
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        lock_path.unlink(missing_ok=True)
        os.close(fd)
        return 1 if existed else 0

    def create(self, name: str) -> WorkDir:
        """A new, empty work dir, locked; `name` only helps whoever looks."""
        while True:
            path = self.root / f"{name}-{uuid.uuid4().hex[:12]}"
            fd = os.open(str(path) + LOCK_SUFFIX, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)  # being cleaned up by a start-up this very moment: another name
                continue
            if not _still_at(fd, Path(str(path) + LOCK_SUFFIX)):
                # Another control plane's start-up took this lock file between our open and our
                # lock (no directory yet: a leftover to it) and removed it: a lock on a file that is
                # no longer at its path guards nothing, and a later start-up would remove the
                # directory in use. Another name.
                os.close(fd)
                continue
            os.mkdir(path, 0o700)
            return WorkDir(path, fd)


def _still_at(fd: int, path: Path) -> bool:
    """Whether the file open as `fd` is still the one at `path`."""
    try:
        at_path = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (at_path.st_dev, at_path.st_ino)
