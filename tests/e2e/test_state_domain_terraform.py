"""The serial a saved plan was planned against, read from a plan the real terraform made."""

from __future__ import annotations

import json
from pathlib import Path

from firstlume.domain.state import plan_state_serial
from support.terraform import requires_terraform, run_terraform, terraform_env, write_config


@requires_terraform
def test_the_serial_a_saved_plan_planned_against_is_read_from_the_plan(tmp_path: Path) -> None:
    env = terraform_env(tmp_path)
    code = write_config(tmp_path / "code", 'resource "terraform_data" "a" { input = "one" }')
    run_terraform(["init", "-no-color"], code, env)
    run_terraform(["plan", "-no-color", "-out=first.tfplan"], code, env)
    assert plan_state_serial((code / "first.tfplan").read_bytes()) == 0
    run_terraform(["apply", "-auto-approve", "-no-color"], code, env)
    run_terraform(["apply", "-auto-approve", "-no-color", "-replace=terraform_data.a"], code, env)
    serial = json.loads((code / "terraform.tfstate").read_text())["serial"]
    write_config(code, 'resource "terraform_data" "a" { input = "two" }')
    run_terraform(["plan", "-no-color", "-out=second.tfplan"], code, env)
    assert serial > 1 and plan_state_serial((code / "second.tfplan").read_bytes()) == serial
    assert plan_state_serial(b"not a zip") is None
