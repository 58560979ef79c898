"""Managed state without I/O: which code declares a backend, what a saved plan planned against,
and the error of an apply whose state moved."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from firstlume.domain.state import moved_units, state_moved_message
from firstlume.executor.managed_state import (
    OVERRIDE_FILE,
    declares_backend,
    override_text,
    terragrunt_declares_backend,
)


@pytest.mark.parametrize(
    ("files", "declared"),
    [
        ({"main.tf": 'resource "terraform_data" "a" {}'}, False),
        ({"backend.tf": 'terraform {\n  backend "s3" {\n    bucket = "b"\n  }\n}'}, True),
        (
            {
                "main.tf": 'terraform {\n  required_version = ">= 1.5"\n  cloud {\n    organization = "o"\n  }\n}'
            },
            True,
        ),
        ({"main.tf": 'terraform{backend "local"{}}'}, True),
        (
            {
                "main.tf": '# terraform { backend "s3" {} }\n// backend "gcs" {}\n/* terraform { backend "x" {} } */'
            },
            False,
        ),
        ({"main.tf": 'locals {\n  text = "terraform { backend \\"s3\\" {} }"\n}'}, False),
        (
            {
                "main.tf": 'locals {\n  doc = <<EOT\nterraform { backend "s3" {} }\nEOT\n}\nterraform {\n  required_version = "1"\n}'
            },
            False,
        ),
        ({"main.tf": 'resource "x" "y" {\n  backend "pool" {\n  }\n}'}, False),
        ({"main.tf.json": json.dumps({"terraform": {"backend": {"s3": {}}}})}, True),
        ({"main.tf.json": json.dumps({"resource": {}})}, False),
        ({OVERRIDE_FILE: override_text("http://cp/state")}, False),
    ],
)
def test_a_backend_is_found_only_in_a_terraform_block(
    tmp_path: Path, files: dict[str, str], declared: bool
) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert declares_backend(tmp_path) is declared


def test_terragrunt_units_with_remote_state_keep_it(tmp_path: Path) -> None:
    (tmp_path / "terragrunt.hcl").write_text('remote_state {\n  backend = "s3"\n}\n')
    assert terragrunt_declares_backend(tmp_path)
    (tmp_path / "terragrunt.hcl").write_text('terraform {\n  source = "../modules/vpc"\n}\n')
    assert not terragrunt_declares_backend(tmp_path)


def test_the_moved_state_error_names_each_unit_that_moved() -> None:
    assert moved_units({".": 3}, {".": 3}) == []
    assert state_moved_message(moved_units({".": 3}, {".": 5})) == (
        "state changed since the plan (serial 3 → 5): plan again"
    )
    moved = moved_units({"live/vpc": 0, "live/db": 2}, {"live/vpc": 1, "live/db": 2})
    assert state_moved_message(moved) == "state changed since the plan (live/vpc: serial 0 → 1): plan again"
