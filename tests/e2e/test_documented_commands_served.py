"""The documentation's curl commands, verbatim, against `make run` served by uvicorn."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.make_run import make_run as serve_make_run
from support.make_run import shell
from test_documented_commands import DOC_COMMANDS


@pytest.fixture
def make_run(tmp_path: Path) -> Iterator[tuple[dict[str, str], subprocess.Popen[str]]]:
    """`make run` in the repository, on a fresh data directory and a free port (no scheduler)."""
    with serve_make_run(tmp_path / "data", scheduler=False) as served:
        yield served


def test_make_run_serves_the_demo_and_the_documented_curl_commands_work(
    make_run: tuple[dict[str, str], subprocess.Popen[str]],
) -> None:
    exports, _ = make_run
    assert exports["H"] == '"Authorization: Bearer $FIRSTLUME_TOKEN"'
    assert exports["O"].endswith("/api/v1/orgs/demo") and exports["ST"] == "demo"

    run = json.loads(shell(exports, DOC_COMMANDS["start"]))
    assert (run["status"], run["type"], run["stack"]) == ("queued", "plan", "demo")
    run_id = run["id"]

    changes = json.loads(shell(exports, DOC_COMMANDS["changes"], RUN=run_id))
    assert [g["title"] for g in changes["groups"]] == [
        "Will be deleted", "Will be replaced", "Will be updated", "Will be created",
    ]  # fmt: skip
    assert changes["summary_text"] == "no changes"

    # Not awaiting approval yet: both documented commands get the documented 409, not a 400
    # for the form Content-Type curl -d sends or for -X POST without a body.
    approve = json.loads(shell(exports, DOC_COMMANDS["approve"], RUN=run_id))
    assert approve["error"]["code"] == "invalid_status"
    discard = json.loads(shell(exports, DOC_COMMANDS["discard"], RUN=run_id))
    assert discard["error"]["code"] == "invalid_status"

    stacks = json.loads(shell(exports, 'curl -s -H "$H" $O/stacks'))
    assert [s["slug"] for s in stacks["stacks"]] == ["demo"]
    assert stacks["stacks"][0]["repository"].startswith("file://")
