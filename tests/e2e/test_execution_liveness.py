"""Executors that hang or die fail their run, with a reason, and the stack moves on."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import LiveServer, Tenant, settings_env, start_live_server, stop_live_server
from firstlume.db.engine import Database
from firstlume.db.models import Run
from support.e2e import Api, make_stack_repo
from support.processes import executor_pids, the_one_executor
from support.terraform import requires_terraform
from support.waiting import wait_until

pytestmark = requires_terraform

SLOW = """
resource "terraform_data" "slow" {
  input = "s"
  provisioner "local-exec" {
    command = "sleep 120"
  }
}
"""


@pytest.fixture
def heartbeat_timeout() -> str:
    """Long by default: only the hung-executor test waits for the timeout, and a short one fails
    healthy runs on a loaded machine (CI saw a 3-second one expire during a plan)."""
    return "600"


@pytest.fixture
def server(database_url: str, tmp_path: Path, tenant: Tenant, heartbeat_timeout: str) -> Iterator[LiveServer]:
    served = start_live_server(
        settings_env(database_url, tmp_path / "data", FIRSTLUME_HEARTBEAT_TIMEOUT=heartbeat_timeout),
        tmp_path / "server.log",
    )
    yield served
    stop_live_server(served)


@pytest.fixture(autouse=True)
def no_approval(api: Api) -> None:
    api.settings("", {"require_approval": False})


def _applying(api: Api, run_id: str) -> None:
    api.wait(run_id, "applying")
    wait_until(
        lambda: api.by_address(run_id)["terraform_data.slow"]["state"] == "applying",
        60,
        "the slow resource to start",
    )


def _kill_tree(pids: list[int]) -> None:
    for pid in pids:
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                pass


@pytest.mark.parametrize("heartbeat_timeout", ["8"])
def test_hung_executor_fails_its_run_after_the_heartbeat_timeout(api: Api, tmp_path: Path) -> None:
    api.create_stack("app", make_stack_repo(tmp_path, SLOW))
    run_id = api.start("app", "apply")
    _applying(api, run_id)
    pids = [the_one_executor(run_id)]
    os.kill(pids[0], signal.SIGSTOP)  # alive, but silent: no more heartbeats
    try:
        run = api.wait(run_id, "failed", timeout=30)
        assert "no heartbeat for 8 seconds" in run["error"]
        assert ("apply", "failed") in [(s["name"], s["status"]) for s in run["steps"]]
        # The scheduler also stops the silent executor, so it cannot act on the stack later.
        wait_until(lambda: executor_pids(run_id) == [], 10, "the hung executor to be stopped")
    finally:
        _kill_tree(pids)


def test_killed_executor_fails_the_run_at_once_and_the_next_run_starts(api: Api, tmp_path: Path) -> None:
    repo = make_stack_repo(tmp_path, SLOW)
    api.create_stack("app", repo)
    run_id = api.start("app", "apply")
    queued = api.start("app", "plan")
    _applying(api, run_id)
    assert api.run(queued)["status"] == "queued"
    pids = [the_one_executor(run_id)]
    os.kill(pids[0], signal.SIGKILL)
    # The launcher reports the death itself: the error is its own, not the heartbeat timeout's.
    run = api.wait(run_id, "failed", timeout=10)
    assert run["error"] == "The executor process was killed (SIGKILL) before it reported a result."
    # The resource it was applying did not finish: it is failed, not left applying.
    assert api.by_address(run_id)["terraform_data.slow"]["state"] == "failed"
    # Its engine went with it, so the state is not left locked: the queued run plans.
    api.wait(queued, "planned", timeout=60)
    assert executor_pids(run_id) == []


def test_stopping_the_control_plane_fails_its_local_executors_runs_at_once(
    api: Api, server: LiveServer, tmp_path: Path, database_url: str
) -> None:
    api.create_stack("app", make_stack_repo(tmp_path, SLOW))
    run_id = api.start("app", "apply")
    _applying(api, run_id)
    pids = executor_pids(run_id)
    started = time.monotonic()
    stop_live_server(server)
    # Well within the grace the executors get, and long before the heartbeat timeout.
    assert time.monotonic() - started < 14

    async def read() -> tuple[str, str | None]:
        db = Database(database_url)
        async with db.transaction() as session:
            run = await session.get(Run, run_id)
            assert run is not None
            result = (run.status, run.error)
        await db.dispose()
        return result

    status, error = asyncio.run(read())
    assert status == "failed"
    assert error == "The control plane stopped, and its local executor with it, before the phase ended."
    wait_until(lambda: all(not Path(f"/proc/{pid}").exists() for pid in pids), 10, "the executor to be gone")
