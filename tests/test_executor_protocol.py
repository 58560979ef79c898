"""The executor protocol is defined once: its models, the routes that serve them and the
document that describes them agree, and the executor's side imports nothing of the server."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from starlette.routing import Route

from firstlume.api.rest.executor_routes import routes
from firstlume.protocol.executor import ENDPOINTS
from support.answering import refusing_control_plane as refusing

ROOT = Path(__file__).resolve().parent.parent
PROTOCOL_DOC = ROOT / "docs" / "executor-protocol.md"


def _generator() -> ModuleType:
    """scripts/protocol_doc.py, the dev tool that writes PROTOCOL_DOC's tables."""
    spec = importlib.util.spec_from_file_location("protocol_doc", ROOT / "scripts" / "protocol_doc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


doc = _generator()


def test_the_document_shows_the_models_as_they_are() -> None:
    """Run `make protocol-doc` when this fails."""
    text = PROTOCOL_DOC.read_text(encoding="utf-8")

    assert doc.update(text) == text


def test_every_field_of_every_message_says_what_it_means() -> None:
    undocumented = [
        f"{name}.{field}"
        for name, schema in doc._models()
        for field, definition in schema.get("properties", {}).items()
        if not definition.get("description")
    ]

    assert undocumented == []


def test_the_routes_are_the_endpoints_the_protocol_lists() -> None:
    served = {
        (method, route.path.removeprefix("/api/v1/executor"))
        for route in routes
        if isinstance(route, Route)
        for method in route.methods or ()
        if method != "HEAD"
    }

    assert served == {(e.method, e.path) for e in ENDPOINTS}


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
