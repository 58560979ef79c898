"""`firstlume export-schema` writes the schema the server serves (`make check` compares it with the
committed schema.graphql)."""

from __future__ import annotations

from pathlib import Path

from firstlume.cli import main

ROOT = Path(__file__).resolve().parent.parent


def test_export_schema_writes_the_served_schema(tmp_path: Path) -> None:
    target = tmp_path / "schema.graphql"
    assert main(["export-schema", str(target)]) == 0
    assert target.read_text() == (ROOT / "schema.graphql").read_text()
