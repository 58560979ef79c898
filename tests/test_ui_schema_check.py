"""The UI's GraphQL operations are checked against schema.graphql when the UI is built: a schema
change that breaks an operation fails `npm run build`, naming the file, line and field."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CODEGEN = ROOT / "frontend" / "scripts" / "codegen.mjs"
NODE = shutil.which("node")


def codegen(schema: Path, out: Path) -> subprocess.CompletedProcess[str]:
    # Like a missing terraform, a missing toolchain fails loudly: `make test` installs both.
    if NODE is None or not (ROOT / "frontend" / "node_modules" / "graphql").exists():
        pytest.fail("needs node and the frontend's packages: run `make frontend` (`make test` does)")
    return subprocess.run(
        [NODE or "node", str(CODEGEN), "--schema", str(schema), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_ui_operations_are_valid_against_the_served_schema(tmp_path: Path) -> None:
    result = codegen(ROOT / "schema.graphql", tmp_path / "generated.ts")
    assert result.returncode == 0, result.stderr
    generated = (tmp_path / "generated.ts").read_text()
    assert "export const ApproveRunDocument" in generated
    assert 'export type RunStatus = "QUEUED"' in generated


def test_a_schema_change_that_breaks_an_operation_fails_the_build_naming_the_field(tmp_path: Path) -> None:
    schema = (ROOT / "schema.graphql").read_text()
    field = "  awaitingApproval: Boolean!\n"
    assert field in schema
    broken = tmp_path / "schema.graphql"
    broken.write_text(schema.replace(field, ""))
    result = codegen(broken, tmp_path / "generated.ts")
    assert result.returncode == 1
    assert 'Cannot query field "awaitingApproval" on type "Run"' in result.stderr
    assert "src/graphql/fragments.graphql:" in result.stderr
    assert not (tmp_path / "generated.ts").exists()
