"""schema.graphql at the repository root is the schema the server serves."""

from __future__ import annotations

from pathlib import Path

from firstlume.api.graphql.schema import schema
from firstlume.cli import main

ROOT = Path(__file__).resolve().parent.parent
REGENERATE = "firstlume export-schema"


def test_exported_schema_is_up_to_date() -> None:
    exported = ROOT / "schema.graphql"
    assert exported.exists(), f"schema.graphql is missing: run `{REGENERATE}` at the repository root."
    assert exported.read_text() == schema.as_str() + "\n", (
        f"schema.graphql is stale: run `{REGENERATE}` at the repository root and commit the result."
    )


def test_export_schema_writes_the_served_schema(tmp_path: Path) -> None:
    target = tmp_path / "schema.graphql"
    assert main(["export-schema", str(target)]) == 0
    assert target.read_text() == (ROOT / "schema.graphql").read_text()
