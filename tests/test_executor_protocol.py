"""The executor protocol is defined once: its models, the routes that serve them and the
document that describes them agree, and the executor's side imports nothing of the server."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from starlette.routing import Route

from firstlume.api.rest.executor_routes import routes
from firstlume.protocol.executor import ENDPOINTS

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
