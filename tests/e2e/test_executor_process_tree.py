"""However a phase ends, nothing it started runs on and its work dir is gone (issue 16.4, 16.5):
after kill -9 of the executor, kill -9 of Terraform, or the heartbeat timeout, no process of the
executor's tree (a `local-exec`'s `sh -c sleep …` included) and no work dir remain. With and
without the bubblewrap sandbox."""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import LiveServer, Tenant, settings_env, start_live_server, stop_live_server
from firstlume.launchers import sandbox
from firstlume.launchers.process_tree import session_members
from support.e2e import Api, make_stack_repo
from support.processes import the_one_executor
from support.terraform import requires_terraform
from support.waiting import wait_until

pytestmark = requires_terraform


def _stat(pid: int) -> tuple[int, int]:
    """(parent, session) of a process."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[3])


def _pids_with(needle: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.fixture(params=["bubblewrap", "off"])
def sandbox_mode(request: pytest.FixtureRequest) -> str:
    if request.param == "bubblewrap" and sandbox.works() is not None:
        pytest.skip(f"bubblewrap cannot make a sandbox here: {sandbox.works()}")
    return str(request.param)


@pytest.fixture
def server(database_url: str, tmp_path: Path, tenant: Tenant, sandbox_mode: str) -> Iterator[LiveServer]:
    served = start_live_server(
        settings_env(
            database_url,
            tmp_path / "data",
            # Short enough for the heartbeat test to wait out, long enough not to fail a healthy
            # run on a loaded machine (3 seconds did in CI, in test_execution_liveness).
            FIRSTLUME_HEARTBEAT_TIMEOUT="8",
            FIRSTLUME_EXECUTOR_SANDBOX=sandbox_mode,
            FIRSTLUME_EXECUTOR_WORK_DIR=str(tmp_path / "work"),
        ),
        tmp_path / "server.log",
    )
    yield served
    stop_live_server(served)


class Running:
    """A run whose provisioner sleeps: its executor, its work dir, its session, the sleep."""

    def __init__(self, api: Api, tmp_path: Path) -> None:
        self.marker = f"sleep {random.randint(100000, 999999)}"
        main_tf = f"""
resource "terraform_data" "slow" {{
  input = "s"
  provisioner "local-exec" {{
    command = "{self.marker}"
  }}
}}
"""
        api.settings("", {"require_approval": False})
        api.create_stack("app", make_stack_repo(tmp_path, main_tf))
        self.run_id = api.start("app", "apply")
        self.sleeps = wait_until(lambda: _pids_with(self.marker), 90, "the provisioner to start")
        # The apply's executor: the plan's may still be on its way out (its work dir removed,
        # its process ending) when the apply's provisioner starts on a busy machine.
        pids = [the_one_executor(self.run_id)]  # the apply's
        self.executor = pids[0]
        self.work_dir = Path(os.readlink(f"/proc/{self.executor}/cwd"))
        assert self.work_dir.is_relative_to(tmp_path / "work")
        _, self.session = _stat(self.executor)
        assert [self.session] == list({_stat(pid)[1] for pid in self.sleeps})  # the sleep is in the tree

    def terraform(self) -> int:
        pid = self.sleeps[0]
        while Path(f"/proc/{pid}/comm").read_text().strip() != "terraform":
            pid, _ = _stat(pid)
            assert pid > 1, "the provisioner is not Terraform's descendant"
        return pid

    def assert_all_gone(self) -> None:
        wait_until(lambda: not _pids_with(self.marker), 15, "the provisioner to be ended")
        wait_until(lambda: not session_members(self.session), 15, "every process of the executor to end")
        wait_until(lambda: not self.work_dir.exists(), 15, "the work dir to be removed")
        assert not Path(str(self.work_dir) + ".lock").exists()

    def cleanup(self) -> None:
        for pid in session_members(self.session) + _pids_with(self.marker):
            for sig in (signal.SIGCONT, signal.SIGKILL):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass


def test_kill_9_of_the_executor_ends_its_tree_and_removes_its_work_dir(api: Api, tmp_path: Path) -> None:
    running = Running(api, tmp_path)
    try:
        os.kill(running.executor, signal.SIGKILL)
        api.wait(running.run_id, "failed", timeout=30)
        running.assert_all_gone()
    finally:
        running.cleanup()


def test_kill_9_of_terraform_ends_its_provisioner_and_the_phase(api: Api, tmp_path: Path) -> None:
    running = Running(api, tmp_path)
    try:
        os.kill(running.terraform(), signal.SIGKILL)
        api.wait(running.run_id, "failed", timeout=60)
        running.assert_all_gone()
    finally:
        running.cleanup()


def test_the_heartbeat_timeout_ends_the_tree_and_removes_the_work_dir(api: Api, tmp_path: Path) -> None:
    running = Running(api, tmp_path)
    try:
        os.kill(running.executor, signal.SIGSTOP)  # alive but silent
        run = api.wait(running.run_id, "failed", timeout=30)
        assert "no heartbeat" in run["error"]
        running.assert_all_gone()
    finally:
        running.cleanup()


def test_start_up_removes_the_work_dirs_a_crash_left(
    database_url: str, tmp_path: Path, tenant: Tenant
) -> None:
    work = tmp_path / "work"
    left = work / "run-plan-0123456789ab"
    (left / "checkout").mkdir(parents=True)
    (left / "plan.tfplan").write_bytes(b"values in clear")
    (left / "firstlume.auto.tfvars.json").write_text('{"password": "x"}')
    served = start_live_server(
        settings_env(database_url, tmp_path / "data", FIRSTLUME_EXECUTOR_WORK_DIR=str(work)),
        tmp_path / "server.log",
    )
    try:
        assert not left.exists()
        assert "left by a previous crash" in served.log()
    finally:
        stop_live_server(served)
