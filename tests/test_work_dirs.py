"""The local executors' work dirs (launchers/work_dirs.py) when several control planes share one
work root: a start-up's removal of leftovers never takes a directory in use, even when it met the
lock file of a directory another launcher was making that very moment."""

from __future__ import annotations

import fcntl
from collections.abc import Callable
from pathlib import Path

import pytest

from firstlume.launchers import work_dirs
from firstlume.launchers.work_dirs import LOCK_SUFFIX, WorkDirs


def test_a_directory_in_use_survives_another_start_up(tmp_path: Path) -> None:
    dirs = WorkDirs(tmp_path)
    dirs.prepare()
    work = dirs.create("spare")
    (work.path / "checkout").mkdir()
    assert WorkDirs(tmp_path).prepare() == 0
    assert (work.path / "checkout").is_dir()
    work.remove()
    assert list(tmp_path.iterdir()) == []


def test_a_lock_file_a_start_up_removed_between_open_and_lock_is_not_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race: launcher A opens (creates) `x.lock`; start-up B opens the same file, locks it
    (A has not yet), finds no directory `x`, removes `x.lock` and lets go; A then locks the file
    that is no longer at the path and makes `x`. A third start-up would find `x` without a lock and
    remove it while A's executor works in it. A must notice and take another name."""
    dirs = WorkDirs(tmp_path)
    dirs.prepare()
    real_flock: Callable[[int, int], None] = fcntl.flock
    raced: list[Path] = []

    def flock_after_a_start_up_removed_it(fd: int, operation: int) -> None:
        if operation & fcntl.LOCK_SH and not raced:
            # Start-up B, between A's open and A's lock: the lock file is a leftover to it.
            (lock,) = tmp_path.glob(f"*{LOCK_SUFFIX}")
            assert WorkDirs(tmp_path).prepare() == 0  # nothing existed to remove but the lock
            assert not lock.exists()
            raced.append(lock)
        real_flock(fd, operation)

    monkeypatch.setattr(work_dirs.fcntl, "flock", flock_after_a_start_up_removed_it)
    work = dirs.create("spare")
    monkeypatch.undo()
    assert raced and Path(str(work.path) + LOCK_SUFFIX) != raced[0]
    (work.path / "checkout").mkdir()
    # A later start-up: the directory in use is kept.
    assert WorkDirs(tmp_path).prepare() == 0
    assert (work.path / "checkout").is_dir()
    work.remove()
