"""What is stored stays sealed, and a plan that went stale is refused by Terraform itself."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from sqlalchemy import select

from firstlume.db.engine import Database
from firstlume.db.models import PlanArtifact
from firstlume.services.context import Context
from firstlume.services.sealed_plan import open_plan_json
from support.e2e import Api, backend_tf, make_stack_repo
from support.secrets import database_bytes
from support.terraform import apply, requires_terraform, terraform_env, write_config

pytestmark = requires_terraform

MARKER = "PLAINTEXT-MARKER-7f3a"
SECRET = "hunter2-super-secret-value"

MARKED = f'''resource "terraform_data" "marker" {{ input = "{MARKER}" }}\n'''
SEALED = (
    MARKED
    + """
variable "password" {
  type      = string
  sensitive = true
}
resource "terraform_data" "db" { input = { user = "app", password = var.password } }
"""
)


def test_plan_artifacts_and_secrets_are_never_in_the_database_in_clear(
    api: Api, tmp_path: Path, database_url: str, ctx: Context
) -> None:
    repo = make_stack_repo(tmp_path, SEALED)
    # The marker resource exists before Firstlume's run, so it is unchanged in the plan: the
    # marker is only in the plan file and plan JSON (prior state, configuration), never in a
    # change or a log line. Any trace of it in the database is the plan stored in clear.
    outside = tmp_path / "outside"
    write_config(outside, MARKED)
    write_config(outside, backend_tf(repo.state_path), name="backend.tf")
    apply(outside, terraform_env(tmp_path))
    api.create_stack("app", repo)
    api.put_variable("", "password", {"value": SECRET, "sensitive": True})
    run_id = api.start("app", "apply")
    assert api.wait(run_id, "awaiting_approval")["summary_text"] == "1 create"
    api.approve(run_id)
    api.wait(run_id, "applied")
    assert repo.resources()["terraform_data.db"]["input"]["value"]["password"] == SECRET  # it was really used

    # Positive control: the stored plan does hold the marker and the secret, once decrypted.
    async def stored_plan_json() -> str:
        db = Database(database_url)
        async with db.transaction() as session:
            # The JSON is deferred (nothing on a run's path reads it): asked for by name.
            sealed = await session.scalar(
                select(PlanArtifact.plan_json_sealed).where(PlanArtifact.run_id == run_id)
            )
            assert sealed is not None
            plain = open_plan_json(ctx.keyring, run_id, sealed).decode()
        await db.dispose()
        return plain

    plan_json = asyncio.run(stored_plan_json())
    assert MARKER in plan_json and SECRET in plan_json

    stored = database_bytes(database_url)
    for needle in (MARKER, SECRET):
        assert needle.encode() not in stored
        assert needle.encode().hex().encode() not in stored
    # Nor in anything the API says about the run.
    everything = json.dumps([api.run(run_id), api.changes(run_id)]) + api.log(run_id)
    assert SECRET not in everything
    assert "(sensitive)" in json.dumps(api.changes(run_id))


def test_apply_of_a_stale_plan_is_refused_and_fails_the_run(api: Api, tmp_path: Path) -> None:
    repo = make_stack_repo(tmp_path, 'resource "terraform_data" "a" { input = "1" }\n')
    api.create_stack("app", repo)
    api.settings("", {"require_approval": False})
    api.wait(api.start("app", "apply"), "applied")
    repo.commit({"main.tf": 'resource "terraform_data" "a" { input = "2" }\n'}, "Two")
    api.settings("", {"require_approval": True})
    run_id = api.start("app", "apply")
    api.wait(run_id, "awaiting_approval")

    # The state changes after the plan (someone else's apply, here by hand).
    state = repo.state()
    state["serial"] += 1
    repo.state_path.write_text(json.dumps(state))

    api.approve(run_id)
    run = api.wait(run_id, "failed")
    assert "Saved plan is stale" in run["error"]
    # The apply never started: its resources stay pending (approved, not started), not
    # not_applied, which the documentation keeps for "another resource failed".
    assert {c["state"] for c in api.by_address(run_id).values()} == {"pending"}
    assert run["failed_resources"] == {"count": 0, "addresses": []}
    # The error is printed once, and it is what the log ends with.
    log = api.log(run_id)
    assert log.count("Saved plan is stale") == 1, log
    assert "Error: Saved plan is stale" in log.rstrip().rsplit("\n\n", 2)[-2], log
    assert repo.resources()["terraform_data.a"]["input"]["value"] == "1"
