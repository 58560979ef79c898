"""A silent Git server fails a served run, naming the checkout."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import LiveServer, Tenant, settings_env, start_live_server, stop_live_server
from support.e2e import Api
from test_git_timeout import silent_git  # noqa: F401 (the fixture, shared with the in-process tests)


@pytest.fixture
def server(database_url: str, tmp_path: Path, tenant: Tenant) -> Iterator[LiveServer]:
    env = settings_env(database_url, tmp_path / "data", FIRSTLUME_GIT_TIMEOUT="2")
    served = start_live_server(env, tmp_path / "server.log")
    yield served
    stop_live_server(served)


def test_a_run_against_a_silent_git_server_fails_naming_the_checkout(api: Api, silent_git: str) -> None:
    response = api.post("/stacks", {"slug": "hung", "repository": silent_git})
    assert response.status_code == 201, response.text
    started = time.monotonic()
    run_id = api.start("hung", "plan")
    run = api.wait(run_id, "failed", timeout=60)
    assert time.monotonic() - started < 45
    assert "checkout: cloning http://127.0.0.1" in run["error"], run["error"]
    assert "FIRSTLUME_GIT_TIMEOUT" in run["error"]
    steps = {s["name"]: s["status"] for s in run["steps"]}
    assert steps.get("checkout") == "failed", run["steps"]
    # The stack is free again: the next run is claimed (and fails the same way).
    again = api.start("hung", "plan")
    assert api.wait(again, "failed", timeout=60)["error"] == run["error"]
