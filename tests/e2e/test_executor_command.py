"""`firstlume executor`, as the launchers start it, loads nothing of the server."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from support.answering import refusing_control_plane as refusing

SERVER_STACK = ("starlette", "strawberry", "sqlalchemy", "alembic", "asyncpg", "aiosqlite", "uvicorn",
                "kubernetes", "broadcaster", "cryptography", "firstlume.services", "firstlume.api",
                "firstlume.db", "firstlume.settings", "firstlume.launchers", "firstlume.scheduler")  # fmt: skip


@pytest.fixture
def refusing_control_plane() -> Iterator[str]:
    """Answers every request 401, so an executor stops at its first one."""
    with refusing() as url:
        yield url


def test_the_executor_command_loads_nothing_of_the_server(refusing_control_plane: str) -> None:
    """`firstlume executor` as the launchers start it, through its first request."""
    probe = (
        "import json, sys, runpy\n"
        "sys.argv = ['firstlume', 'executor']\n"
        "try:\n"
        "    runpy.run_module('firstlume', run_name='__main__')\n"
        "except SystemExit as exit:\n"
        "    assert exit.code == 2, exit.code  # stopped by the 401, as a dead token stops it\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = {"FIRSTLUME_CONTROL_PLANE_URL": refusing_control_plane, "FIRSTLUME_EXECUTOR_TOKEN": "x"}
    result = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120, check=True
    )

    loaded = json.loads(result.stdout.splitlines()[-1])
    assert "firstlume.executor.phase" in loaded  # the probe did reach the executor
    assert [m for m in loaded if m.startswith(SERVER_STACK)] == []
