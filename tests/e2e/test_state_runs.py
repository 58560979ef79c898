"""Runs of a stack whose code declares no backend keep their state in Firstlume: the executor points
Terraform's http backend at the control plane with its phase token, and an apply whose state
moved since its plan fails before Terraform starts. Served control plane, real Terraform and Git,
SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import LiveServer, Tenant
from support.e2e import Api, StackRepo
from support.git_repos import make_repo
from support.terraform import requires_terraform, run_terraform, terraform_env, write_config

pytestmark = requires_terraform

CODE = """
variable "size" {
  type    = string
  default = "small"
}
resource "terraform_data" "app" { input = var.size }
output "size" { value = terraform_data.app.output }
"""


@pytest.fixture
def repo(tmp_path: Path) -> StackRepo:
    url, _ = make_repo(tmp_path / "repo", {"infra/main.tf": CODE})
    # No backend in the code, so no state file of the test's own either.
    return StackRepo(path=tmp_path / "repo", url=url, state_path=tmp_path / "no-such-state")


def versions(api: Api, stack: str) -> list[dict[str, Any]]:
    response = api.http.get(f"{api.o}/stacks/{stack}/state/versions")
    assert response.status_code == 200, response.text
    return response.json()["versions"]  # type: ignore[no-any-return]


def test_a_stack_without_backend_keeps_its_state_between_runs(api: Api, repo: StackRepo) -> None:
    api.create_stack("app", repo)
    first = api.start("app", "apply")
    api.wait(first, "awaiting_approval")
    api.approve(first)
    run = api.wait(first, "applied")
    assert run["state_backends"] == [{"unit": ".", "backend": "firstlume"}]
    [version] = versions(api, "app")
    assert version["run"] == {"id": first, "number": 1, "phase": "apply"}
    assert version["created_by"] == "run #1 (apply phase)" and version["resources"] == 1
    plan_log = api.log(first, "init")
    assert "State: kept in Firstlume" in plan_log
    assert "flx_" not in api.log(first)  # no phase token in the log
    # The lock was held for the run and released by Terraform.
    assert api.http.get(f"{api.o}/stacks/app/state/lock").json() == {"lock": None}

    second = api.start("app", "plan")
    run = api.wait(second, "no_changes")
    assert run["state_backends"] == [{"unit": ".", "backend": "firstlume"}]
    assert len(versions(api, "app")) == 1  # a plan writes no state
    outputs = api.http.get(f"{api.o}/stacks/app/state/outputs").json()["outputs"]
    assert outputs == [{"name": "size", "type": "string", "value": "small", "sensitive": False}]


def test_an_apply_whose_state_moved_since_the_plan_fails_before_terraform_starts(
    api: Api, repo: StackRepo, server: LiveServer, tenant: Tenant, tmp_path: Path
) -> None:
    api.create_stack("app", repo)
    first = api.start("app", "apply")
    api.wait(first, "awaiting_approval")
    api.approve(first)
    api.wait(first, "applied")
    planned_at = versions(api, "app")[0]["serial"]

    repo.commit({"main.tf": CODE.replace('"small"', '"large"')}, "Grow")
    run_id = api.start("app", "apply")
    api.wait(run_id, "awaiting_approval")

    # Somebody applies directly against the backend in between.
    address = f"{api.o}/stacks/app/state"
    direct = write_config(
        tmp_path / "direct", CODE.replace('"small"', '"medium"') + 'terraform {\n  backend "http" {}\n}\n'
    )
    env = terraform_env(tmp_path)
    run_terraform(
        [
            "init",
            "-no-color",
            f"-backend-config=address={address}",
            f"-backend-config=lock_address={address}/lock",
            f"-backend-config=unlock_address={address}/lock",
            "-backend-config=username=ada",
            f"-backend-config=password={tenant.token}",
        ],
        direct,
        env,
    )
    run_terraform(["apply", "-auto-approve", "-no-color"], direct, env)
    moved_to = versions(api, "app")[0]["serial"]
    assert moved_to > planned_at

    api.approve(run_id)
    run = api.wait(run_id, "failed")
    assert run["error"] == f"state changed since the plan (serial {planned_at} → {moved_to}): plan again"
    assert "Apply complete" not in api.log(run_id)
    # The run shows where it stopped: its apply step failed (it never reached Terraform).
    assert [step["status"] for step in run["steps"] if step["name"] == "apply"] == ["failed"]
    # Nothing was applied: the state is the direct apply's.
    current = json.loads(api.http.get(address).content)
    assert current["serial"] == moved_to
    assert current["outputs"]["size"]["value"] == "medium"
