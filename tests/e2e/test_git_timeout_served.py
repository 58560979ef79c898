"""A silent Git server fails a served run, naming the checkout."""

from __future__ import annotations

import time

from support.e2e import Api
from test_git_timeout import silent_git  # noqa: F401 (the fixture, shared with the in-process tests)


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
