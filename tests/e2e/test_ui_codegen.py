"""The UI's GraphQL operations are checked against schema.graphql when the UI is built
(graphql-codegen, frontend/codegen.ts; `make check` builds it against the committed schema): a
schema change that breaks an operation fails `npm run build`, naming the file, line and field, and
writes nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FRONTEND = ROOT / "frontend"
CODEGEN = FRONTEND / "node_modules" / ".bin" / "graphql-codegen"


def codegen(schema: Path, out: Path) -> subprocess.CompletedProcess[str]:
    # Like a missing terraform, a missing toolchain fails loudly: `make test` installs both.
    if shutil.which("node") is None or not CODEGEN.exists():
        pytest.fail("needs node and the frontend's packages: run `make frontend` (`make test` does)")
    env = {**os.environ, "FIRSTLUME_SCHEMA": str(schema), "FIRSTLUME_CODEGEN_OUT": str(out)}
    return subprocess.run(
        [str(CODEGEN), "--config", "codegen.ts"],
        cwd=FRONTEND,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_schema_change_that_breaks_an_operation_fails_the_build_naming_the_field(tmp_path: Path) -> None:
    schema = (ROOT / "schema.graphql").read_text()
    field = "  awaitingApproval: Boolean!\n"
    assert field in schema
    broken = tmp_path / "schema.graphql"
    broken.write_text(schema.replace(field, ""))
    out = tmp_path / "out"
    result = codegen(broken, out)
    assert result.returncode == 1
    assert 'Cannot query field "awaitingApproval" on type "Run"' in result.stderr
    assert "src/graphql/fragments.graphql:" in result.stderr
    assert not (out / "generated.ts").exists()
