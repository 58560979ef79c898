"""Browser: reviewing a plan: an object attribute diffed key by key (exactly the keys that change,
the rest folded), lists by element, multi-line strings by line, and confirm_destructive's "tick
all" that still needs the explicit approval. A real plan of real Terraform.

Pinned to SQLite: the browser tests exercise the UI, and the API beneath them already runs on
both databases in the rest of the suite; one dialect keeps these slower tests fast."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from playwright.sync_api import expect

from conftest import Tenant
from support.e2e import Api, make_stack_repo
from support.terraform import requires_terraform

if TYPE_CHECKING:
    from support.browser import UI

# The fixture `ui`.
pytest_plugins = ["support.browser"]
pytestmark = [requires_terraform, pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)]

CONFIG_BEFORE = """
resource "terraform_data" "cfg" {
  input = {
    name   = "web"
    size   = 1
    old    = "retired"
    ports  = [80, 443]
    tags   = { env = "dev", team = "core" }
    script = "echo one\\necho two\\necho three\\n"
  }
}
"""

CONFIG_AFTER = """
resource "terraform_data" "cfg" {
  input = {
    name   = "web"
    size   = 2
    added  = "fresh"
    ports  = [80, 8443]
    tags   = { env = "prod", team = "core" }
    script = "echo one\\necho 2\\necho three\\n"
  }
}
"""


def test_a_nested_object_change_shows_exactly_the_keys_that_change(
    ui: UI, tenant: Tenant, api: Api, tmp_path: Path
) -> None:
    repo = make_stack_repo(tmp_path, CONFIG_BEFORE)
    api.create_stack("cfg", repo)
    api.settings("", {"require_approval": False})
    api.wait(api.start("cfg", "apply"), "applied")
    repo.commit({"main.tf": CONFIG_AFTER}, "Bigger, in production")
    run_id = api.start("cfg", "plan")
    api.wait(run_id, "planned")

    page = ui.open()
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/runs/{run_id}")
    change = page.locator('[data-address="terraform_data.cfg"]')
    row = change.locator('tr[data-attribute="input"]')
    expect(row).to_be_visible()
    shown = row.locator("li[data-diff-path]")
    expect(shown.first).to_be_visible()
    kinds = dict(shown.evaluate_all("rows => rows.map(r => [r.dataset.diffPath, r.dataset.diffKind])"))
    assert kinds == {
        "input.added": "added",
        "input.old": "removed",
        "input.ports": "changed",
        "input.ports[1]": "changed",
        "input.script": "changed",
        "input.size": "changed",
        "input.tags": "changed",
        "input.tags.env": "changed",
    }
    expect(row.locator('[data-diff-path="input.size"]')).to_contain_text("size = 1 → 2")
    expect(row.locator('[data-diff-path="input.tags.env"]')).to_contain_text('env = "dev" → "prod"')
    expect(row.locator('[data-diff-path="input.ports[1]"]')).to_contain_text("443 → 8443")
    expect(row.locator('[data-diff-path="input.added"]')).to_contain_text('"fresh"')
    expect(row.locator('[data-diff-path="input.old"]')).to_contain_text('"retired"')
    # The multi-line string, line by line: one line out, one in, the rest context.
    script = row.locator('[data-diff-path="input.script"]')
    expect(script.locator('[data-line-op="removed"]')).to_have_text(re.compile(r"echo two$"))
    expect(script.locator('[data-line-op="added"]')).to_have_text(re.compile(r"echo 2$"))
    expect(script.locator('[data-line-op="same"]')).to_have_count(2)
    # What does not change is folded, and can be shown: in the tags, and in the input itself.
    expect(row.locator('[data-diff-path="input.name"]')).to_have_count(0)
    expect(row.locator('[data-diff-path="input.tags.team"]')).to_have_count(0)
    unchanged = row.get_by_role("button", name="Show 1 unchanged key")
    expect(unchanged).to_have_count(2)
    row.locator('[data-diff-path="input.tags"]').get_by_role("button", name="Show 1 unchanged key").click()
    expect(row.locator('[data-diff-path="input.tags.team"]')).to_have_attribute("data-diff-kind", "same")
    expect(row.locator('[data-diff-path="input.name"]')).to_have_count(0)
    row.get_by_role("button", name="Show 1 unchanged key").click()
    expect(row.locator('[data-diff-path="input.name"]')).to_have_attribute("data-diff-kind", "same")
    # terraform_data's output follows its input: unknown until the apply.
    expect(change.locator('tr[data-attribute="output"]')).to_contain_text("(known after apply)")
    ui.check_screen(page, "desktop-diff")

    phone = ui.open(ui.sizes["phone"])
    ui.sign_in(phone, tenant.token, f"/orgs/{tenant.org}/runs/{run_id}")
    expect(phone.locator('[data-diff-path="input.tags.env"]')).to_be_visible()
    ui.check_screen(phone, "phone-diff")


MANY = """
resource "terraform_data" "old" {
  count = 5
  input = "o-${count.index}"
}
"""


def test_tick_all_confirms_every_deletion_at_once_but_approving_stays_a_separate_click(
    ui: UI, tenant: Tenant, api: Api, tmp_path: Path
) -> None:
    repo = make_stack_repo(tmp_path, MANY)
    api.create_stack("cleanup", repo)
    api.settings("", {"require_approval": False})
    api.wait(api.start("cleanup", "apply"), "applied")
    api.settings("", {"require_approval": None, "confirm_destructive": True})
    repo.commit({"main.tf": 'resource "terraform_data" "kept" { input = "k" }\n'}, "Retire the old ones")
    run_id = api.start("cleanup", "apply")
    api.wait(run_id, "awaiting_approval")

    page = ui.open()
    ui.sign_in(page, tenant.token, f"/orgs/{tenant.org}/runs/{run_id}")
    approval = page.get_by_test_id("approval")
    approve = approval.get_by_role("button", name=re.compile("^Approve"))
    expect(approval.get_by_test_id("confirm-progress")).to_have_text("0 of 5 confirmed")
    expect(approve).to_be_disabled()

    # Asked first, with the count; canceling ticks nothing.
    approval.get_by_role("button", name="Tick all 5").click()
    question = approval.get_by_role("alertdialog")
    expect(question).to_contain_text("Tick all 5 addresses (5 deletions)?")
    question.get_by_role("button", name="Cancel").click()
    expect(approval.get_by_test_id("confirm-progress")).to_have_text("0 of 5 confirmed")

    approval.get_by_role("button", name="Tick all 5").click()
    approval.get_by_role("button", name="Yes, tick all 5").click()
    expect(approval.get_by_test_id("confirm-progress")).to_have_text("5 of 5 confirmed")
    for n in range(5):
        expect(
            approval.get_by_role("checkbox", name=f"Confirm deleting terraform_data.old[{n}]")
        ).to_be_checked()
    # Ticking is not approving: the run still waits for the explicit click.
    expect(approve).to_be_enabled()
    expect(page.get_by_test_id("run-status")).to_have_text("awaiting approval")
    assert api.run(run_id)["status"] == "awaiting_approval"
    ui.check_screen(page, "desktop-tick-all")
    phone = ui.open(ui.sizes["phone"])
    ui.sign_in(phone, tenant.token, f"/orgs/{tenant.org}/runs/{run_id}")
    phone.get_by_test_id("approval").get_by_role("button", name="Tick all 5").click()
    expect(phone.get_by_test_id("approval").get_by_role("alertdialog")).to_be_visible()
    ui.check_screen(phone, "phone-tick-all")

    approve.click()
    expect(page.get_by_test_id("run-status")).to_have_text("applied")
    assert sorted(api.run(run_id)["approval"]["acknowledged"]) == [
        f"terraform_data.old[{n}]" for n in range(5)
    ]
