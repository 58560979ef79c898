"""Real runs end to end: REST → scheduler → local executor → real Terraform and Git → REST.

Each test serves the control plane with uvicorn (scheduler on, local launcher) on SQLite and on
PostgreSQL, and drives it only through the documented REST routes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from firstlume.services.context import Context
from support.e2e import Api, StackRepo, make_stack_repo
from support.terraform import requires_terraform

pytestmark = requires_terraform

MAIN = """
variable "greeting" {
  type    = string
  default = "hello"
}
resource "terraform_data" "first" { input = var.greeting }
resource "terraform_data" "second" { input = "two" }
"""


@pytest.fixture
def repo(tmp_path: Path) -> StackRepo:
    return make_stack_repo(tmp_path, MAIN, config_yaml="variables:\n  greeting: from-config\n")


def test_plan_run_ends_planned_with_commit_steps_configuration_and_log(api: Api, repo: StackRepo) -> None:
    api.create_stack("app", repo)
    run_id = api.start("app", "plan")
    run = api.wait(run_id, "planned")
    assert run["commit"]["author"] == "Ada Lovelace <ada@example.com>"
    assert run["commit"]["message"] == "Initial stack" and run["commit"]["url"] is None
    assert len(run["commit"]["sha"]) == 40
    assert [(s["name"], s["status"]) for s in run["steps"]] == [
        ("checkout", "done"),
        ("init", "done"),
        ("plan", "done"),
    ]
    assert all(isinstance(s["duration_ms"], int) for s in run["steps"])
    assert run["summary_text"] == "2 create"
    assert run["configuration"]["engine"] == "terraform"
    assert "greeting: from-config" in run["configuration"]["config_yaml"]
    assert run["configuration"]["variables"] == [
        {"name": "greeting", "origin": "config.yaml", "sensitive": False, "kind": "terraform"}
    ]
    assert run["state_backends"] == [{"unit": ".", "backend": "local"}]
    assert run["approval"]["required"] is None  # a plan run reads no approval rule
    plan_log = api.log(run_id, "plan")
    assert "terraform_data.first" in plan_log and "will be created" in plan_log
    assert api.log(run_id).count("terraform_data.first will be created") == 1
    # A plan run never applies.
    assert not repo.state_path.exists() or repo.resources() == {}


def test_apply_waits_for_approval_then_applies(api: Api, repo: StackRepo) -> None:
    api.create_stack("app", repo)
    run_id = api.start("app", "apply")
    run = api.wait(run_id, "awaiting_approval")
    assert run["approval"]["required"] is True
    assert [(s["name"], s["status"]) for s in run["steps"]][-1] == ("approval", "running")
    assert {c["state"] for c in api.by_address(run_id).values()} == {None}
    api.approve(run_id)
    run = api.wait(run_id, "applied")
    assert [(s["name"], s["status"]) for s in run["steps"]] == [
        ("checkout", "done"), ("init", "done"), ("plan", "done"), ("approval", "done"), ("apply", "done"),
    ]  # fmt: skip
    assert run["approval"]["approved_by"] == "ada@example.com"
    assert {a: c["state"] for a, c in api.by_address(run_id).items()} == {
        "terraform_data.first": "done", "terraform_data.second": "done",
    }  # fmt: skip
    assert repo.resources()["terraform_data.first"]["input"]["value"] == "from-config"
    assert "Apply complete!" in api.log(run_id, "apply")

    # Nothing left to do: the next apply ends no_changes without asking for approval.
    again = api.start("app", "apply")
    assert api.wait(again, "no_changes")["summary_text"] == "no changes"


def test_apply_without_approval_goes_straight_through_apply_queued(
    api: Api, repo: StackRepo, ctx: Context
) -> None:
    api.create_stack("app", repo, folder="prod")
    api.settings("/folders/prod", {"require_approval": False})
    run_id = api.start("app", "apply")
    run = api.wait(run_id, "applied")
    assert run["approval"]["required"] is False
    assert run["configuration"]["settings"]["require_approval"] == {"value": False, "origin": "folder:prod"}
    assert ("approval", "skipped") in [(s["name"], s["status"]) for s in run["steps"]]
    statuses = _history(ctx, run_id)
    assert statuses == ["queued", "planning", "apply_queued", "applying", "applied"]


def _history(ctx: Context, run_id: str) -> list[str]:
    import asyncio

    from sqlalchemy import select

    from firstlume.db.engine import Database
    from firstlume.db.models import RunStatusChange

    async def read() -> list[str]:
        db = Database(ctx.settings.database_url)
        try:
            async with db.transaction() as session:
                rows = await session.scalars(
                    select(RunStatusChange.to_status)
                    .where(RunStatusChange.run_id == run_id)
                    .order_by(RunStatusChange.id)
                )
                return list(rows)
        finally:
            await db.dispose()

    return asyncio.run(read())


def test_discard_releases_the_stack_for_the_next_run(api: Api, repo: StackRepo) -> None:
    api.create_stack("app", repo)
    first = api.start("app", "apply")
    second = api.start("app", "plan")
    api.wait(first, "awaiting_approval")
    assert api.run(second)["status"] == "queued" and api.run(second)["queue_position"] == 1
    response = api.post(f"/runs/{first}/discard")
    assert response.status_code == 200 and response.json()["status"] == "discarded"
    api.wait(second, "planned")
    assert not repo.state_path.exists() or repo.resources() == {}


def test_destroy_deletes_what_was_applied(api: Api, repo: StackRepo) -> None:
    api.create_stack("app", repo)
    api.settings("", {"require_approval": False})
    api.wait(api.start("app", "apply"), "applied")
    assert set(repo.resources()) == {"terraform_data.first", "terraform_data.second"}
    api.settings("", {"require_approval": None})
    destroy = api.start("app", "destroy")
    run = api.wait(destroy, "awaiting_approval")
    assert run["summary_text"] == "2 delete"
    api.approve(destroy)
    api.wait(destroy, "applied")
    assert {a: (c["action"], c["state"]) for a, c in api.by_address(destroy).items()} == {
        "terraform_data.first": ("delete", "done"), "terraform_data.second": ("delete", "done"),
    }  # fmt: skip
    assert repo.resources() == {}


def test_drift_finds_nothing_then_a_change_made_outside_terraform(api: Api, repo: StackRepo) -> None:
    api.create_stack("app", repo)
    api.settings("", {"require_approval": False})
    api.wait(api.start("app", "apply"), "applied")
    assert api.wait(api.start("app", "drift"), "no_changes")["status"] == "no_changes"

    # Someone edits the state behind Terraform's back.
    state = repo.state()
    for resource in state["resources"]:
        if resource["name"] == "second":
            resource["instances"][0]["attributes"]["input"]["value"] = "edited-by-hand"
    state["serial"] += 1
    repo.state_path.write_text(json.dumps(state))

    drift = api.start("app", "drift")
    run = api.wait(drift, "drifted")
    assert run["summary_text"] == "1 update"
    change = api.by_address(drift)["terraform_data.second"]
    assert {a["name"]: (a["before"], a["after"]) for a in change["attributes"]}["input"] == (
        "edited-by-hand",
        "two",
    )
    # A drift run never applies: the edited value is still there.
    assert repo.resources()["terraform_data.second"]["input"]["value"] == "edited-by-hand"


def test_apply_uses_the_planned_commit_and_variables_even_after_both_changed(
    api: Api, repo: StackRepo
) -> None:
    api.create_stack("app", repo, folder="prod")
    api.put_variable("/folders/prod", "greeting", {"value": "from-folder"})
    run_id = api.start("app", "apply")
    planned = api.wait(run_id, "awaiting_approval")
    planned_sha = planned["commit"]["sha"]
    assert {v["name"]: v["origin"] for v in planned["configuration"]["variables"]} == {
        "greeting": "folder:prod"
    }

    # Between plan and apply: the branch moves, and the folder's variable changes.
    moved = repo.commit({"main.tf": MAIN.replace('"two"', '"moved-on"')}, "Change second")
    api.put_variable("/folders/prod", "greeting", {"value": "changed-after-plan"})

    api.approve(run_id)
    run = api.wait(run_id, "applied")
    assert run["commit"]["sha"] == planned_sha != moved
    resources = repo.resources()
    assert resources["terraform_data.first"]["input"]["value"] == "from-folder"
    assert resources["terraform_data.second"]["input"]["value"] == "two"

    # The next plan sees the new commit and the new variable.
    follow_up = api.start("app", "plan")
    assert api.wait(follow_up, "planned")["commit"]["sha"] == moved


FAILING = """
resource "terraform_data" "first" { input = "one" }
resource "terraform_data" "broken" {
  input      = "b"
  depends_on = [terraform_data.first]
  provisioner "local-exec" {
    command = "echo provisioning-went-wrong >&2; exit 1"
  }
}
resource "terraform_data" "later" {
  input      = "l"
  depends_on = [terraform_data.broken]
}
"""


def test_failing_resource_fails_the_run_and_the_rest_are_done_or_not_applied(
    api: Api, tmp_path: Path
) -> None:
    repo = make_stack_repo(tmp_path, FAILING)
    api.create_stack("app", repo)
    run_id = api.start("app", "apply")
    api.wait(run_id, "awaiting_approval")
    api.approve(run_id)
    run = api.wait(run_id, "failed")
    changes = api.by_address(run_id)
    assert {a: c["state"] for a, c in changes.items()} == {
        "terraform_data.first": "done", "terraform_data.broken": "failed", "terraform_data.later": "not_applied",
    }  # fmt: skip
    assert "local-exec provisioner error" in changes["terraform_data.broken"]["error"]
    assert "provisioning-went-wrong" in changes["terraform_data.broken"]["error"]
    assert changes["terraform_data.first"]["error"] is None
    # The failure belongs to a resource: the run has no error of its own, and counts it apart.
    assert run["error"] is None
    assert run["failed_resources"] == {"count": 1, "addresses": ["terraform_data.broken"]}
    assert ("apply", "failed") in [(s["name"], s["status"]) for s in run["steps"]]
    log = api.log(run_id, "apply")
    assert log.count("Error: local-exec provisioner error") == 1
    assert log.endswith("Apply failed: 1 resource failed: terraform_data.broken\n")


REPLACED = """
variable "generation" {
  type    = string
  default = "1"
}
resource "terraform_data" "plain" { triggers_replace = [var.generation] }
resource "terraform_data" "cbd" {
  triggers_replace = [var.generation]
  lifecycle { create_before_destroy = true }
}
"""


def test_replacements_record_their_two_stages_in_the_order_they_ran(api: Api, tmp_path: Path) -> None:
    repo = make_stack_repo(tmp_path, REPLACED)
    api.create_stack("app", repo)
    api.settings("", {"require_approval": False})
    api.wait(api.start("app", "apply"), "applied")
    api.put_variable("", "generation", {"value": "2"})
    api.settings("", {"require_approval": True, "confirm_destructive": True})
    run_id = api.start("app", "apply")
    run = api.wait(run_id, "awaiting_approval")
    assert run["summary_text"] == "2 replace"
    refused = api.post(f"/runs/{run_id}/approve", {"acknowledged": ["terraform_data.plain"]})
    assert refused.status_code == 409 and refused.json()["error"]["missing"] == ["terraform_data.cbd"]
    api.approve(run_id, ["terraform_data.cbd", "terraform_data.plain"])
    api.wait(run_id, "applied")
    changes = api.by_address(run_id)
    assert changes["terraform_data.plain"]["stages"] == [
        {"action": "delete", "state": "done"}, {"action": "create", "state": "done"},
    ]  # fmt: skip
    assert changes["terraform_data.cbd"]["stages"] == [
        {"action": "create", "state": "done"}, {"action": "delete", "state": "done"},
    ]  # fmt: skip
    assert changes["terraform_data.plain"]["replaced_because"] == ["triggers_replace"]
    assert {c["state"] for c in changes.values()} == {"done"}


def test_invalid_config_yaml_fails_the_run_with_a_clear_error(api: Api, tmp_path: Path) -> None:
    repo = make_stack_repo(tmp_path, MAIN, config_yaml="engine: pulumi\nvariables:\n  greeting: x\n")
    api.create_stack("app", repo)
    run = api.wait(api.start("app", "plan"), "failed")
    assert "config.yaml" in run["error"] and "engine" in run["error"] and "pulumi" in run["error"]
    assert ("checkout", "failed") in [(s["name"], s["status"]) for s in run["steps"]]


def test_follow_streams_the_log_live_until_the_run_ends(api: Api, repo: StackRepo) -> None:
    api.create_stack("app", repo)
    run_id = api.start("app", "apply")
    import threading

    def approve_when_asked() -> None:
        approver = Api(
            api.o.split("/api/v1/")[0], api.o.rsplit("/", 1)[1], api.http.headers["Authorization"][7:]
        )
        approver.wait(run_id, "awaiting_approval")
        approver.approve(run_id)
        approver.close()

    approving = threading.Thread(target=approve_when_asked)
    approving.start()
    with api.http.stream("GET", f"{api.o}/runs/{run_id}/logs", params={"follow": "true"}) as response:
        assert response.headers["content-type"].startswith("text/plain")
        received = ""
        status_at_first_text = None
        for chunk in response.iter_text():
            if status_at_first_text is None and chunk:
                status_at_first_text = api.run(run_id)["status"]
            received += chunk
    approving.join(timeout=60)
    # Text arrived while the run was still going, not only at the end.
    assert status_at_first_text in ("planning", "awaiting_approval", "apply_queued", "applying")
    # The stream ended by itself when the run did, with every line exactly once.
    assert api.run(run_id)["status"] == "applied"
    assert received == api.log(run_id)
    assert received.count("Apply complete!") == 1


def test_apply_refuses_a_plan_whose_recorded_hash_does_not_match(
    api: Api, repo: StackRepo, database_url: str
) -> None:
    import asyncio

    from sqlalchemy import update

    from firstlume.db.engine import Database
    from firstlume.db.models import PlanArtifact

    api.create_stack("app", repo)
    run_id = api.start("app", "apply")
    api.wait(run_id, "awaiting_approval")

    async def tamper() -> None:
        db = Database(database_url)
        async with db.transaction() as session:
            await session.execute(
                update(PlanArtifact).where(PlanArtifact.run_id == run_id).values(plan_sha256="0" * 64)
            )
        await db.dispose()

    asyncio.run(tamper())
    api.approve(run_id)
    run = api.wait(run_id, "failed")
    assert "does not match" in run["error"]
    assert not repo.state_path.exists() or repo.resources() == {}


WITH_OUTPUTS = """
variable "token" {
  type      = string
  default   = "tok-3f9a-very-secret"
  sensitive = true
}
resource "terraform_data" "site" { input = "eu" }
output "region" { value = terraform_data.site.output }
output "token" {
  value     = var.token
  sensitive = true
}
"""


def test_both_phases_mark_their_parts_and_the_apply_log_ends_with_the_outputs(
    api: Api, tmp_path: Path
) -> None:
    repo = make_stack_repo(tmp_path, WITH_OUTPUTS)
    api.create_stack("app", repo)
    api.settings("", {"require_approval": False})
    run_id = api.start("app", "apply")
    api.wait(run_id, "applied")

    headings = [line for line in api.log(run_id).splitlines() if line.startswith("--- ")]
    assert headings == ["--- checkout", "--- init", "--- plan", "--- checkout", "--- init", "--- apply"]
    assert api.log(run_id, "plan").startswith("--- plan\n")
    assert api.log(run_id, "apply").startswith("--- checkout\n")
    assert api.log(run_id, "apply").endswith('\nOutputs:\n\nregion = "eu"\ntoken = (sensitive)\n')
    assert "tok-3f9a-very-secret" not in api.log(run_id)
