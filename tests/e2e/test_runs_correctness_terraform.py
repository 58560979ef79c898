"""Everyday correctness of runs with real Terraform (issue 40, items 1-3): a plan that changes only
outputs is applied and its outputs reach the managed state; a drift run plans what was last
applied, not the branch's tip; a run waits while a person holds the stack's state lock, can be
canceled meanwhile, and applies once the lock is released. Served control plane (scheduler, local
executors), real Git and Terraform, SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import Tenant
from support.e2e import Api, StackRepo, make_stack_repo
from support.git_repos import make_repo
from support.terraform import TERRAFORM, requires_terraform, run_terraform, terraform_env, write_config
from support.waiting import wait_until

pytestmark = requires_terraform

RESOURCE = 'resource "terraform_data" "app" { input = "small" }\n'
OUTPUTS = """
output "size" { value = terraform_data.app.output }
output "greeting" { value = "hello" }
output "password" {
  value     = "hunter2-secret"
  sensitive = true
}
"""


def managed_repo(tmp_path: Path, code: str) -> StackRepo:
    """A stack whose code declares no backend: its state is kept in Firstlume."""
    url, _ = make_repo(tmp_path / "repo", {"infra/main.tf": code})
    return StackRepo(path=tmp_path / "repo", url=url, state_path=tmp_path / "no-such-state")


def outputs_of(api: Api, stack: str) -> dict[str, Any]:
    response = api.http.get(f"{api.o}/stacks/{stack}/state/outputs")
    assert response.status_code == 200, response.text
    return {o["name"]: o for o in response.json()["outputs"]}


# -- 1. a plan of outputs only ------------------------------------------------------------------


def test_a_plan_that_changes_only_outputs_is_applied_and_its_outputs_reach_the_state(
    api: Api, tmp_path: Path
) -> None:
    repo = managed_repo(tmp_path, RESOURCE)
    api.create_stack("app", repo)
    first = api.start("app", "apply")
    api.wait(first, "awaiting_approval")
    api.approve(first)
    api.wait(first, "applied")
    assert outputs_of(api, "app") == {}

    repo.commit({"main.tf": RESOURCE + OUTPUTS}, "Add outputs")
    run_id = api.start("app", "apply")
    # Not no_changes: Terraform itself applies such a plan ("Changes to Outputs").
    run = api.wait(run_id, "awaiting_approval")
    assert run["summary"] == {"delete": 0, "replace": 0, "update": 0, "create": 0}
    assert run["summary_text"] == "3 output changes" and run["output_changes"] == 3
    changes = api.changes(run_id)
    assert changes["summary_text"] == "3 output changes"
    assert all(group["count"] == 0 for group in changes["groups"])
    assert changes["outputs"] == [
        {
            "name": "greeting",
            "unit": ".",
            "action": "create",
            "before": None,
            "after": "hello",
            "sensitive": False,
        },
        {
            "name": "password",
            "unit": ".",
            "action": "create",
            "before": None,
            "after": "(sensitive)",
            "sensitive": True,
        },
        {
            "name": "size",
            "unit": ".",
            "action": "create",
            "before": None,
            "after": "small",
            "sensitive": False,
        },
    ]
    assert "hunter2-secret" not in json.dumps(changes) and "hunter2-secret" not in json.dumps(run)

    api.approve(run_id)
    applied = api.wait(run_id, "applied")
    assert applied["error"] is None
    outputs = outputs_of(api, "app")
    assert outputs["greeting"]["value"] == "hello" and outputs["size"]["value"] == "small"
    assert outputs["password"] == {
        "name": "password",
        "type": "string",
        "value": "(sensitive)",
        "sensitive": True,
    }

    # Now the outputs are in the state, the same code plans no changes.
    assert api.wait(api.start("app", "plan"), "no_changes")["summary_text"] == "no changes"


# -- 2. drift against what was applied -------------------------------------------------------------

DRIFT_MAIN = """
resource "terraform_data" "first" { input = "one" }
resource "terraform_data" "second" { input = "two" }
"""
UNAPPLIED = DRIFT_MAIN.replace('"one"', '"uno"') + "".join(
    f'resource "terraform_data" "new{i}" {{ input = "{i}" }}\n' for i in range(6)
)


@pytest.fixture
def drift_repo(tmp_path: Path) -> StackRepo:
    return make_stack_repo(tmp_path, DRIFT_MAIN)


def test_a_drift_run_plans_the_last_applied_commit_and_reports_only_real_drift(
    api: Api, drift_repo: StackRepo
) -> None:
    api.create_stack("app", drift_repo)
    api.settings("", {"require_approval": False})
    apply_id = api.start("app", "apply")
    applied = api.wait(apply_id, "applied")
    applied_sha = applied["commit"]["sha"]

    # A commit nobody has applied yet: 6 creates and 1 update that are not drift.
    tip = drift_repo.commit({"main.tf": UNAPPLIED}, "Not applied yet")
    assert tip != applied_sha
    # And a real drift: someone edits the state behind Terraform's back.
    state = drift_repo.state()
    for resource in state["resources"]:
        if resource["name"] == "second":
            resource["instances"][0]["attributes"]["input"]["value"] = "edited-by-hand"
    state["serial"] += 1
    drift_repo.state_path.write_text(json.dumps(state))

    drift_id = api.start("app", "drift")
    run = api.wait(drift_id, "drifted")
    assert run["summary_text"] == "1 update"
    assert list(api.by_address(drift_id)) == ["terraform_data.second"]
    # It names the apply and the commit it compared with, in the run and in its log.
    assert run["commit"]["sha"] == applied_sha and run["drift_base_run"] == apply_id
    assert f"planning commit {applied_sha}" in api.log(drift_id, "checkout")
    assert "run #1" in api.log(drift_id, "checkout")
    # A drift run never applies: the edited value is still there, and the tip is still unapplied.
    assert drift_drifted_value(drift_repo) == "edited-by-hand"
    assert "terraform_data.new0" not in drift_repo.resources()


def drift_drifted_value(repo: StackRepo) -> Any:
    return repo.resources()["terraform_data.second"]["input"]["value"]


def test_a_drift_run_of_a_stack_never_applied_ends_with_the_reason_before_terraform(
    api: Api, drift_repo: StackRepo
) -> None:
    api.create_stack("fresh", drift_repo)
    run_id = api.start("fresh", "drift")
    run = api.wait(run_id, "failed")
    assert run["error"] == (
        "Stack 'fresh' has no successful apply yet: a drift run compares the infrastructure with what "
        "the last apply made, so there is nothing to compare. Apply the stack first."
    )
    assert run["steps"] == [] and run["commit"] is None and run["drift_base_run"] is None
    assert api.log(run_id) == ""  # nothing was checked out, no Terraform started
    assert not drift_repo.state_path.exists()


# -- 3. a state lock held by a person ---------------------------------------------------------------


def start_direct_apply(api: Api, tenant: Tenant, tmp_path: Path, release: Path) -> subprocess.Popen[str]:
    """ada's own `terraform apply` against the stack's managed state (the http backend, as the
    README shows), held open by a resource that waits for `release` to exist."""
    address = f"{api.o}/stacks/app/state"
    code = (
        RESOURCE
        + 'resource "terraform_data" "hold" {\n  provisioner "local-exec" {\n'
        + f'    command = "while [ ! -f {release.as_posix()} ]; do sleep 0.1; done"\n  }}\n}}\n'
        + 'terraform {\n  backend "http" {}\n}\n'
    )
    direct = write_config(tmp_path / "direct", code)
    env = terraform_env(tmp_path, TF_HTTP_USERNAME="ada", TF_HTTP_PASSWORD=tenant.token)
    run_terraform(
        [
            "init",
            "-no-color",
            f"-backend-config=address={address}",
            f"-backend-config=lock_address={address}/lock",
            f"-backend-config=unlock_address={address}/lock",
        ],
        direct,
        env,
    )
    assert TERRAFORM is not None
    return subprocess.Popen(
        [TERRAFORM, "apply", "-auto-approve", "-input=false", "-no-color"],
        cwd=direct,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_a_run_started_while_a_person_holds_the_state_lock_waits_and_applies_after_the_unlock(
    api: Api, tenant: Tenant, tmp_path: Path
) -> None:
    repo = managed_repo(tmp_path, RESOURCE)
    api.create_stack("app", repo)
    api.create_stack("other", managed_repo(tmp_path / "other", RESOURCE))
    api.settings("", {"require_approval": False})

    release = tmp_path / "release"
    direct = start_direct_apply(api, tenant, tmp_path, release)
    try:
        lock = wait_until(
            lambda: api.http.get(f"{api.o}/stacks/app/state/lock").json()["lock"], 60, "ada's lock"
        )
        assert lock["holder"] == "ada@example.com" and lock["run"] is None

        canceled = api.start("app", "plan")
        run_id = api.start("app", "apply")
        waiting = wait_until(lambda: api.run(run_id)["waiting_for"], 30, "the waiting reason")
        assert waiting.startswith("waiting for the state lock held by ada@example.com since ")
        assert waiting.endswith(" UTC")
        assert api.run(canceled)["waiting_for"] == waiting

        # The scheduler keeps passing (another stack's run goes all the way) and leaves them queued.
        api.wait(api.start("other", "apply"), "applied")
        assert api.run(canceled)["status"] == "queued" and api.run(run_id)["status"] == "queued"

        # Canceling a run while it waits is allowed.
        response = api.post(f"/runs/{canceled}/cancel")
        assert response.status_code == 200, response.text
        assert api.run(canceled)["status"] == "canceled"
        assert api.run(run_id)["status"] == "queued"

        # ada's apply ends: Terraform unlocks, and the run starts and applies.
        release.touch()
        output, _ = direct.communicate(timeout=90)
        assert direct.returncode == 0, output
    finally:
        release.touch()
        if direct.poll() is None:
            direct.kill()
            direct.wait()
    run = api.wait(run_id, "applied")
    assert run["waiting_for"] is None and run["error"] is None
    assert api.run(canceled)["steps"] == []
    # The run planned against ada's state: it deletes her extra resource, and keeps the rest.
    assert run["summary_text"] == "1 delete"
    assert api.http.get(f"{api.o}/stacks/app/state/lock").json() == {"lock": None}
