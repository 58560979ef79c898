"""Apply events from the real terraform: replacements in the order they ran, failures, a stale plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from firstlume.domain.apply_events import ApplyTracker, ResourceUpdate, Stage
from firstlume.domain.changes import changes_from_plan
from support.terraform import apply, apply_json, plan_json, requires_terraform, terraform_env, write_config

FAILING = """
resource "terraform_data" "first" { input = "1" }
resource "terraform_data" "broken" {
  input      = "2"
  depends_on = [terraform_data.first]
  provisioner "local-exec" { command = "echo it-broke >&2; exit 1" }
}
resource "terraform_data" "later" {
  input      = "3"
  depends_on = [terraform_data.broken]
}
"""


REPLACE_BEFORE = """
resource "terraform_data" "plain" { triggers_replace = "v1" }
resource "terraform_data" "cbd" {
  triggers_replace = "v1"
  lifecycle { create_before_destroy = true }
}
"""


REPLACE_AFTER = REPLACE_BEFORE.replace('"v1"', '"v2"')


REPLACE_FAILING = """
resource "terraform_data" "plain" {
  triggers_replace = "v2"
  provisioner "local-exec" { command = "exit 1" }
}
resource "terraform_data" "cbd" {
  triggers_replace = "v2"
  lifecycle { create_before_destroy = true }
  provisioner "local-exec" { command = "exit 1" }
}
"""


class Recorder:
    """Feeds a tracker and keeps every state each resource went through."""

    def __init__(self, plan: dict[str, Any]) -> None:
        self.tracker = ApplyTracker((c.address, c.action, c.stage_order) for c in changes_from_plan(plan))
        self.history: dict[str, list[str]] = {u.address: [u.state] for u in self.tracker.snapshot()}
        self.updates: list[ResourceUpdate] = []

    def feed_all(self, messages: list[dict[str, Any]]) -> None:
        for message in messages:
            self._record(self.tracker.feed(message))
        self._record(self.tracker.finish())

    def _record(self, updates: list[ResourceUpdate]) -> None:
        for update in updates:
            self.updates.append(update)
            if self.history[update.address][-1] != update.state:
                self.history[update.address].append(update.state)

    def final(self) -> dict[str, ResourceUpdate]:
        return {u.address: u for u in self.tracker.snapshot()}


def _plan_and_apply(workdir: Path, env: dict[str, str]) -> tuple[int, Recorder, list[dict[str, Any]]]:
    plan = plan_json(workdir, env)
    result, messages = apply_json(workdir, env)
    recorder = Recorder(plan)
    recorder.feed_all(messages)
    return result.returncode, recorder, messages


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return terraform_env(tmp_path)


@requires_terraform
def test_real_failed_apply_gives_done_failed_with_message_and_not_applied(
    tmp_path: Path, env: dict[str, str]
) -> None:
    workdir = write_config(tmp_path / "stack", FAILING)
    returncode, rec, messages = _plan_and_apply(workdir, env)
    assert returncode == 1
    final = rec.final()
    assert final["terraform_data.first"] == ResourceUpdate("terraform_data.first", "done", None, ())
    broken = final["terraform_data.broken"]
    assert broken.state == "failed" and broken.stages == ()
    assert broken.error is not None
    assert broken.error.startswith("local-exec provisioner error\n\n")
    assert "exit status 1" in broken.error and "it-broke" in broken.error
    assert final["terraform_data.later"] == ResourceUpdate("terraform_data.later", "not_applied", None, ())
    assert rec.history == {
        "terraform_data.first": ["pending", "applying", "done"],
        "terraform_data.broken": ["pending", "applying", "failed"],
        "terraform_data.later": ["pending", "not_applied"],
    }
    assert rec.tracker.run_errors == []
    # Terraform sends the message after apply_errored, and the update carrying it is returned then.
    kinds = [m["type"] for m in messages if "broken" in str(m.get("hook") or m.get("diagnostic"))]
    assert kinds.index("diagnostic") > kinds.index("apply_errored")
    assert any(u.address == "terraform_data.broken" and u.error for u in rec.updates)


@requires_terraform
def test_real_replacements_show_both_stages_in_the_order_they_ran(
    tmp_path: Path, env: dict[str, str]
) -> None:
    workdir = write_config(tmp_path / "stack", REPLACE_BEFORE)
    apply(workdir, env)
    write_config(workdir, REPLACE_AFTER)
    returncode, rec, messages = _plan_and_apply(workdir, env)
    assert returncode == 0
    # What Terraform really reports for the two stages of a replacement.
    hooks = [
        (m["type"], m["hook"]["action"])
        for m in messages
        if m["type"].startswith("apply_") and m["hook"]["resource"]["addr"] == "terraform_data.cbd"
    ]
    assert hooks == [
        ("apply_start", "create"),
        ("apply_complete", "create"),
        ("apply_start", "delete"),
        ("apply_complete", "delete"),
    ]
    final = rec.final()
    assert final["terraform_data.plain"].stages == (Stage("delete", "done"), Stage("create", "done"))
    assert final["terraform_data.cbd"].stages == (Stage("create", "done"), Stage("delete", "done"))
    assert {u.state for u in final.values()} == {"done"}
    # Applying from the first stage's start until the second one is done.
    assert rec.history["terraform_data.cbd"] == ["pending", "applying", "done"]
    cbd_updates = [u for u in rec.updates if u.address == "terraform_data.cbd"]
    assert cbd_updates[1].stages == (Stage("create", "done"), Stage("delete", "pending"))
    assert cbd_updates[1].state == "applying"


@requires_terraform
def test_real_failed_replacement_stages(tmp_path: Path, env: dict[str, str]) -> None:
    workdir = write_config(tmp_path / "stack", REPLACE_BEFORE)
    apply(workdir, env)
    write_config(workdir, REPLACE_FAILING)
    returncode, rec, _ = _plan_and_apply(workdir, env)
    assert returncode == 1
    final = rec.final()
    plain, cbd = final["terraform_data.plain"], final["terraform_data.cbd"]
    assert plain.state == "failed"
    assert plain.stages == (Stage("delete", "done"), Stage("create", "failed"))
    assert cbd.state == "failed"
    assert cbd.stages == (Stage("create", "failed"), Stage("delete", "not_applied"))
    assert plain.error and cbd.error and "local-exec provisioner error" in cbd.error


@requires_terraform
def test_real_stale_plan_is_a_run_error_and_leaves_everything_pending(
    tmp_path: Path, env: dict[str, str]
) -> None:
    workdir = write_config(tmp_path / "stack", REPLACE_BEFORE)
    plan = plan_json(workdir, env)
    assert apply_json(workdir, env)[0].returncode == 0
    result, messages = apply_json(workdir, env)  # the same plan file again
    assert result.returncode == 1
    rec = Recorder(plan)
    rec.feed_all(messages)
    assert len(rec.tracker.run_errors) == 1
    assert rec.tracker.run_errors[0].startswith("Saved plan is stale")
    # The apply never started: nothing is not_applied (reserved for "another resource failed"),
    # everything stays pending, as approved and never started.
    assert not rec.tracker.started
    assert {u.state for u in rec.final().values()} == {"pending"}
    assert {s.state for u in rec.final().values() for s in u.stages} <= {"pending"}
