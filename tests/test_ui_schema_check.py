"""The UI's build checks its GraphQL operations against schema.graphql first (graphql-codegen,
frontend/codegen.ts), so `make check`, which builds the UI, fails on a schema change that breaks
one (tests/e2e/test_ui_codegen.py shows how it fails)."""

from __future__ import annotations

from pathlib import Path

FRONTEND = Path(__file__).resolve().parents[1] / "frontend"


def test_npm_run_build_checks_the_operations_first() -> None:
    scripts = (FRONTEND / "package.json").read_text()
    assert '"build": "npm run codegen && tsc --noEmit && vite build"' in scripts
    assert '"codegen": "graphql-codegen --config codegen.ts"' in scripts
